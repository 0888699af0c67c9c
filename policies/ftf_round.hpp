#pragma once
/// @file ftf_round.hpp
/// What one round of finish-time fairness (policies/finish_time_fairness.hpp) knows of each
/// job and the bracket on rho*, shared by the plain and the space-sharing variant
/// (policies/finish_time_fairness_packed.hpp). Internal to the policies.

#include <algorithm>
#include <limits>
#include <vector>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"
#include "runtime/core/plan.hpp"

namespace tessera::detail {

/// What one round's bisection knows of each job, and the bracket on rho*.
struct ftf_round {
  int n = 0, k = 0;
  std::vector<double> elapsed;              ///< t_m: time since arrival
  std::vector<double> rem;                  ///< remaining steps
  std::vector<double> iso;                  ///< time alone on an equal 1/M share
  std::vector<std::vector<double>> usable;  ///< T[m][j] where the gang fits, else 0
  std::vector<char> in_lp;                  ///< something left, runnable somewhere
  double lo = 0, hi = 0;                    ///< the bracket

  /// rho of the jobs' effective throughputs `eff`: the largest over the LP's jobs (infinite
  /// when one gets nothing).
  double rho_of_rates(const std::vector<double>& eff) const {
    double worst = 0;
    for (int m = 0; m < n; ++m) {
      if (!in_lp[m]) continue;
      if (eff[m] <= 0) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, (elapsed[m] + rem[m] / eff[m]) / iso[m]);
    }
    return worst;
  }

  /// rho of an allocation of jobs alone.
  double rho_of(const std::vector<std::vector<double>>& x) const {
    std::vector<double> eff(n, 0.0);
    for (int m = 0; m < n; ++m)
      for (int j = 0; j < k; ++j) eff[m] += usable[m][j] * x[m][j];
    return rho_of_rates(eff);
  }

  /// 1 / r_m(rho) = (rho iso_m - t_m) / rem_m: job m's weight in the LP at a trial rho (0 for
  /// a job outside the LP).
  double weight_at(double rho, int m) const {
    return in_lp[m] ? (rho * iso[m] - elapsed[m]) / rem[m] : 0.0;
  }

  /// LP rows at a trial rho: efftput_m / r_m(rho) = T[m]·x (rho iso_m - t_m) / rem_m.
  void set_rows(double rho, allocation_lp_input& in) const {
    for (int m = 0; m < n; ++m)
      for (int j = 0; j < k; ++j)
        in.rows[m][j] = in_lp[m] ? usable[m][j] * (rho * iso[m] - elapsed[m]) / rem[m] : 0.0;
  }

  /// Whether any job takes part in the LP (else the equal-share allocation is the answer).
  bool any() const {
    return std::any_of(in_lp.begin(), in_lp.end(), [](char c) { return c != 0; });
  }

  /// tau = max_m t_m / iso_m over the LP's jobs; every trial rho exceeds it (rho > lo > tau).
  double tau() const {
    double t = 0;
    for (int m = 0; m < n; ++m)
      if (in_lp[m]) t = std::max(t, elapsed[m] / iso[m]);
    return t;
  }
};

/// Per-job data from the policy's throughputs (policy_throughputs), the bracket (lo: every job
/// at full speed on its best type; hi: rho of the equal-share allocation) and that
/// allocation, the first best, in `best` (sized here). `by_gpus`: the isolated share is 1/M
/// of the GPUs (else an equal time fraction). The snapshot must have passed check_snapshot.
ftf_round prepare_ftf_round(const snapshot& s, bool by_gpus, allocation& best);

}  // namespace tessera::detail
