#pragma once
/// @file min_total_duration.hpp
/// Minimum makespan ("total duration") as one LP over time fractions (Gavel, OSDI'20,
/// section 4.2 "Other Policies as Optimization Problems", minimize makespan; heterogeneity-
/// aware, the agnostic variant runs it on the type-blind view, policies/type_blind.hpp).
///
/// Objective: the smallest C such that every active job can finish its remaining steps by
/// now + C at its effective throughput: sum_j T[m][j] x[m][j] * C >= rem_m for all m, with
/// T = policy_throughputs(s) and rem_m = remaining_steps. Gavel bisects over C with a
/// feasibility LP per step; with z = 1/C the condition is linear in (x, z), so one LP is
/// exact: maximise z s.t. sum_j T[m][j] x[m][j] >= rem_m z, i.e. a max-min over
/// sum_j (T[m][j] / rem_m) x[m][j]. Constraints: 0 <= x[m][j] <= 1; sum_j x[m][j] <= 1;
/// sum_m scale_m x[m][j] <= gpus_j; x[m][j] = 0 where T[m][j] = 0 or gpus_j < scale_m. Jobs
/// with nothing left (rem_m <= 0) or that can run nowhere get x = 0 and are left out.
/// Weighting: none by scale factor, as in Gavel's code (scheduler/policies/
/// min_total_duration.py): the makespan asks when each job finishes, a time, so a gang's
/// GPU count enters only through the capacity rows.
///
/// Solution: `allocation_lp` (max_min objective, rows T/rem) over job classes, warm-started
/// from the previous round's basis. Efficiency stage (option `efficiency_stage`, default
/// on): with C fixed, jobs off the critical path would get whatever the simplex vertex gives;
/// we then maximise sum_m T[m]·x[m] / rem_m (the rate at which the jobs shrink) keeping C.
///
/// Complexity: one or two LPs of C*K + 1 columns and 2C + K rows per round (progress
/// changes rem, so it is recomputed every round), plus O(M K).

#include <memory>
#include <vector>

#include "policies/allocation_lp.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's makespan-minimising allocation.
class min_total_duration final : public allocation_policy {
 public:
  /// `efficiency_stage`: run the second LP that uses capacity off the critical path.
  explicit min_total_duration(bool efficiency_stage);
  /// Time fractions minimising the time by which every active job can finish.
  result<allocation> allocate(const snapshot& s) override;
  /// Keeps the spent allocation's rows for the next round's input and solution.
  void recycle(allocation&& spent) override { lp_.rows().give(std::move(spent.x)); }
  /// Progress changes rem, so the allocation is recomputed every round.
  bool recompute_every_round() const override { return true; }
  /// Makespan (seconds from now) of the last allocation at the throughputs the policy saw;
  /// 0 without jobs.
  double last_makespan() const { return makespan_; }
  /// Statistics of the last LP solve (value = z* = 1 / makespan).
  const allocation_lp_result& last_solve() const { return last_; }

 private:
  allocation_lp_settings settings_;
  allocation_lp lp_;
  allocation_lp_result last_;
  double makespan_ = 0;
};

/// Options of min_total_duration: `efficiency_stage` (0 or 1, default 1).
std::vector<option_spec> min_total_duration_options();

/// Builds makespan minimisation from validated options.
std::unique_ptr<allocation_policy> make_min_total_duration(const options& o);

}  // namespace tessera
