#include "policies/finish_time_fairness_packed.hpp"

#include <algorithm>

#include "policies/finish_time_fairness.hpp"
#include "policies/ftf_round.hpp"
#include "policies/packed_lp.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

namespace {

using detail::ftf_round;

/// The packed LP's input at a trial rho: alone rows T[m] / r_m(rho), co-location weight
/// 1 / r_m(rho).
packed_lp_input input_at(const ftf_round& r, double rho, bool efficiency_stage) {
  packed_lp_input in;
  in.efficiency_stage = efficiency_stage;
  in.alone.assign(r.n, std::vector<double>(r.k, 0.0));
  in.weight.assign(r.n, 0.0);
  for (int m = 0; m < r.n; ++m) {
    in.weight[m] = r.weight_at(rho, m);
    for (int j = 0; j < r.k; ++j) in.alone[m][j] = r.usable[m][j] * in.weight[m];
  }
  return in;
}

/// Each job's effective throughput under `a`: alone, plus its co-located rate (the table's
/// entry times the type's mean speed, as the packed LP counts it) in each pair.
std::vector<double> effective(const snapshot& s, const ftf_round& r, const allocation& a) {
  std::vector<double> eff(r.n, 0.0);
  for (int m = 0; m < r.n; ++m)
    for (int j = 0; j < r.k; ++j) eff[m] += r.usable[m][j] * a.x[m][j];
  if (!s.rates) return eff;
  for (const auto& p : a.pairs) {
    const job& ja = *s.jobs[p.a].spec;
    const job& jb = *s.jobs[p.b].spec;
    for (int j = 0; j < r.k; ++j) {
      if (!(p.x[j] > 0)) continue;
      auto co = s.rates->colocated_table(j, ja.job_type, jb.job_type, ja.scale_factor);
      if (!co) continue;
      const double speed = s.cl->types[j].mean_speed;
      eff[p.a] += co->first * speed * p.x[j];
      eff[p.b] += co->second * speed * p.x[j];
    }
  }
  return eff;
}

}  // namespace

result<allocation> finish_time_fairness_packed::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  if (shares_no_gpu(s)) {
    auto a = alone_.allocate(s);
    rho_ = alone_.last_rho();
    lps_ = alone_.last_lp_count();
    return a;
  }
  rho_ = 0;
  lps_ = 0;
  allocation best;
  ftf_round r = detail::prepare_ftf_round(s, gpu_share_, best);
  if (!r.any()) return best;
  const double tau = r.tau();
  for (int it = 0; it < max_iterations_ && r.hi - r.lo > tolerance_ * r.hi; ++it) {
    const double rho = 0.5 * (r.lo + r.hi);
    auto sol = solve_packed_lp(s, input_at(r, rho, false));
    ++lps_;
    if (!sol) return sol.err();
    const double achieved = r.rho_of_rates(effective(s, r, sol->alloc));
    if (achieved < r.hi) {
      r.hi = achieved;
      best = std::move(sol->alloc);
    }
    if (sol->value < 1.0) {  // the lower bound's jump, as finish_time_fairness::bisect
      const double l = sol->value;
      r.lo = std::min(std::max(r.lo, l > 0 ? rho + (1.0 / l - 1.0) * (rho - tau) : rho), r.hi);
    }
  }
  if (efficiency_stage_) {
    auto sol = solve_packed_lp(s, input_at(r, r.hi, true));
    ++lps_;
    if (!sol) return sol.err();
    // Taken unless rounding made it (slightly) worse than the bracket's best.
    if (sol->value >= 1.0 - 1e-6 &&
        r.rho_of_rates(effective(s, r, sol->alloc)) <= r.hi * (1 + 1e-6))
      best = std::move(sol->alloc);
  }
  rho_ = r.rho_of_rates(effective(s, r, best));
  return best;
}

std::unique_ptr<allocation_policy> make_finish_time_fairness_packed(const options& o) {
  return std::make_unique<finish_time_fairness_packed>(
      o.flag("efficiency_stage"), o.get("tolerance"), o.integer("max_iterations"),
      o.flag("gpu_share"));
}

}  // namespace tessera
