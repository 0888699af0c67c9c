#pragma once
/// @file finish_time_fairness_packed.hpp
/// Finish-time fairness with space sharing: Gavel's `finish_time_fairness_packed` (OSDI'20,
/// section 3.1 "Space sharing" with the finish-time-fairness objective of section 4.2).
///
/// Rule: minimise max_m rho_m as policies/finish_time_fairness.hpp does (the same t_m, rem_m
/// and isolated time iso_m on 1/M of the GPUs, option `gpu_share`), where a job's effective
/// throughput now counts its time alone and its time sharing GPUs with another job at the
/// throughput table's co-located rates (the packed allocation of policies/packed_lp.hpp).
/// Bisection on rho as in the plain policy: at a trial rho the packed max-min LP with alone
/// rows T[m] / r_m(rho) and co-location weight 1 / r_m(rho) gives lambda(rho); rho is
/// achievable iff lambda >= 1; lambda = L < 1 lifts the lower bound to rho + (1/L - 1)(rho -
/// tau) (the argument holds for any convex set of effective-throughput vectors, so for the
/// packed one too). The bracket's upper end starts at the equal-share allocation of jobs
/// alone and moves to each trial's own rho. Optional efficiency stage at the final rho.
/// Heterogeneity-aware only (Gavel has no agnostic packed variant). Without rates or
/// co-location entries it gives finish_time_fairness_perf's rho; where the table has no
/// co-location entry at all it runs as that policy (packed_lp.hpp, "No sharing anywhere").
///
/// Cost per round: up to `max_iterations` packed LPs, cold-started (the plain policy's
/// warm-started LPs where the table has no co-location entry). Rows differ by progress,
/// so each job is a class of its own: up to M K + M (M + 1) / 2 K + 1 columns and 2M + K rows,
/// quadratic in active jobs, for the pairs (policies/packed_lp.hpp). Recomputed every round.
/// Meant for the cluster sizes of Gavel's experiments, not for thousands of active jobs.

#include <memory>
#include <vector>

#include "policies/finish_time_fairness.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's finish-time fairness with space sharing.
class finish_time_fairness_packed final : public allocation_policy {
 public:
  /// As finish_time_fairness: bisection to relative width `tolerance` or `max_iterations`
  /// LPs, optional efficiency stage, isolated share by GPUs (`gpu_share`).
  finish_time_fairness_packed(bool efficiency_stage, double tolerance, int max_iterations,
                              bool gpu_share)
      : efficiency_stage_(efficiency_stage),
        gpu_share_(gpu_share),
        tolerance_(tolerance),
        max_iterations_(max_iterations),
        alone_(efficiency_stage, tolerance, max_iterations, gpu_share) {}
  /// Fractions alone and in pairs minimising the largest finish-time fairness ratio.
  result<allocation> allocate(const snapshot& s) override;
  /// Progress and time change rho, so the allocation is recomputed every round.
  bool recompute_every_round() const override { return true; }
  /// max_m rho_m of the last allocation (0 without jobs).
  double last_rho() const { return rho_; }
  /// LPs solved for the last allocation.
  int last_lp_count() const { return lps_; }

 private:
  bool efficiency_stage_;
  bool gpu_share_;
  double tolerance_;
  int max_iterations_;
  double rho_ = 0;
  int lps_ = 0;
  finish_time_fairness alone_;  ///< the policy where no GPU can be shared (shares_no_gpu)
};

/// Builds finish-time fairness with space sharing from validated options (those of
/// finish_time_fairness_options()).
std::unique_ptr<allocation_policy> make_finish_time_fairness_packed(const options& o);

}  // namespace tessera
