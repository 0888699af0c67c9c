#include "policies/sia.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"
#include "runtime/solver/milp.hpp"

namespace tessera {

namespace {

/// G^p rounded to 2 decimals and capped at `clip` (Sia's power-up of the goodput matrix);
/// a goodput of 0 (a job whose factor reached 0) costs the cap.
double powered(double goodput, double p, double clip) {
  if (!(goodput > 0)) return p < 0 ? clip : 0.0;
  const double v = std::round(std::pow(goodput, p) * 100) / 100;
  return std::min(v, clip);
}

}  // namespace

void sia_policy::observe(const snapshot& s) {
  std::set<job_id> active;
  for (const auto& v : s.jobs) {
    active.insert(v.spec->id);
    auto& st = jobs_[v.spec->id];
    if (v.last_type >= 0 && v.last_type != st.running) {
      if (st.ever_ran) ++st.restarts;
      st.ever_ran = true;
      st.started = s.now - s.round_length;  // it started when the last round did
    }
    st.running = v.last_type;
  }
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = active.count(it->first) ? std::next(it) : jobs_.erase(it);
}

result<allocation> sia_policy::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  if (s_.p == 0) return error{error_kind::invalid_input, "sia: p must not be 0"};
  observe(s);
  const matrix t = policy_throughputs(s);
  std::vector<candidate> cands;
  milp_model m = build(s, t, true, cands);
  milp_settings set;
  set.time_limit_s = s_.ilp_time_limit;
  set.relative_gap = s_.ilp_gap;
  auto sol = solve_milp(m, set);
  if (sol && sol->outcome == milp_outcome::infeasible) {
    // The jobs kept through their restarts no longer fit (the cluster shrank): none is kept.
    m = build(s, t, false, cands);
    sol = solve_milp(m, set);
  }
  if (!sol) return sol.err();
  if (!sol->has_solution)
    return error{error_kind::internal,
                 std::string("sia: CBC found no plan (") + to_string(sol->outcome) + ")"};
  allocation a{std::vector<std::vector<double>>(s.jobs.size(),
                                                std::vector<double>(s.cl->types.size(), 0.0))};
  for (const auto& c : cands)
    if (sol->x[static_cast<std::size_t>(c.column)] > 0.5) a.x[c.job][c.type] = 1.0;
  return a;
}

milp_model sia_policy::build(const snapshot& s, const matrix& t, bool keep_restarting,
                             std::vector<candidate>& cands) const {
  const int n = static_cast<int>(s.jobs.size());
  const int k = static_cast<int>(s.cl->types.size());
  const double sign = s_.p < 0 ? 1.0 : -1.0;  // minimise for p < 0, maximise for p > 0
  milp_model m;
  cands.clear();
  std::vector<std::vector<std::pair<int, double>>> type_rows(static_cast<std::size_t>(k));
  for (int j = 0; j < n; ++j) {
    const auto& v = s.jobs[static_cast<std::size_t>(j)];
    const int scale = v.spec->scale_factor;
    const auto& st = jobs_.at(v.spec->id);
    double slowest = INFINITY;
    for (int c = 0; c < k; ++c)
      if (t[j][c] > 0 && s.cl->types[c].gpus >= scale) slowest = std::min(slowest, t[j][c]);
    if (!std::isfinite(slowest)) continue;  // fits on no type
    const double age = s.now - v.spec->arrival, pen = s_.restart_penalty;
    const double factor =
        v.attained_service < pen ? 1.0 : std::max(age - st.restarts * pen, 0.0) / (age + pen);
    const bool keep = keep_restarting && st.running >= 0 &&
                      s.now - st.started < v.restart_seconds && t[j][st.running] > 0 &&
                      s.cl->types[st.running].gpus >= scale;
    std::vector<std::pair<int, double>> one_type;
    for (int c = 0; c < k; ++c) {
      if (!(t[j][c] > 0) || s.cl->types[c].gpus < scale) continue;
      if (keep && c != st.running) continue;  // restarting: Sia keeps it where it is
      double g = scale * t[j][c] / slowest;
      if (st.running >= 0 && c != st.running && !keep) g *= factor;
      // A tie (equal A after Sia's rounding) goes to the type the job runs on: a move or a
      // preemption that gains nothing costs a restart (settings::stay_tie_break).
      const double tie = s_.stay_tie_break && c == st.running ? 1e-3 : 0.0;
      const double cost = sign * (powered(g, s_.p, s_.clip) - s_.lambda_n) - tie;
      const int col = m.add_column(keep ? 1 : 0, 1, cost, true);
      cands.push_back({j, c, col});
      one_type.emplace_back(col, 1.0);
      type_rows[static_cast<std::size_t>(c)].emplace_back(col, scale);
    }
    m.add_row(0, 1, one_type);
  }
  for (int c = 0; c < k; ++c)
    if (!type_rows[static_cast<std::size_t>(c)].empty())
      m.add_row(-INFINITY, s.cl->types[c].gpus, type_rows[static_cast<std::size_t>(c)]);
  return m;
}

std::vector<option_spec> sia_options() {
  return {
      {"p", "fairness power on normalised goodput (Sia: -0.5; not 0)", -0.5, -10.0, 10.0},
      {"lambda_n", "penalty for a job left without GPUs (Sia: 1.1)", 1.1, 0.0, 1e6},
      {"restart_penalty", "seconds a restart costs in the re-allocation factor (Sia: 30)", 30.0,
       0.0, 1e6},
      {"ilp_time_limit", "seconds CBC may spend on one round's program", 10.0, 0.01, 3600.0},
      {"ilp_gap", "relative optimality gap at which CBC stops (Sia: 1e-4)", 1e-4, 0.0, 0.5},
      bool_option("stay_tie_break",
                  "1 = a tie between staying and a move or preemption goes to staying "
                  "(default), 0 = CBC breaks it (docs/benchmarks/sia.md)",
                  true),
  };
}

std::unique_ptr<allocation_policy> make_sia(const options& o) {
  sia_settings s;
  s.p = o.get("p");
  s.lambda_n = o.get("lambda_n");
  s.restart_penalty = o.get("restart_penalty");
  s.ilp_time_limit = o.get("ilp_time_limit");
  s.ilp_gap = o.get("ilp_gap");
  s.stay_tie_break = o.flag("stay_tie_break");
  return std::make_unique<sia_policy>(s);
}

}  // namespace tessera
