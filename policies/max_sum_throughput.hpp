#pragma once
/// @file max_sum_throughput.hpp
/// Maximum total throughput as an LP over time fractions (Gavel, OSDI'20, section 4.2 "Other
/// Policies as Optimization Problems", maximize total throughput; heterogeneity-aware, the
/// agnostic variant runs it on the type-blind view, policies/type_blind.hpp).
///
/// Objective: maximise sum_m sum_j T[m][j] x[m][j] / T_norm_m with T = policy_throughputs(s)
/// and T_norm_m = max_j T[m][j], the job's best throughput. Raw steps/s are not
/// comparable across models (a step of one model is not a step of another), so each job's
/// throughput is normalised by its own best: the objective counts "best-GPU-equivalents" of
/// progress. Constraints: 0 <= x[m][j] <= 1; sum_j x[m][j] <= 1; sum_m scale_m x[m][j] <=
/// gpus_j; x[m][j] = 0 where T[m][j] = 0 or gpus_j < scale_m.
/// Weighting: none by scale factor, as in Gavel's code (scheduler/policies/
/// max_sum_throughput.py sums each job's throughput, which already counts a gang's whole
/// step rate); Gavel sums raw steps/s, which we normalise per job as said above. Option
/// `normalise` 0 sums raw steps/s as Gavel's code and Sia's port of it do (to compare with
/// them: it favours models whose steps are short).
///
/// Solution: `allocation_lp` with the max_sum objective over job classes (exact: the
/// objective is linear, so averaging over a class keeps it). Ties among optimal allocations
/// are left to the simplex method. On the type-blind view every type looks the same, so the
/// LP maximises the GPU time handed out.
///
/// Complexity: one LP of C*K columns and C + K rows (C classes <= M jobs, K types) plus
/// O(M K); recomputed only when the job set changes.

#include <memory>
#include <vector>

#include "policies/allocation_lp.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's maximum-total-throughput allocation.
class max_sum_throughput final : public allocation_policy {
 public:
  /// `normalise`: each job's throughputs over its best (default), or raw steps/s.
  explicit max_sum_throughput(bool normalise = true) : normalise_(normalise) {}
  /// Time fractions maximising the sum of normalised throughputs.
  result<allocation> allocate(const snapshot& s) override;
  /// Keeps the spent allocation's rows for the next round's input and solution.
  void recycle(allocation&& spent) override { lp_.rows().give(std::move(spent.x)); }
  /// Statistics of the last LP solve; `value` is the optimal normalised sum.
  const allocation_lp_result& last_solve() const { return last_; }

 private:
  bool normalise_ = true;
  allocation_lp lp_;
  allocation_lp_result last_;
};

/// Options of max_sum_throughput: `normalise`.
std::vector<option_spec> max_sum_throughput_options();

/// Builds max total throughput from validated options.
std::unique_ptr<allocation_policy> make_max_sum_throughput(const options& o);

}  // namespace tessera
