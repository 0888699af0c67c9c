#pragma once
/// @file hops.hpp
/// Hops (Wang, Wang, Zheng, SoCC'24: "Hops: Fine-grained Heterogeneous Sensing, Efficient and
/// Fair Deep Learning Cluster Scheduling System"): server-level heterogeneity, latency-ratio
/// fairness, a priority-weighted ILP per round and fragment filling. Built from a summary of
/// the paper (without its section numbers); where it is silent the choice is ours, see
/// docs/hops.md.
///
/// Each round:
///  1. Throughputs per server entity (runtime/core/server_throughput.hpp, `snapshot::rates`):
///     server table, GPU-type table, analytic model. Servers with the same GPU type, speed
///     factor and size, and no measurements of their own, form a server class.
///  2. Latency ratio LR_i = wait_i / E_i, wait_i = now - arrival - run time, E_i = total steps
///     / the job's best configuration throughput (its expected run time). Queue: LR (plus
///     `preempt_margin` for a job that ran last round) descending, then arrival, then id.
///     Addition (option `critical_slack`, 0 = off): a job whose remaining run time is within
///     the slack of the makespan bound L = max(remaining work / GPUs, longest remaining run
///     time) is makespan-critical; critical jobs head the queue and are valued at the window's
///     top LR times 10 in the ILP, so they run, and on their fastest configuration.
///  3. Service window: from the head of the queue, the longest prefix whose minimum GPU needs
///     fit in `window` x the cluster's GPUs (at least one job).
///  4. ILP over the window (CBC, runtime/solver/milp.hpp):
///       maximise  sum_i sum_c (LR_i + bias)^lambda * G[i][c] * (1 + stay_bonus*[c keeps i])
///                 * y[i][c]                                    (see size_value below)
///       s.t.      sum_c y[i][c] <= 1                           (one configuration per job)
///                 per-server GPU capacity                       (exactly, see below)
///                 y binary, G[i][c] = throughput of c / throughput of i's slowest c.
///     Addition (option `size_value` s, default 1; 0 = the paper's objective): the value is
///     (LR_i + bias)^lambda * (G[i][c] + s * GPUs of c). With G alone a multi-GPU job is worth
///     no more than a one-GPU job, so whenever types or packing force the ILP to leave
///     something out it leaves out the big job, however high its LR
///     (docs/benchmarks/policies.md, "Gavel's 108 GPUs, every policy in one table"); the GPU
///     term weighs who runs per GPU, while G still decides where.
///     A configuration is (server class, GPU count from the job's acceptable set, shape):
///     one server; or, for a count above the class's server size, whole servers plus one
///     remainder share ("adjacent, filled servers"); or, for jobs with low placement
///     sensitivity only, two halves on two servers of the class. Placement-sensitive jobs get
///     one-server configurations only (spanning only when no server is big enough).
///     Servers of a class are interchangeable, so instead of one column per (job, server) the
///     ILP keeps one per (job, class, count, shape) and enforces per-server capacity exactly
///     with fill patterns: n[k][p] = servers of class k filled with pattern p (a maximal
///     multiset of share sizes summing to at most the server size); for each class and share
///     size d, shares of size d <= sum_p mult_p(d) n[k][p], and whole-server use plus
///     sum_p n[k][p] <= servers of k. Any per-server packing induces such patterns and any
///     pattern solution packs, so the feasible set is the same as the per-server ILP's,
///     without its symmetric copies, which CBC proves optimal far sooner than the per-server
///     ILP (bench_hops_bench --compare; docs/benchmarks/policies.md, "ILP solve time per
///     round, full queue").
///     Addition (option `group_tolerance` t, see hops_ilp.hpp): window jobs of one shape
///     (same configurations, values proportional) whose weights lie within a factor 1 + t
///     share one integer column per configuration; the shape's chosen configurations go to
///     its highest-weight jobs, best first. The plan's objective stays within 1 + t of the
///     per-job ILP's, and the model's size follows the window's shapes (about 130 at 10,000
///     GPUs) instead of its jobs (5,000). t = 0 is the per-job ILP.
///  5. Packing: whole-server shares first (on the job's previous servers when possible,
///     else consecutive servers), then patterns to servers (a running job's previous server
///     gets a pattern holding its share when possible), then shares to pattern slots.
///  6. Fragment filling: leftover GPUs go to unplaced jobs in queue order, the window's first
///     and then jobs beyond it: one server when a server has room (the job's previous server
///     first, then the fastest, then best fit); spread over several servers (fastest first)
///     only for jobs with low placement sensitivity, i.e. one-server / two-server per-GPU
///     throughput < `sensitivity_threshold` (1-GPU jobs: 1).
///  Addition (option `restart_amortize` a, default 8; 0 = the paper's Hops): a job the
///  executor charges a restart for (job_view::restart_seconds r > 0) that ran last round and
///  (re)started its placement less than a x r ago is pinned: only its staying configurations
///  are offered, it heads the queue and is valued as a critical job, so it keeps its servers
///  until the restart has paid for itself (policies/restart_clock.hpp, shared with the
///  `tessera` policy). Without restart costs nothing changes. Without it Hops re-plans every
///  job each round and, with Sia's 25-250 s restarts in 60 s rounds, restarted jobs 5,949
///  times on Sia's Philly set.
///  Solving the ILP (option `ilp_relaxation_first`, default 1; an addition): CLP solves its LP
///  relaxation from a start basis holding each job group's best configuration; an integral
///  optimum is the plan, else the rounding neighbourhood (integral columns fixed, fractional
///  ones between floor and ceiling, pattern counts free) is solved exactly, and accepted when
///  within `ilp_gap` of the relaxation's bound; otherwise CBC solves the whole ILP. At 10,000
///  GPUs the relaxation answered 15,249 of 15,253 rounds (docs/benchmarks/simulator-scale.md).
///  `ilp_gap` defaults to 1e-3: the grouped model is itself within group_tolerance (1e-2) of
///  the per-job optimum, so a tighter gap buys nothing the grouping keeps.
///  CBC failing, or stopping without a solution, falls back to a greedy pass in queue order
///  (each job's best-valued configuration that fits) before fragment filling.
///
/// Sources: hops.cpp (the round: steps 1-3 and the plan), hops_classes.cpp (server classes and
/// their cached rates), hops_queue.cpp (each job's configurations, cached across rounds by
/// type and last-round placement), hops_ilp.hpp (step 4), hops_packing.hpp (step 5; the
/// greedy pass and fragment filling of step 6 are in hops_packing.cpp); hops_internal.hpp
/// declares what they share.
///
/// Complexity per round, M active jobs, W window jobs, K classes, A acceptable counts, P
/// patterns per class, G job groups (G = W when ungrouped): O(M log M) queue, O(M) look-ups
/// of configuration sets (O(K A) to build one where a job's placement changed), O(W K A log
/// G) grouping, an ILP with at most
/// G*K*A*3 + K*P integer columns and G + K*(|D|+1) rows, and O((M + S) S) fragment filling
/// for S servers.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "policies/hops_ilp.hpp"
#include "policies/hops_packing.hpp"
#include "policies/options.hpp"
#include "policies/restart_clock.hpp"
#include "runtime/core/job_index.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/solver/milp.hpp"

namespace tessera {

namespace detail {
class hops_config_sets;
class hops_server_classes;
struct hops_round_state;
}  // namespace detail

/// Hops' parameters (see hops_options for the defaults and bounds).
struct hops_params {
  double lambda = 1.0;                 ///< exponent on (LR + bias)
  double bias = 1.0;                   ///< added to LR before the exponent
  double window = 1.0;                 ///< window fits this multiple of the cluster (0: all)
  double sensitivity_threshold = 1.4;  ///< placement-sensitive at or above this ratio
  double ilp_time_limit = 2.0;         ///< seconds per CBC solve
  double ilp_gap = 1e-3;               ///< relative gap at which the ILP's solve stops
  bool ilp_preprocess = true;          ///< CBC's preprocessing (milp_settings::preprocess)
  bool ilp_relaxation_first = true;    ///< milp_settings::relaxation_first
  double stay_bonus = 0.05;            ///< objective bonus for keeping a running placement
  bool fill_fragments = true;          ///< run fragment filling
  bool use_ilp = true;                 ///< false: greedy in queue order instead of the ILP
  bool split_configs = true;           ///< two-half configurations for low-sensitivity jobs
  double preempt_margin = 0.0;         ///< LR head start of jobs that ran in the last round
  double critical_slack = 0.1;         ///< makespan-critical jobs go first (0: off)
  double size_value = 1.0;             ///< value += w * size_value * GPUs (0: the paper's)
  double group_tolerance = 0.01;       ///< hops_ilp_input::group_tolerance (0: per job)
  double restart_amortize = 8.0;       ///< pin restarted jobs for this x their restart (0: off)
};

/// Latency ratio of a job at time `now`: wait / expected run time, wait = now - arrival - run
/// time (never negative). 0 when `expected_run_time` is not positive.
double latency_ratio(double now, const job_view& jv, double expected_run_time);

/// Placement sensitivity: one-server over two-server per-GPU throughput (`single_rate` and
/// `multi_rate` are whole-configuration rates at the same GPU count); 1 for one GPU, infinite
/// when the two-server rate is 0.
double placement_sensitivity(int gpus, double single_rate, double multi_rate);

// ---- the policy ------------------------------------------------------------------------------

/// Figures of the last planned round, for the bench and tests.
struct hops_round_stats {
  int active_jobs = 0;
  int window_jobs = 0;
  bool ilp_ran = false;              ///< the ILP was built and CBC called
  bool ilp_fallback = false;         ///< CBC failed or found nothing; the greedy pass was used
  bool ilp_from_relaxation = false;  ///< answered from the LP relaxation (no full CBC search)
  milp_outcome outcome = milp_outcome::optimal;
  double ilp_seconds = 0;   ///< CBC wall time
  double plan_seconds = 0;  ///< whole plan() wall time
  int columns = 0, rows = 0, integers = 0;
  int groups = 0;                ///< the ILP's job groups (window jobs when not grouped)
  int placed_by_ilp = 0;         ///< jobs placed by the ILP (or the greedy pass)
  int placed_by_filling = 0;     ///< jobs placed by fragment filling
  int idle_gpus = 0;             ///< GPUs left idle by the plan
  double max_latency_ratio = 0;  ///< over the active jobs, at plan time
};

/// The Hops policy.
class hops final : public policy {
 public:
  /// A policy named `name` (its registry name) with the given parameters.
  hops(std::string name, hops_params p);
  /// Out of line: the server classes are a type complete only in the policy's sources.
  ~hops() override;
  /// The name it was built with.
  std::string name() const override { return name_; }
  /// Plans one round (steps 1-6 above).
  result<round_plan> plan(const snapshot& s) override;
  /// Figures of the last round planned.
  const hops_round_stats& last_round() const { return stats_; }
  /// The last ILP built (empty before the first; with the ILP off, only its values).
  const hops_ilp_input& last_ilp() const { return last_ilp_; }

 private:
  /// Step 1: the executor's throughput model, else one built from the snapshot's per-type
  /// rows.
  const server_throughput& throughputs(const snapshot& s);
  /// Steps 4-5: the ILP over the first `window` queue jobs (objective values per job and
  /// configuration already in last_ilp_.value) and its packing into `st.placed`; false when
  /// CBC failed or found nothing.
  bool place_by_ilp(std::size_t window, detail::hops_round_state& st);

  std::string name_;
  hops_params p_;
  hops_round_stats stats_;
  hops_ilp_input last_ilp_;              ///< also each round's working input (its storage reused)
  job_index index_;                      ///< scratch: the snapshot's jobs by id
  std::vector<const assignment*> prev_;  ///< scratch: per snapshot job, its last assignment
  restart_clock restarts_;               ///< when jobs charged a restart (re)started
  std::unique_ptr<server_throughput> fallback_;  ///< when the snapshot carries no rates
  std::unique_ptr<detail::hops_server_classes> classes_;
  std::unique_ptr<detail::hops_config_sets> sets_;  ///< step 2's configurations, cached
  std::uint64_t sets_generation_ = 0;  ///< the classes' generation `sets_` was built for
};

/// Hops' options: lambda, bias, window, sensitivity_threshold, ilp_time_limit, ilp_gap,
/// ilp_preprocess, ilp_relaxation_first, stay_bonus, fill_fragments, use_ilp, split_configs,
/// preempt_margin, critical_slack, size_value, group_tolerance, restart_amortize.
std::vector<option_spec> hops_options();

/// Builds Hops named `name` from validated options.
std::unique_ptr<policy> make_hops(const std::string& name, const options& o);

}  // namespace tessera
