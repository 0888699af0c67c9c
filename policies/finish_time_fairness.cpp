#include "policies/finish_time_fairness.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "policies/ftf_round.hpp"
#include "policies/gavel_family.hpp"

namespace tessera {

finish_time_fairness::finish_time_fairness(bool efficiency_stage, double tolerance,
                                           int max_iterations, bool gpu_share)
    : efficiency_stage_(efficiency_stage),
      gpu_share_(gpu_share),
      tolerance_(tolerance),
      max_iterations_(max_iterations) {}

namespace detail {

/// Per-job data, the bracket (lo: every job at full speed on its best type; hi: rho of the
/// equal-share allocation) and that allocation, the first best, in `best`.
ftf_round prepare_ftf_round(const snapshot& s, bool by_gpus, allocation& best) {
  const matrix t = policy_throughputs(s);
  best = allocation{std::vector<std::vector<double>>(s.jobs.size(),
                                                     std::vector<double>(s.cl->types.size(), 0.0))};
  ftf_round r;
  r.n = static_cast<int>(s.jobs.size());
  r.k = static_cast<int>(s.cl->types.size());
  r.elapsed.assign(r.n, 0);
  r.rem.assign(r.n, 0);
  r.iso.assign(r.n, 0);
  r.usable.assign(r.n, std::vector<double>(r.k, 0.0));
  r.in_lp.assign(r.n, 0);
  double gpus = 0;
  for (const auto& ty : s.cl->types) gpus += ty.gpus;
  const std::vector<double> f = equal_share_fractions(s, by_gpus);
  const std::vector<double> eq = equal_share_throughputs(s, t, by_gpus);
  for (int m = 0; m < r.n; ++m) {
    const auto& jv = s.jobs[m];
    r.rem[m] = jv.remaining_steps;
    r.elapsed[m] = std::max(0.0, s.now - jv.spec->arrival);
    if (!(r.rem[m] > 0) || !(eq[m] > 0) || !(jv.spec->total_steps > 0)) continue;
    r.iso[m] = jv.spec->total_steps / eq[m];
    double best_t = 0, eq_eff = 0;
    for (int j = 0; j < r.k; ++j) {
      if (t[m][j] > 0 && s.cl->types[j].gpus >= jv.spec->scale_factor) r.usable[m][j] = t[m][j];
      best_t = std::max(best_t, r.usable[m][j]);
      const double share = gpus > 0 ? f[m] * s.cl->types[j].gpus / gpus : 0.0;
      if (r.usable[m][j] > 0) best.x[m][j] = share;
      eq_eff += r.usable[m][j] * best.x[m][j];
    }
    if (best_t <= 0) continue;
    r.in_lp[m] = 1;
    r.lo = std::max(r.lo, (r.elapsed[m] + r.rem[m] / best_t) / r.iso[m]);
    r.hi = std::max(r.hi, (r.elapsed[m] + r.rem[m] / eq_eff) / r.iso[m]);
  }
  for (int m = 0; m < r.n; ++m)
    if (!r.in_lp[m]) std::fill(best.x[m].begin(), best.x[m].end(), 0.0);
  r.hi = std::max(r.hi, r.lo);
  return r;
}

}  // namespace detail

using detail::ftf_round;

status finish_time_fairness::bisect(ftf_round& r, allocation_lp_input& in, allocation& best) {
  allocation_lp_settings ls;
  ls.efficiency_stage = false;
  const double tau = r.tau();
  for (int it = 0; it < max_iterations_ && r.hi - r.lo > tolerance_ * r.hi; ++it) {
    const double rho = 0.5 * (r.lo + r.hi);
    r.set_rows(rho, in);
    auto sol = lp_.solve(in, allocation_objective::max_min, ls);
    ++lps_;
    if (!sol) return sol.err();
    const double achieved = r.rho_of(sol->x);
    if (achieved < r.hi) {
      r.hi = achieved;
      best.x = std::move(sol->x);
    }
    if (sol->value < 1.0) {
      // lambda = L < 1: every allocation leaves some job m with efftput_m <= L r_m(rho),
      // i.e. rho_m >= rho / L - (t_m / iso_m) (1 / L - 1) >= rho + (1 / L - 1) (rho - tau)
      // with tau = max_m t_m / iso_m < rho: a lower bound above rho itself.
      const double l = sol->value;
      r.lo = std::max(r.lo, l > 0 ? rho + (1.0 / l - 1.0) * (rho - tau) : rho);
      r.lo = std::min(r.lo, r.hi);
    }
  }
  return {};
}

status finish_time_fairness::efficiency_stage(const ftf_round& r, allocation_lp_input& in,
                                              allocation& best) {
  allocation_lp_settings ls;
  ls.efficiency_stage = true;
  r.set_rows(r.hi, in);
  auto sol = lp_.solve(in, allocation_objective::max_min, ls);
  ++lps_;
  if (!sol) return sol.err();
  // Take it unless rounding made it (slightly) worse than the bracket's best.
  if (sol->value >= 1.0 - 1e-6 && r.rho_of(sol->x) <= r.hi * (1 + 1e-6)) best.x = std::move(sol->x);
  return {};
}

result<allocation> finish_time_fairness::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  rho_ = 0;
  lps_ = 0;
  allocation best;
  ftf_round r = detail::prepare_ftf_round(s, gpu_share_, best);
  if (!r.any()) return best;
  allocation_lp_input in = lp_input_for(s);
  if (auto st = bisect(r, in, best); !st) return st.err();
  if (efficiency_stage_)
    if (auto st = efficiency_stage(r, in, best); !st) return st.err();
  rho_ = r.rho_of(best.x);
  return best;
}

std::vector<option_spec> finish_time_fairness_options() {
  return {
      bool_option("efficiency_stage",
                  "1: at the final rho, maximise the jobs' summed progress rates keeping "
                  "every job within rho; 0: take the bisection's best allocation as is",
                  true),
      {"tolerance", "relative width of the rho bracket at which bisection stops", 1e-3, 1e-9, 0.5},
      int_option("max_iterations", "most LPs solved by the bisection per round", 40, 1, 200),
      bool_option("gpu_share",
                  "1: a job's isolated share is 1/M of the GPUs, so a gang of s GPUs runs "
                  "min(1, G/(M s)) of the time (Gavel's code, Themis); 0: every job the "
                  "same time fraction min(1, G / sum of scale factors)",
                  true)};
}

std::unique_ptr<allocation_policy> make_finish_time_fairness(const options& o) {
  return std::make_unique<finish_time_fairness>(o.flag("efficiency_stage"), o.get("tolerance"),
                                                o.integer("max_iterations"), o.flag("gpu_share"));
}

}  // namespace tessera
