#pragma once
/// @file min_total_duration_packed.hpp
/// Makespan minimisation with space sharing: Gavel's `min_total_duration_packed` (OSDI'20,
/// section 3.1 "Space sharing" with the makespan objective of section 4.2). Two jobs of one
/// scale factor may share every GPU of a placement, each at its co-located throughput from the
/// throughput table; the shared mechanism (policies/mechanism.hpp) runs a pair as one unit.
///
/// Rule: the smallest C such that every active job finishes its remaining steps rem_m by
/// now + C at its effective throughput e_m (alone and in pairs): as in min_total_duration.hpp
/// one LP with z = 1/C, a max-min over e_m / rem_m (policies/packed_lp.hpp, weights 1/rem_m).
/// Gavel bisects on C with a feasibility LP per step; the single LP is exact. Option
/// `efficiency_stage` (default off, unlike min_total_duration's) then maximises
/// sum_m e_m / rem_m keeping C: it spreads the allocation over many more job pairs, which the
/// mechanism, round by round, delivered less exactly (makespan 8.6 % longer on a 300-job
/// static trace, and 10x the LP time; docs/benchmarks/policies.md,
/// "min_total_duration_packed"). Heterogeneity-aware only.
/// Jobs with nothing left take no part.
///
/// Cost per round: the packed LP (one or two LPs of up to (C + P) K + 1 columns and 2C + K
/// rows, C classes, P class pairs; progress changes rem, so classes are mostly single jobs),
/// recomputed every round; the mechanism orders M jobs plus the job pairs with a positive
/// fraction. Where the table has no co-location entry it runs as min_total_duration_perf with
/// the same `efficiency_stage` (packed_lp.hpp, "No sharing anywhere").

#include <memory>
#include <vector>

#include "policies/min_total_duration.hpp"
#include "policies/options.hpp"
#include "policies/packed_lp.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's makespan minimisation with space sharing.
class min_total_duration_packed final : public allocation_policy {
 public:
  /// `efficiency_stage`: run the second LP that uses capacity off the critical path.
  explicit min_total_duration_packed(bool efficiency_stage)
      : efficiency_stage_(efficiency_stage), alone_(efficiency_stage) {}
  /// Fractions alone and in pairs minimising the time by which every job can finish.
  result<allocation> allocate(const snapshot& s) override;
  /// Progress changes rem, so the allocation is recomputed every round.
  bool recompute_every_round() const override { return true; }
  /// Makespan (seconds from now) of the last allocation; 0 without jobs.
  double last_makespan() const { return last_.value > 0 ? 1.0 / last_.value : 0.0; }

 private:
  bool efficiency_stage_;
  packed_lp_result last_;
  min_total_duration alone_;  ///< the policy where no GPU can be shared (shares_no_gpu)
};

/// Options of min_total_duration_packed: `efficiency_stage` (0 or 1, default 0).
std::vector<option_spec> min_total_duration_packed_options();

/// Builds makespan minimisation with space sharing from validated options.
std::unique_ptr<allocation_policy> make_min_total_duration_packed(const options& o);

}  // namespace tessera
