#include "policies/finish_time_fairness.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "policies/gavel_family.hpp"

namespace tessera {

finish_time_fairness::finish_time_fairness(bool efficiency_stage, double tolerance,
                                           int max_iterations)
    : efficiency_stage_(efficiency_stage),
      tolerance_(tolerance),
      max_iterations_(max_iterations) {}

result<allocation> finish_time_fairness::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  const int n = static_cast<int>(s.jobs.size());
  const int k = static_cast<int>(s.cl->types.size());
  const matrix t = policy_throughputs(s);
  const std::vector<double> eq = equal_share_throughputs(s, t);
  rho_ = 0;
  lps_ = 0;

  allocation_lp_input in = lp_input_for(s);
  // Per job: time since arrival, remaining steps, isolated time; `in_lp` marks the jobs the
  // LP decides for (something left, runnable somewhere on a type with room for the gang).
  std::vector<double> elapsed(n, 0), rem(n, 0), iso(n, 0);
  std::vector<std::vector<double>> usable(n, std::vector<double>(k, 0.0));
  std::vector<char> in_lp(n, 0);
  double gpus = 0, demand = 0;
  for (const auto& ty : s.cl->types) gpus += ty.gpus;
  for (const auto& j : s.jobs) demand += j.spec->scale_factor;
  const double f = demand > 0 && gpus > 0 ? std::min(1.0, gpus / demand) : 1.0;
  double lo = 0, hi = 0;
  allocation best{std::vector<std::vector<double>>(n, std::vector<double>(k, 0.0))};
  for (int m = 0; m < n; ++m) {
    const auto& jv = s.jobs[m];
    rem[m] = jv.remaining_steps;
    elapsed[m] = std::max(0.0, s.now - jv.spec->arrival);
    if (!(rem[m] > 0) || !(eq[m] > 0) || !(jv.spec->total_steps > 0)) continue;
    iso[m] = jv.spec->total_steps / eq[m];
    double best_t = 0, eq_eff = 0;
    for (int j = 0; j < k; ++j) {
      if (t[m][j] > 0 && s.cl->types[j].gpus >= jv.spec->scale_factor) usable[m][j] = t[m][j];
      best_t = std::max(best_t, usable[m][j]);
      const double share = gpus > 0 ? f * s.cl->types[j].gpus / gpus : 0.0;
      if (usable[m][j] > 0) best.x[m][j] = share;
      eq_eff += usable[m][j] * best.x[m][j];
    }
    if (best_t <= 0) continue;
    in_lp[m] = 1;
    lo = std::max(lo, (elapsed[m] + rem[m] / best_t) / iso[m]);
    hi = std::max(hi, (elapsed[m] + rem[m] / eq_eff) / iso[m]);
  }
  for (int m = 0; m < n; ++m)
    if (!in_lp[m]) std::fill(best.x[m].begin(), best.x[m].end(), 0.0);
  if (std::none_of(in_lp.begin(), in_lp.end(), [](char c) { return c != 0; })) return best;

  // rho of an allocation: the largest over the LP's jobs.
  auto rho_of = [&](const std::vector<std::vector<double>>& x) {
    double worst = 0;
    for (int m = 0; m < n; ++m) {
      if (!in_lp[m]) continue;
      double eff = 0;
      for (int j = 0; j < k; ++j) eff += usable[m][j] * x[m][j];
      if (eff <= 0) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, (elapsed[m] + rem[m] / eff) / iso[m]);
    }
    return worst;
  };
  // LP rows at a trial rho: efftput_m / r_m(rho) = T[m]·x (rho iso_m - t_m) / rem_m.
  auto set_rows = [&](double rho) {
    for (int m = 0; m < n; ++m)
      for (int j = 0; j < k; ++j)
        in.rows[m][j] =
            in_lp[m] ? usable[m][j] * (rho * iso[m] - elapsed[m]) / rem[m] : 0.0;
  };

  allocation_lp_settings ls;
  ls.efficiency_stage = false;
  hi = std::max(hi, lo);
  double tau = 0;  // largest t_m / iso_m; every trial rho exceeds it (rho > lo > tau)
  for (int m = 0; m < n; ++m)
    if (in_lp[m]) tau = std::max(tau, elapsed[m] / iso[m]);
  for (int it = 0; it < max_iterations_ && hi - lo > tolerance_ * hi; ++it) {
    const double rho = 0.5 * (lo + hi);
    set_rows(rho);
    auto r = lp_.solve(in, allocation_objective::max_min, ls);
    ++lps_;
    if (!r) return r.err();
    const double achieved = rho_of(r->x);
    if (achieved < hi) {
      hi = achieved;
      best.x = std::move(r->x);
    }
    if (r->value < 1.0) {
      // lambda = L < 1: every allocation leaves some job m with efftput_m <= L r_m(rho),
      // i.e. rho_m >= rho / L - (t_m / iso_m) (1 / L - 1) >= rho + (1 / L - 1) (rho - tau)
      // with tau = max_m t_m / iso_m < rho: a lower bound above rho itself.
      const double l = r->value;
      lo = std::max(lo, l > 0 ? rho + (1.0 / l - 1.0) * (rho - tau) : rho);
      lo = std::min(lo, hi);
    }
  }
  if (efficiency_stage_) {
    ls.efficiency_stage = true;
    set_rows(hi);
    auto r = lp_.solve(in, allocation_objective::max_min, ls);
    ++lps_;
    if (!r) return r.err();
    // Take it unless rounding made it (slightly) worse than the bracket's best.
    if (r->value >= 1.0 - 1e-6 && rho_of(r->x) <= hi * (1 + 1e-6)) best.x = std::move(r->x);
  }
  rho_ = rho_of(best.x);
  return best;
}

std::vector<option_spec> finish_time_fairness_options() {
  return {bool_option("efficiency_stage",
                      "1: at the final rho, maximise the jobs' summed progress rates keeping "
                      "every job within rho; 0: take the bisection's best allocation as is",
                      true),
          {"tolerance", "relative width of the rho bracket at which bisection stops", 1e-3,
           1e-9, 0.5},
          int_option("max_iterations", "most LPs solved by the bisection per round", 40, 1, 200)};
}

std::unique_ptr<allocation_policy> make_finish_time_fairness(const options& o) {
  return std::make_unique<finish_time_fairness>(o.flag("efficiency_stage"), o.get("tolerance"),
                                                o.integer("max_iterations"));
}

}  // namespace tessera
