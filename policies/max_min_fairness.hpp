#pragma once
/// @file max_min_fairness.hpp
/// Max-min fairness, i.e. least attained service (LAS), as an LP over time fractions
/// (Gavel, OSDI'20, section 4.1 "Max-Min Fairness as an Optimization Problem"; effective
/// throughput and the allocation matrix are section 3.1). This is Gavel's
/// heterogeneity-aware LAS; its heterogeneity-agnostic baseline is the same policy on the
/// type-blind pooled view (policies/type_blind.hpp).
///
/// Objective: maximise min_m (s_m / w_m) * sum_j T[m][j] x[m][j] / T_equal_m, where T is
/// `policy_throughputs(s)`, T_equal_m is the job's throughput under an equal 1/M share
/// (`equal_share_throughputs`), w_m its priority weight and s_m its scale factor.
///
/// Weighting by scale factor (option `scale_weighted`, default on): Gavel's code multiplies
/// each job's normalised throughput by its scale factor, so the LP equalises GPU-time, not
/// time share: "a job run on 1 GPU should receive scale_factor more time than a job run on
/// scale_factor GPUs if throughputs are equal" (scheduler/policies/max_min_fairness.py). We
/// follow it because LAS means least attained *service*, and a gang of s GPUs attains s
/// GPU-seconds per second; without the factor a 4-GPU job holds four GPUs for as long as a
/// 1-GPU job holds one, and under load the 1-GPU jobs wait (without the factor, tessera's
/// agnostic LAS on a loaded multi-GPU window at 3 jobs/h had an average JCT 22.7% above
/// Gavel's simulator's, with it 6.1%: docs/benchmarks/gavel-fidelity.md, "LAS weighted by
/// scale factor"). Off (`scale_weighted=0`) equalises time share, tessera's earlier form. On
/// single-GPU jobs both are the same LP.
/// Constraints: 0 <= x[m][j] <= 1; sum_j x[m][j] <= 1; sum_m scale_m x[m][j] <= gpus_j;
/// x[m][j] = 0 where T[m][j] = 0 or gpus_j < scale_m (a gang cannot fit on that type).
/// Jobs that can run nowhere get x = 0 and are left out of the min.
///
/// Solution: `allocation_lp` (see allocation_lp.hpp) over job classes (identical normalised
/// row and scale factor), an exact reduction: Gavel's traces have ~80 (job type, scale)
/// pairs, so 2048 jobs make an LP of ~80 x 3 variables (bench/lp_bench.cpp times it).
/// The CLP model is kept between calls and re-solved from the previous basis (classes are
/// matched by job id), and cold solves of many distinct rows start from a crash basis.
/// Efficiency stage (option `efficiency_stage`, default on): Gavel's single LP leaves the
/// choice among max-min optimal allocations to its solver, and a simplex vertex may leave
/// GPUs idle; we then maximise sum_m (s_m/w_m) T[m]·x[m] / T_equal_m (s_m = 1 unweighted)
/// with every job kept at >= (1 - 1e-6) of the max-min optimum. Off reproduces the single-stage LP.
///
/// Complexity: one LP of C*K + 1 columns and 2C + K rows (C classes <= M jobs, K types),
/// two with the efficiency stage, plus O(M K) to build rows and classes. Recomputed only
/// when the job set changes.

#include <memory>
#include <vector>

#include "policies/allocation_lp.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's max-min fairness (LAS) allocation.
class max_min_fairness final : public allocation_policy {
 public:
  /// `efficiency_stage`: run the second, efficiency-maximising LP. `scale_weighted`: weight
  /// each job's normalised throughput by its scale factor (Gavel's GPU-time fairness).
  explicit max_min_fairness(bool efficiency_stage, bool scale_weighted = true);
  /// Time fractions maximising the minimum normalised, weighted throughput.
  result<allocation> allocate(const snapshot& s) override;
  /// Keeps the spent allocation's rows for the next round's input and solution.
  void recycle(allocation&& spent) override { lp_.rows().give(std::move(spent.x)); }
  /// Statistics of the last LP solve (classes, iterations, warm, seconds, t*).
  const allocation_lp_result& last_solve() const { return last_; }
  /// LP settings, e.g. to switch class aggregation off for comparison.
  allocation_lp_settings& settings() { return settings_; }

 private:
  allocation_lp_settings settings_;
  bool scale_weighted_;
  allocation_lp lp_;
  allocation_lp_result last_;
};

/// Options of max_min_fairness: `efficiency_stage` and `scale_weighted` (0 or 1, default 1).
std::vector<option_spec> max_min_fairness_options();

/// Builds max-min fairness from validated options.
std::unique_ptr<allocation_policy> make_max_min_fairness(const options& o);

}  // namespace tessera
