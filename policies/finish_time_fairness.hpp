#pragma once
/// @file finish_time_fairness.hpp
/// Finish-time fairness (Themis, NSDI'20) as Gavel computes it over time fractions (Gavel,
/// OSDI'20, section 4.2 "Other Policies as Optimization Problems", finish-time fairness;
/// heterogeneity-aware, the agnostic variant runs it on the type-blind view,
/// policies/type_blind.hpp).
///
/// Objective: minimise max_m rho_m with
///   rho_m = (t_m + rem_m / efftput_m) / iso_m,  efftput_m = sum_j T[m][j] x[m][j],
/// where T = policy_throughputs(s), t_m = s.now - arrival (time since the job
/// arrived), rem_m = remaining_steps, and iso_m = total_steps / T_equal_m is the time the
/// whole job would take alone on an equal 1/M share of the cluster (T_equal_m from
/// equal_share_throughputs; M counts the snapshot's active jobs). rho_m < 1 means the job
/// finishes sooner than on its fair share. Priority weights are not used (as in Gavel).
/// Weighting by scale factor (option `gpu_share`, default on): the 1/M share is 1/M of the
/// GPUs, so a gang of s_m GPUs runs min(1, G / (M s_m)) of the time on it, as in Gavel's
/// IsolatedPolicy (scheduler/policies/isolated.py) and Themis's "1/N of the cluster": a wide
/// job's isolated time is longer, so it is owed less time share, and fairness is in
/// GPU-time, the same convention as max_min_fairness's `scale_weighted`. Unlike max-min
/// fairness, Gavel's objective has no further scale factor: the share already carries it.
/// Off: every job the same time fraction min(1, G / sum_m s_m) (tessera's earlier form).
/// Choice documented: papers.md's reading (the whole job's time on an isolated 1/M share) is
/// used for iso_m; Gavel's released code instead divides by t_m + rem_m / T_iso_m with T_iso
/// the job's throughput under its heterogeneity-agnostic max-min allocation, a denominator
/// that moves with every round's progress.
/// Constraints: 0 <= x[m][j] <= 1; sum_j x[m][j] <= 1; sum_m scale_m x[m][j] <= gpus_j;
/// x[m][j] = 0 where T[m][j] = 0 or gpus_j < scale_m. Jobs with nothing left or that can
/// run nowhere get x = 0 and are left out.
///
/// Solution: rho_m <= rho  <=>  efftput_m >= r_m(rho) = rem_m / (rho iso_m - t_m), which is
/// not linear in rho, so we bisect on rho. For a trial rho, instead of a yes/no feasibility
/// LP we solve the max-min LP  lambda(rho) = max min_m efftput_m / r_m(rho)  (allocation_lp,
/// warm-started from the previous trial's basis): rho is achievable iff lambda(rho) >= 1.
/// Every trial's allocation x is feasible, so its own max_m rho_m(x) is an upper bound and
/// tightens the bracket even when lambda < 1; and lambda = L < 1 means every allocation
/// leaves some job with efftput_m <= L r_m(rho), so rho* >= rho + (1/L - 1)(rho - tau) with
/// tau = max_m t_m / iso_m, a lower bound above the trial. Both are Dinkelbach-like jumps:
/// with fresh jobs (tau = 0) the lower bound rho / L is exact, and on Gavel-like job sets
/// one trial usually closes the bracket (bench/lp_bench.cpp: 2 LPs per round, trial plus
/// efficiency stage, against 10 for plain bisection).
/// Bracket: lo = max_m (t_m + rem_m / max_j T[m][j]) / iso_m (each job at full speed on its
/// best type), hi = rho of the equal-share allocation x[m][j] = f_m gpus_j / G (always
/// feasible). The trial is the bracket's midpoint. Stop when hi - lo <= tolerance * hi
/// (option `tolerance`, default 1e-3) or after `max_iterations` trials (default 40); the
/// allocation is the best one found. Efficiency stage (option `efficiency_stage`, default
/// on): a last LP at rho = hi maximises sum_m efftput_m / r_m(hi) with every job kept at
/// its bound, so spare capacity is not left to the simplex vertex.
///
/// Complexity: at most O(log((hi - lo) / (tolerance hi))) warm-started LPs of up to
/// M*K + 1 columns and 2M + K rows each (rows differ by progress, so classes rarely merge),
/// recomputed every round.

#include <memory>
#include <vector>

#include "policies/allocation_lp.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

namespace detail {
struct ftf_round;
}  // namespace detail

/// Gavel's finish-time-fairness allocation.
class finish_time_fairness final : public allocation_policy {
 public:
  /// Bisection stops at relative bracket width `tolerance` or after `max_iterations` LPs.
  /// `gpu_share`: isolated share of 1/M of the GPUs (on) or an equal time fraction (off).
  finish_time_fairness(bool efficiency_stage, double tolerance, int max_iterations,
                       bool gpu_share = true);
  /// Time fractions minimising the largest finish-time fairness ratio rho.
  result<allocation> allocate(const snapshot& s) override;
  /// Progress and time change rho, so the allocation is recomputed every round.
  bool recompute_every_round() const override { return true; }
  /// max_m rho_m of the last allocation (0 without jobs).
  double last_rho() const { return rho_; }
  /// LPs solved for the last allocation.
  int last_lp_count() const { return lps_; }

 private:
  /// Bisection on rho (trials until the bracket is within tolerance or max_iterations LPs);
  /// narrows `r`'s bracket and keeps the best allocation found in `best`.
  status bisect(detail::ftf_round& r, allocation_lp_input& in, allocation& best);
  /// The last LP at rho = hi, maximising the jobs' summed progress rates within it; taken
  /// into `best` unless rounding made it worse.
  status efficiency_stage(const detail::ftf_round& r, allocation_lp_input& in, allocation& best);

  bool efficiency_stage_;
  bool gpu_share_;
  double tolerance_;
  int max_iterations_;
  allocation_lp lp_;
  double rho_ = 0;
  int lps_ = 0;
};

/// Options of finish_time_fairness: `efficiency_stage`, `tolerance`, `max_iterations`,
/// `gpu_share`.
std::vector<option_spec> finish_time_fairness_options();

/// Builds finish-time fairness from validated options.
std::unique_ptr<allocation_policy> make_finish_time_fairness(const options& o);

}  // namespace tessera
