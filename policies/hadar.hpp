#pragma once
/// @file hadar.hpp
/// Hadar (IPDPS'24) and HadarE (arXiv'25): task-level heterogeneity-aware online primal-dual
/// scheduling, and its forking variant. Built from summaries of the two papers; the
/// published text gives the framework, not the constants, so the choices below are ours.
///
/// Objective (per round, online): maximise the total utility of the admitted schedules,
///   sum_m u_m(P_m),  u_m(P) = w_m * k_m * rate_m(P) / best_m,
/// where k_m is the job's scale factor (GPUs per copy), rate_m(P) its steps/s on placement P,
/// best_m its rate on the fastest whole single-type placement (so rate/best is the fraction of
/// its ideal speed it gets, and u is "ideal-GPU-equivalents" of progress this round; a copy of
/// a forked job is valued the same way, since job progress is the sum of its copies'), and
///   w_m = priority_weight_m * (1 + wait_m / max(rem_m, round length))
/// is an ageing weight (the response ratio: wait_m = time in the system not holding GPUs,
/// rem_m = remaining steps / best_m). A waiting job's weight grows without bound while a new
/// job starts at 1, which makes the policy starvation-free (see "Order").
///
/// Constraints: per-server GPU capacity; one placement per job copy, of exactly k_m GPUs, on
/// GPU types the job can run on; HadarE: at most `max_copies` copies per job, the copies of
/// one job on pairwise distinct servers. A GPU type whose whole pool has fewer GPUs than k_m
/// is not usable by the job (the job view gives it no throughput there), even in a mix.
///
/// Placement and speed (task-level heterogeneity): one copy's k_m GPUs may span servers and
/// GPU types. Synchronous data parallelism makes every step wait for the slowest task, so a
/// placement runs at k_m x the slowest per-GPU rate among its servers (multi-server entries
/// of the table when it spans servers). This is the simulator's rule
/// (runtime/core/server_throughput.hpp: `server_throughput::rate`); the policy applies it to
/// per-server rates it reads from `snapshot::rates` (cached per job type and scale factor).
///
/// Prices (the dual variables): a resource is one pool of interchangeable GPUs in one round,
/// i.e. the servers of one GPU type and speed factor. Its per-GPU price at utilisation
/// f = used / capacity is the classic online primal-dual exponential
///   p_c(f) = v_c * L * (U / L)^f,
/// and a placement taking g GPUs from a pool pays sum_{i<g} p_c((used + i) / capacity). Prices
/// restart at v_c L every round (a round is a new time slot). v_c, the pool's value, is the
/// mean over the active jobs that can use it of (their rate there / their best rate), so a
/// K80 GPU costs about a third of a V100 one and a placement that parks fast GPUs at a slow
/// GPU's speed pays for them (`value_prices` = 0 sets v_c = 1). L and U come from the range
/// of the utility per GPU, w * rate / best, which is at most 1 for a fresh job (w = 1):
/// U = 1 (`price_high`): a full pool asks the utility per GPU of a fresh job at full speed;
/// L = 0.3 (`price_low`): on an empty pool a fresh job must reach 30% of its best speed per
/// unit of pool value (a lower L admits more slow mixed placements and raised the average
/// JCT: docs/benchmarks/policies.md, "Hadar and HadarE in simulation"). Pooling
/// the servers of a type (rather than pricing each 4-GPU server apart) is deliberate: with
/// per-server prices the exponential spreads one-GPU jobs over every server and leaves no
/// whole server for gang jobs; within a pool placement is best-fit.
///
/// Dual subroutine (per job, per round): enumerate candidate placements given the GPUs still
/// free: (a) each pool's best-fit single server with k_m free GPUs (the job's previous server
/// first when it has room); (b) for each pool c as the slowest admitted one, k_m GPUs from the
/// servers at least as fast as c, fastest first, then most free GPUs first (fewest servers),
/// which yields multi-server and mixed-type placements (`mixed_types` = 0 keeps a copy on one
/// type, for ablation). Pick the candidate maximising u_m(P) - cost(P); admit it only if that
/// payoff is positive, then raise the prices.
///
/// Order: "critical" jobs first, i.e. jobs whose remaining time alone (rem_m) is at least
/// `critical_share` (default 2) x the time the cluster needs to drain all remaining work
/// (sum_m k_m rem_m / GPUs): they bound the total time whatever else runs (the default trades
/// total time against average JCT: docs/benchmarks/policies.md, "Hadar and HadarE in
/// simulation"). Then w_m descending, then remaining time, arrival, id. Starvation-freedom:
/// a waiting job's w grows linearly in time while a new job starts near 1, so after a finite
/// time the job heads the order (only critical jobs, which finish, stay ahead), sees an empty
/// cluster and is admitted: each GPU's price is below v_c U while its pool is not full, so its
/// best placement costs less than k_m U max_c v_c <= k_m w_m = its utility once
/// w_m >= U max_c v_c (v_c <= 1 unless servers have speed factors above 1).
///
/// HadarE (forking): after every job has had its turn, a second pass gives jobs additional
/// copies (copy 1, then copy 2, ... up to `max_copies` - 1, round robin in the same order) on
/// servers none of the job's other copies use, by the same dual subroutine and admission
/// rule, while the job's copies placed so far could not finish its remaining steps within the
/// round. Progress of a job is the sum of its copies' (the simulator adds them and charges
/// one parameter averaging per round; see runtime/sim/sim_executor.hpp `copy_aggregation`).
///
/// Complexity per round, M active jobs, S servers, C server classes (pools split until every
/// cached rate is equal within one; policies/server_index.hpp), F GPUs per server, K
/// copies: O(M log M) ordering, O(S) to bucket the free GPUs, and per job and copy while
/// GPUs are free O(C F + C k) bucket steps for the candidates (each pool's best fit, and per
/// rate threshold the fastest k GPUs), not a sort of the S servers; throughput look-ups are
/// cached per (job type, k), with each pool's best rate, so a job costs O(C) to value.

#include <memory>
#include <vector>

#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Parameters of Hadar / HadarE (see hadar_options for bounds).
struct hadar_params {
  double price_low = 0.3;       ///< L: price per GPU of an empty pool
  double price_high = 1.0;      ///< U: price per GPU of a full pool
  double critical_share = 2.0;  ///< critical if rem >= this x drain time; 0 = no critical jobs
  int max_copies = 1;           ///< copies per job (1 = Hadar, > 1 = HadarE)
  bool mixed_types = true;      ///< one copy's GPUs may span GPU types (false: ablation)
  bool value_prices = true;     ///< scale each pool's prices by its value to the active jobs
};

/// The exponential price per GPU of a pool with `used` of `capacity` GPUs in use:
/// L * (U / L)^(used / capacity).
double hadar_price(double price_low, double price_high, double used, double capacity);

/// What `g` more GPUs cost on a pool with `used` of `capacity` in use: the sum of the prices
/// of the units taken one by one, sum_{i<g} hadar_price(L, U, used + i, capacity).
double hadar_cost(double price_low, double price_high, int used, int capacity, int g);

/// Hadar's options: price_low, price_high, critical_share.
std::vector<option_spec> hadar_options();
/// HadarE's options: Hadar's plus max_copies (default 3).
std::vector<option_spec> hadare_options();

/// Builds Hadar (one copy per job) named `name`.
std::unique_ptr<policy> make_hadar(const std::string& name, const options& o);
/// Builds HadarE (up to max_copies copies per job) named `name`.
std::unique_ptr<policy> make_hadare(const std::string& name, const options& o);
/// Builds either from explicit parameters (`name` is what policy::name returns).
std::unique_ptr<policy> make_hadar_policy(const std::string& name, hadar_params p);

}  // namespace tessera
