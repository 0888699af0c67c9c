#pragma once
/// @file type_plan.hpp
/// The fluid makespan plan of a round: on which GPU types the active jobs' remaining work
/// finishes soonest, if work could be split freely over the types. `tessera` places each job
/// on its planned types first (policies/tessera_policy.hpp, step 2).
///
/// Why: a job placed greedily on its fastest free GPUs takes the scarce type even when it
/// gains little there. On Sia's newtrace workloads the 16 A100s are the bottleneck: the jobs
/// fastest on them need 102 A100-hours per A100 over a 48 h trace, while DeepSpeech2 runs
/// within 3% of its A100 rate on an RTX 2080Ti and YOLOv3 is fastest on a T4. The plan gives
/// each type to the jobs with the largest comparative advantage there.
///
/// The program (jobs grouped by their throughput vector; one group g holds jobs of one job
/// type and task count K_g; r_gt their step rate on type t, W_g = K_g x the group's
/// remaining steps, L_g the longest remaining steps of one of its jobs; G_t GPUs of type t):
///
///     min  T + eps sum_{g,t} x_gt W_g / r_gt          eps = efficiency_weight / total GPUs
///     s.t. sum_t x_gt = 1                             each group's work is split over types
///          sum_g x_gt W_g / r_gt <= G_t T             each type's GPU-seconds fit by T
///          sum_t x_gt L_g / r_gt <= T                 one job runs on one type at a time
///          x_gt = 0 where r_gt < min_fit x max_t r_gt (too slow a fit), x >= 0
///
/// T is a lower bound on the time to drain the remaining work (no arrivals, no restarts,
/// tasks divisible). Under a heavy load the type rows bind and give T; under a light one the
/// longest job does, the types have room, and the small efficiency term puts each group on
/// its fastest types. A type whose row binds (nonzero dual) is a bottleneck: `tessera` keeps
/// long jobs outside its plan off it.
///
/// Cost: one LP of (groups x types + 1) columns and (2 groups + types) rows per round, at most
/// 54 groups on Sia's table: a newtrace workload (about 4,000 rounds) takes 0.7 s with the
/// plan against 0.2 s without, about 0.1 ms per round (docs/benchmarks/sia.md).

#include <cstddef>
#include <vector>

#include "runtime/core/plan.hpp"

namespace tessera {

/// Settings of the plan.
struct type_plan_params {
  double min_fit = 0.3;             ///< a type is planned only at >= this x the job's best rate
  double least_share = 0.1;         ///< a type is preferred when it holds >= this of the work
  double efficiency_weight = 0.01;  ///< weight of the GPU time term against T
};

/// The plan for one snapshot. Jobs of one group share its entries (no per-job copies).
struct type_plan {
  bool solved = false;                ///< false: no active job, or the LP failed
  double horizon = 0;                 ///< T in seconds
  std::vector<char> bottleneck;       ///< per GPU type: its capacity row binds
  std::vector<std::size_t> group_of;  ///< per job of s.jobs: its group, or no_group
  std::vector<std::vector<std::size_t>> group_prefer;  ///< per group: types, largest share first
  std::vector<std::vector<double>> group_share;        ///< per group: x_gt per GPU type
  static constexpr std::size_t no_group = static_cast<std::size_t>(-1);

  /// Job i's preferred types, largest share first (empty: no plan for it).
  const std::vector<std::size_t>& prefer(std::size_t i) const;
  /// Job i's group's share x_gt of type t (0 where not planned, or no plan for it).
  double share(std::size_t i, std::size_t t) const;
};

/// Solves the fluid makespan program above for the active jobs of `s`. Jobs without a
/// positive rate on any type get no preference.
type_plan fluid_type_plan(const snapshot& s, const type_plan_params& p);

}  // namespace tessera
