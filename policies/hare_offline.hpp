#pragma once
/// @file hare_offline.hpp
/// Hare's clairvoyant policy `hare_offline`: job sizes known, minimise average JCT. Hare
/// (HPDC'22, IEEE TCC'24) gives "a fast heuristic ... and derives its theoretical bound" for
/// known arrivals and sizes; the text we could read (summaries and the papers' abstracts)
/// does not state the heuristic or the bound, so the heuristic below is ours and we do not
/// quote the paper's bound for it.
///
/// Heuristic: shortest remaining work first, heterogeneity-normalised, over task splits.
///  - Remaining work of job m, in ideal GPU-seconds over its priority weight:
///        V_m = remaining_steps_m * K_m / best_m / w_m,
///    best_m = its best throughput over GPU types (policies/hare.hpp: hare_best_rate). This is
///    the GPU-seconds the rest of the job needs on its fastest type, so a job that is long on
///    a K80 but short on a V100 counts as short; it is Smith's ratio rule (processing volume /
///    weight) with volume measured at the job's best speed.
///  - Each round, jobs in increasing V_m (ties: arrival, id) take their K tasks with the same
///    task-by-task filling as `hare` (policies/hare.hpp: hare_fill): fastest GPUs for the job
///    first, several tasks on a fast GPU when that is faster, spilling onto slower types.
///    Preemptive at round boundaries (a newly arrived short job displaces a long one).
///  - Arrivals: jobs are planned when they arrive (the round loop shows a policy only active
///    jobs); sizes are what the policy knows beyond `hare`. Reserving GPUs for jobs that have
///    not yet arrived is not done.
///
/// What is proven (and what is not):
///  1. Lower bound, for any schedule in tessera's time model (runtime/core/task_split.hpp) that
///  runs
///     one copy of each job with its K tasks per step (a gang or a task split; not HadarE's
///     forked copies, nor Hops' other GPU counts): a step of job m takes at least the
///     shortest per-task time of any server, since some GPU runs at least one of its tasks
///     (a gang's rate is its slowest server's, no more than the fastest), so m runs at most
///     r*_m = max over servers u of 1 / tau_u steps/s (tau_u over single-server and spanning
///     entries), and
///         JCT_m >= p_m := total_steps_m / r*_m,   avg JCT >= (1/n) sum_m p_m.
///     `hare_offline_lower_bound` computes it; the tests check simulated JCTs against it.
///  2. Special cases where the rule is a classical one with a known bound: K = 1 jobs on
///     GPUs of one type, rounds short enough that preemption is free: the rule is preemptive
///     SRPT, optimal for average completion time on one machine with release dates (Schrage,
///     1968) and a 2-approximation on m identical machines (Phillips, Stein and Wein, Math.
///     Programming 82, 1998). With all jobs at time 0 it is SPT, optimal on one machine.
///  3. Not proven: any approximation ratio in the general setting (GPUs of different speeds,
///     K-task jobs whose tasks may share GPUs, 360 s rounds during which a job that finishes
///     leaves its GPUs idle). Rounds alone cost up to one round per job (arrival to the next
///     boundary) plus the idle tail of the round in which a job finishes; the measured ratio
///     of average JCT to the bound of (1) is measured by bench/hare_bound_bench.cpp and
///     reported in docs/benchmarks/policies.md ("hare_offline against its lower bound"),
///     not claimed as a theorem.
///
/// Complexity per round: as `hare` (O(M log M + M (S + K (S + K)))).

#include <memory>
#include <vector>

#include "policies/options.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// Remaining work of a job in ideal GPU-seconds over its weight:
/// remaining_steps x K / best / w (+infinity when it has no throughput anywhere).
double hare_remaining_work(const job_view& jv);

/// The lower bound of point 1 above, per job: total_steps / r*, r* the fastest per-server
/// rate of the job on `cl` from `table` (Gavel's per-type entries x speed factors, one-server
/// and spanning), over jobs in the given order; 0 for a job with no rate.
std::vector<double> hare_offline_lower_bound(const cluster& cl, const throughput_table& table,
                                             const std::vector<job>& jobs);

/// `hare_offline`'s options: relaxed (as `hare`).
std::vector<option_spec> hare_offline_options();
/// Builds `hare_offline` named `name`.
std::unique_ptr<policy> make_hare_offline(const std::string& name, const options& o);

}  // namespace tessera
