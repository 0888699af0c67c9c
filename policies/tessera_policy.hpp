#pragma once
/// @file tessera_policy.hpp
/// tessera's own policy, `tessera`: Hare's task-level filling under an order of three job
/// classes, then forked copies on the GPUs nobody else can use. How the defaults were chosen,
/// with the figures: docs/benchmarks/policies.md, "How tessera's defaults were chosen".
///
/// Per round, M active jobs:
///  1. Classes, in this order:
///     a. critical (option `critical_share` c; default 5, 0 = off): the job's remaining time
///        alone at its best rate, rem_m = remaining steps / best_m, is at least c x the
///        cluster's drain time sum_m K_m rem_m / GPUs: it bounds the makespan whatever else
///        runs. In a round with a type plan (step 2) also when rem_m is at least
///        `critical_horizon` (default 0.9, 0 = off; T >= rem_m always) x the plan's horizon T:
///        the job's own run time (nearly) bounds the fluid drain, so it should run now. T counts
///        the GPU types' capacities, which the drain time above does not; on Sia's workloads a late
///        6 h ImageNet job then starts once the work left drains in about 6 h, instead of waiting
///        until the drain time is a fifth of it. By rem_m descending.
///     b. starving: urgency u_m = max(LR_m / g, F_m / h) >= 1, by u_m descending. LR_m = wait_m
///        / E_m, wait_m = now - arrival - run time, E_m = total steps / best_m (Hops' ratio;
///        the metric's is wait over the run time actually taken). The guard g = lr_guard x
///        round length / 3600 s (option `lr_guard`, default 8, 0 = off): a job is starving
///        once it has waited lr_guard rounds per hour of its expected run time, g = 0.8 at
///        Gavel's 360 s rounds and 0.067 at Hops' 30 s rounds.
///        Early guard (option `early_guard` e, default 1.5, 0 = off; `early_share` s,
///        default 0.05): a job whose LR_m has passed e rounds per hour of expected run time
///        (0.0125 at 30 s rounds) but not the guard g is starving too while the GPUs of such
///        jobs, most urgent first, fit in s x the cluster's; they follow the jobs past g. On
///        Hops' 512-GPU setting the guard alone let a long job wait until g (its LR 0.087
///        against hops' 0.026, the worst of the trace); the early guard brings tessera's
///        worst LR to hops' there at 0-3% of average JCT, where lowering g itself cost
///        Gavel's overloaded 360 s cells 4-16% (docs/benchmarks/policies.md, "How tessera's
///        defaults were chosen").
///        F_m (option `ftf_guard` h; default 1.2, 0 = off) is the finish-time fairness the
///        job heads for if it runs at its fair share from now on: (elapsed x fair rate +
///        remaining steps) / total steps, the fair rate being its throughput on the cluster's
///        GPU mix (per-type rates weighted by GPU counts) times min(1, GPUs / (active jobs x
///        K)), the simulator's isolated 1/M share; above 1 the job has made fewer steps than
///        that share would have.
///     c. the rest (option `by_remaining`, default 1) by least remaining work
///        (hare_offline.hpp: remaining steps x K / best / priority weight) ascending, Smith's
///        rule at each job's best speed: it needs job sizes, which the traces give (Gavel's
///        jobs declare their steps). `by_remaining` 0: by Hare's attained service instead
///        (hare.hpp: steps done x K / best / weight), non-clairvoyant, for jobs whose sizes
///        are unknown.
///     Ties: arrival, then id.
///  2. Filling: each job in that order gets the placement of its K tasks with the shortest
///     step on the GPUs still free (hare.hpp: one server or an earliest-finish spread, several
///     tasks per GPU when that is faster; option `relaxed`, default 1; 0 keeps one task per
///     GPU).
///     Type plan (option `type_plan`, default 1; policies/type_plan.hpp; only in rounds with
///     jobs the executor charges a restart, and for those jobs): the round's fluid
///     makespan program splits the active jobs' remaining work over the GPU types so that it
///     drains soonest, giving each scarce type to the jobs that gain most there. A job first
///     tries each type holding at least `plan_share` (default 0.1) of its group's work, alone
///     and at a rate of at least min_fit x its best, then the shortest step left. A long job
///     (remaining time at its best rate >= `plan_hold` x the plan's horizon; default 0.02,
///     0 = off) does not take a bottleneck type outside its plan: on Sia's newtrace
///     DeepSpeech2 and YOLOv3 jobs (within 3-7% of their best rate on the slower types) took
///     the 16 A100s that the CIFAR-10 and BERT jobs needed; the plan and the hold cut
///     newtrace's makespan from 73.8 to 67.5 h (docs/benchmarks/sia.md).
///     Fit floor (option `min_fit` f, default 0.3; 0 = off): a job the executor charges a
///     restart (R > 0) takes a placement only when its step rate is at least f x its best
///     rate (its throughput on its fastest type); else it waits this round. Step 0 keeps a
///     started job for a x R seconds, so a poor placement taken now would hold it there: on
///     Sia's workloads BERT ran on T4s at a twelfth of its A100 rate and ImageNet jobs ten
///     tasks to one GPU. Patience (option `fit_patience` q, default 10): the floor no longer
///     applies once the job's latency ratio wait / (total steps / best rate) reaches q, so
///     no job waits for ever for a fit the cluster cannot give. R = 0 (Gavel's simulator,
///     the runtime): no floor, plans as before.
///  3. Forking (option `max_copies`, default 3, 1 = off; never more than snapshot::copy_limit):
///     while GPUs are free, jobs in the same order, round robin, may add one more copy on
///     servers their other copies do not use, placed by the same rule. A copy is added only
///     when the job cannot finish within the round on the copies it has, and the job's
///     effective rate grows by at least the fraction `fork_gain` (default 0.02): with copy
///     step rates r_c (1 / step time),
///     eff(C + 1) (sum r_c + r_new) >= (1 + fork_gain) eff(C) sum r_c, where eff is the
///     executor's statistical efficiency of averaged copies (snapshot::fork_efficiency,
///     runtime/core/copy_efficiency.hpp; 1 when the executor gives none). So a copy goes only
///     where it pays after the efficiency loss, and only on GPUs that every job in the order
///     before it has passed up.
///     Latency-ratio cap (option `fork_lr_cap` c, default 2.4, 0 = none): a copy is not added
///     when the job's projected latency ratio with it, wait_m / (run time_m + remaining_m /
///     its effective rate with the copy), would exceed c x round length / 3600 s: 0.02 at
///     Hops' 30 s rounds, 0.24 at Gavel's 360 s.
///
///  0. Restarts (option `restart_amortize` a, default 16; 0 = off): before the classes, a job
///     whose executor charges a restart (job_view::restart_seconds R > 0) keeps the GPUs it
///     ran on last round until it has run a x R seconds there since it (re)started, so a
///     restart costs at most 1 / a of the run it buys. Without it the order reshuffles the
///     jobs each round: on Sia's workloads (restarts of 25-250 s, 60 s rounds) `tessera`
///     restarted jobs 8,963 times on one workload of 160 jobs. R = 0 (Gavel's simulator,
///     the runtime) leaves every plan as before.
///     Option `sticky` (default 0): such a job also keeps its GPUs past the amortisation while
///     they are its best (copy 0 ran last round on its fastest type only, one task per GPU).
///     On Sia's workloads it lowers p99 JCT below `sia`'s and costs average JCT
///     (docs/benchmarks/sia.md); off by default for that.
///
/// Cost per round, M active jobs, S servers, K tasks, C copies: O(M log M) order, O(M) guards,
/// one LP over the jobs grouped by throughput vector (the type plan; its size does not grow
/// with M), and hare.hpp's filling cost per job and copy placed (bucketed free GPUs, no scan
/// of the servers; a planned type is tried on its own first), task times cached per
/// (job type, K).
/// bench/tessera_policy_bench.cpp measures it.

#include <memory>
#include <string>
#include <vector>

#include "policies/hare.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// The settings of `tessera` (see tessera_policy_options for the bounds).
struct tessera_params {
  hare_fill_params fill;          ///< relaxed task filling
  double lr_guard = 8;            ///< starving when LR >= this x round length / 3600 s; 0 = off
  double early_guard = 1.5;       ///< ... or >= this, within early_share of the GPUs; 0 = off
  double early_share = 0.05;      ///< GPUs' share for jobs past the early guard only
  double ftf_guard = 1.2;         ///< starving when the projected FTF >= this; 0 = no guard
  double critical_share = 5;      ///< critical when rem >= this x drain time; 0 = none
  int max_copies = 3;             ///< copies per job; 1 = no forking
  double fork_gain = 0.02;        ///< least relative gain in effective rate for a new copy
  double fork_lr_cap = 2.4;       ///< no copy lifting the projected LR above this x round
                                  ///< length / 3600 s; 0 = none
  bool by_remaining = true;       ///< normal class by least remaining work, not least service
  double restart_amortize = 16;   ///< a restarted job keeps its GPUs for this x its restart time
  bool sticky = false;            ///< a restarted job at its best keeps its GPUs (step 0)
  double min_fit = 0.3;           ///< a job charged restarts starts at >= this x its best rate
  double fit_patience = 10;       ///< ... until its latency ratio reaches this
  bool type_plan = true;          ///< planned types first (policies/type_plan.hpp)
  double plan_share = 0.1;        ///< least share of a job's work that puts a type in its plan
  double plan_hold = 0.02;        ///< long jobs (rem >= this x horizon) off unplanned bottlenecks
  double critical_horizon = 0.9;  ///< with a plan, critical when rem >= this x its horizon
};

/// The job classes of step 1, highest first.
enum class tessera_class { critical = 0, starving = 1, normal = 2 };

/// The order of step 1: indices into s.jobs, first to be placed first; `classes` (when not
/// null) receives each job's class, indexed like s.jobs; `horizon` is the type plan's (0:
/// no plan this round).
std::vector<std::size_t> tessera_order(const snapshot& s, const tessera_params& p,
                                       std::vector<tessera_class>* classes = nullptr,
                                       double horizon = 0);

/// Whether adding a copy of step rate `r_new` to copies with total step rate `r_sum`, now
/// `copies` of them, pays under the efficiency `eff(n)` of n averaged copies (step 3's test).
bool tessera_fork_pays(double r_sum, double r_new, int copies, double fork_gain, double eff_now,
                       double eff_next);

/// The least step rate at which step 2 places copy 0 of `jv` (the fit floor: min_fit x its
/// best rate while it is charged restarts and its latency ratio at `now` is below
/// fit_patience; 0 otherwise).
double tessera_fit_floor(const job_view& jv, double now, const tessera_params& p);

/// `tessera`'s options: relaxed, lr_guard, ftf_guard, critical_share, max_copies, fork_gain,
/// by_remaining, fork_lr_cap, restart_amortize, sticky, min_fit, fit_patience.
std::vector<option_spec> tessera_policy_options();
/// Builds `tessera` named `name` from validated options.
std::unique_ptr<policy> make_tessera(const std::string& name, const options& o);
/// Builds it from explicit settings.
std::unique_ptr<policy> make_tessera_policy(const std::string& name, tessera_params p);

}  // namespace tessera
