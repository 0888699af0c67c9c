#include "policies/type_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/solver/lp.hpp"

namespace tessera {

namespace {

/// Jobs of equal throughput vectors, with what the program needs of them.
struct job_groups {
  std::vector<std::vector<double>> rates;  ///< per group: step rate per GPU type
  std::vector<double> work;                ///< per group: W_g, task-steps left
  std::vector<double> longest;             ///< per group: L_g, most steps left of one job
  std::vector<std::size_t> of_job;         ///< per job: its group, or type_plan::no_group
};

job_groups group_jobs(const snapshot& s) {
  const std::size_t nt = s.cl->types.size();
  job_groups g;
  g.of_job.assign(s.jobs.size(), type_plan::no_group);
  std::map<std::vector<double>, std::size_t> index;
  for (std::size_t i = 0; i < s.jobs.size(); ++i) {
    const job_view& jv = s.jobs[i];
    if (jv.throughput.size() < nt) continue;
    std::vector<double> r(jv.throughput.begin(), jv.throughput.begin() + static_cast<long>(nt));
    if (!(*std::max_element(r.begin(), r.end()) > 0)) continue;
    const auto [it, added] = index.emplace(std::move(r), g.rates.size());
    if (added) {
      g.rates.push_back(it->first);
      g.work.push_back(0);
      g.longest.push_back(0);
    }
    const std::size_t k = it->second;
    const double rem = std::max(0.0, jv.remaining_steps);
    g.of_job[i] = k;
    g.work[k] += std::max(1, jv.spec->scale_factor) * rem;
    g.longest[k] = std::max(g.longest[k], rem);
  }
  return g;
}

/// The LP's column of x_gt, -1 where type t is not planned for group g.
using columns = std::vector<std::vector<int>>;

/// Builds the program of the header; column 0 is T, rows 0..types-1 the capacity rows.
lp_model build(const cluster& cl, const job_groups& g, const type_plan_params& p, columns& x) {
  const std::size_t nt = cl.types.size();
  lp_model m;
  const int t_col = m.add_column(0, lp_inf, 1.0);
  for (std::size_t t = 0; t < nt; ++t)
    m.add_coefficient(m.add_row(-lp_inf, 0), t_col, -cl.types[t].gpus);
  const double eps = p.efficiency_weight / std::max(1, cl.total_gpus());
  x.assign(g.rates.size(), std::vector<int>(nt, -1));
  for (std::size_t k = 0; k < g.rates.size(); ++k) {
    const std::vector<double>& r = g.rates[k];
    const double best = *std::max_element(r.begin(), r.end());
    const int split = m.add_row(1, 1);
    const int time = m.add_row(-lp_inf, 0);
    m.add_coefficient(time, t_col, -1);
    for (std::size_t t = 0; t < nt; ++t) {
      if (!(r[t] > 0) || r[t] < p.min_fit * best || cl.types[t].gpus <= 0) continue;
      const double gpu_seconds = g.work[k] / r[t];
      x[k][t] = m.add_column(0, 1, eps * gpu_seconds);
      m.add_coefficient(split, x[k][t], 1);
      m.add_coefficient(static_cast<int>(t), x[k][t], gpu_seconds);
      m.add_coefficient(time, x[k][t], g.longest[k] / r[t]);
    }
  }
  return m;
}

}  // namespace

const std::vector<std::size_t>& type_plan::prefer(std::size_t i) const {
  static const std::vector<std::size_t> none;
  return i < group_of.size() && group_of[i] != no_group ? group_prefer[group_of[i]] : none;
}

double type_plan::share(std::size_t i, std::size_t t) const {
  if (i >= group_of.size() || group_of[i] == no_group) return 0;
  const std::vector<double>& x = group_share[group_of[i]];
  return t < x.size() ? x[t] : 0;
}

type_plan fluid_type_plan(const snapshot& s, const type_plan_params& p) {
  type_plan out;
  if (!s.cl) return out;
  const std::size_t nt = s.cl->types.size();
  out.bottleneck.assign(nt, 0);
  const job_groups g = group_jobs(s);
  if (g.rates.empty()) return out;
  columns x;
  const lp_model m = build(*s.cl, g, p, x);
  const auto r = solve_lp(m);
  if (!r || !r->optimal()) return out;
  out.solved = true;
  out.horizon = r->x[0];
  for (std::size_t t = 0; t < nt; ++t) out.bottleneck[t] = std::abs(r->row_duals[t]) > 1e-9;
  std::vector<std::vector<double>>& share = out.group_share;
  std::vector<std::vector<std::size_t>>& prefer = out.group_prefer;
  share.assign(g.rates.size(), std::vector<double>(nt, 0.0));
  prefer.assign(g.rates.size(), {});
  for (std::size_t k = 0; k < g.rates.size(); ++k) {
    for (std::size_t t = 0; t < nt; ++t) {
      if (x[k][t] < 0) continue;
      share[k][t] = std::max(0.0, r->x[static_cast<std::size_t>(x[k][t])]);
      if (share[k][t] >= p.least_share) prefer[k].push_back(t);
    }
    std::stable_sort(prefer[k].begin(), prefer[k].end(),
                     [&](std::size_t a, std::size_t b) { return share[k][a] > share[k][b]; });
  }
  out.group_of = g.of_job;
  return out;
}

}  // namespace tessera
