#pragma once
/// @file max_min_fairness_packed.hpp
/// Max-min fairness (LAS) with space sharing: Gavel's `max_min_fairness_packed` (OSDI'20,
/// section 3.1 "Space sharing" with the max-min objective of section 4.1). Two jobs of one
/// scale factor may share every GPU of a placement, each at its co-located throughput from the
/// throughput table; the shared mechanism (policies/mechanism.hpp) runs a pair as one unit.
///
/// Rule: maximise min_m e_m / (w_m T_equal_m) over the packed allocation (policies/
/// packed_lp.hpp), where e_m is job m's effective throughput alone and in pairs, T_equal_m its
/// throughput alone on an equal 1/M share (equal_share_throughputs) and w_m its priority
/// weight. Each job's term is multiplied by its scale factor, as Gavel's packed policy does,
/// so jobs are equalised in GPU-time: a 1-GPU job gets scale_factor times the time of a job of
/// that many GPUs at equal throughput. Then (option `efficiency_stage`, default on) the sum
/// of those terms is maximised keeping every job at the max-min optimum. Heterogeneity-aware
/// only (Gavel has no agnostic packed variant). Without a co-location entry for any pair of
/// active jobs it is max_min_fairness_perf with the scale weighting; where the table has none
/// at all it runs as that policy (packed_lp.hpp, "No sharing anywhere").
///
/// Cost per round: the packed LP (C classes, P class pairs; one or two LPs of up to
/// (C + P) K + 1 columns and 2C + K rows) when the job set changes, else none; the mechanism
/// orders U = M + (job pairs with a positive fraction) units, O(U K log(U K)).

#include <memory>
#include <vector>

#include "policies/max_min_fairness.hpp"
#include "policies/options.hpp"
#include "policies/packed_lp.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's max-min fairness with space sharing.
class max_min_fairness_packed final : public allocation_policy {
 public:
  /// `efficiency_stage`: run the second, sum-maximising LP.
  explicit max_min_fairness_packed(bool efficiency_stage)
      : efficiency_stage_(efficiency_stage), alone_(efficiency_stage, true) {}
  /// Fractions alone and in pairs maximising the minimum normalised, weighted throughput.
  result<allocation> allocate(const snapshot& s) override;
  /// The last LP's t*, classes and pair columns.
  const packed_lp_result& last_solve() const { return last_; }

 private:
  bool efficiency_stage_;
  packed_lp_result last_;
  max_min_fairness alone_;  ///< the policy where no GPU can be shared (shares_no_gpu)
};

/// Options of max_min_fairness_packed: `efficiency_stage` (0 or 1, default 1).
std::vector<option_spec> max_min_fairness_packed_options();

/// Builds max-min fairness with space sharing from validated options.
std::unique_ptr<allocation_policy> make_max_min_fairness_packed(const options& o);

}  // namespace tessera
