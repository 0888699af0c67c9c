#include "policies/sia.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"
#include "runtime/solver/choice_knapsack.hpp"
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
  std::vector<candidate> cands = candidates(s, t, true);
  auto chosen = choose(s, cands);
  if (chosen && chosen->empty()) {
    // The jobs kept through their restarts no longer fit (the cluster shrank): none is kept.
    cands = candidates(s, t, false);
    chosen = choose(s, cands);
  }
  if (!chosen) return chosen.err();
  allocation a{std::vector<std::vector<double>>(s.jobs.size(),
                                                std::vector<double>(s.cl->types.size(), 0.0))};
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (chosen.value()[i]) a.x[cands[i].job][cands[i].type] = 1.0;
  return a;
}

result<std::vector<char>> sia_policy::choose(const snapshot& s,
                                             const std::vector<candidate>& cands) const {
  if (s_.dp_cells > 0)
    if (auto exact = choose_exact(s, cands)) return std::move(*exact);
  std::vector<candidate> cols = cands;
  const milp_model m = build(s, cols);
  milp_settings set;
  set.time_limit_s = s_.ilp_time_limit;
  set.relative_gap = s_.ilp_gap;
  const auto sol = solve_milp(m, set);
  if (!sol) return sol.err();
  if (sol->outcome == milp_outcome::infeasible) return std::vector<char>{};
  if (!sol->has_solution)
    return error{error_kind::internal,
                 std::string("sia: CBC found no plan (") + to_string(sol->outcome) + ")"};
  std::vector<char> on(cands.size(), 0);
  for (std::size_t i = 0; i < cands.size(); ++i)
    on[i] = sol->x[static_cast<std::size_t>(cols[i].column)] > 0.5;
  return on;
}

std::optional<std::vector<char>> sia_policy::choose_exact(
    const snapshot& s, const std::vector<candidate>& cands) const {
  std::vector<int> cap;
  for (const auto& ty : s.cl->types) cap.push_back(ty.gpus);
  // One item per job with candidates (cands come grouped by job), by arrival then id: ties
  // go to the earlier job.
  std::vector<int> jobs;
  for (const auto& c : cands)
    if (jobs.empty() || jobs.back() != c.job) jobs.push_back(c.job);
  const auto spec = [&](int j) -> const job& { return *s.jobs[static_cast<std::size_t>(j)].spec; };
  std::sort(jobs.begin(), jobs.end(), [&](int x, int y) {
    return spec(x).arrival != spec(y).arrival ? spec(x).arrival < spec(y).arrival
                                              : spec(x).id < spec(y).id;
  });
  std::vector<int> item_of(s.jobs.size(), -1);
  for (std::size_t k = 0; k < jobs.size(); ++k)
    item_of[static_cast<std::size_t>(jobs[k])] = static_cast<int>(k);
  // Costs in millionths (A has two decimals, the tie break three): exact integer sums.
  std::vector<choice_item> items(jobs.size());
  std::vector<std::pair<int, int>> where;  // per candidate: (item, option)
  for (const auto& c : cands) {
    const int item = item_of[static_cast<std::size_t>(c.job)];
    choice_item& it = items[static_cast<std::size_t>(item)];
    where.emplace_back(item, static_cast<int>(it.options.size()));
    it.options.push_back({c.type, spec(c.job).scale_factor, std::llround(c.cost * 1e6)});
    it.forced = it.forced || c.keep;
  }
  const auto sol = solve_choice_knapsack(cap, items, static_cast<std::int64_t>(s_.dp_cells));
  if (sol.outcome == choice_outcome::too_large) return std::nullopt;
  std::vector<char> on;
  if (sol.outcome == choice_outcome::infeasible) return on;
  on.assign(cands.size(), 0);
  for (std::size_t i = 0; i < cands.size(); ++i)
    on[i] = sol.pick[static_cast<std::size_t>(where[i].first)] == where[i].second;
  return on;
}

std::vector<sia_policy::candidate> sia_policy::candidates(const snapshot& s, const matrix& t,
                                                          bool keep_restarting) const {
  const int n = static_cast<int>(s.jobs.size());
  const int k = static_cast<int>(s.cl->types.size());
  const double sign = s_.p < 0 ? 1.0 : -1.0;  // minimise for p < 0, maximise for p > 0
  std::vector<candidate> cands;
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
    for (int c = 0; c < k; ++c) {
      if (!(t[j][c] > 0) || s.cl->types[c].gpus < scale) continue;
      if (keep && c != st.running) continue;  // restarting: Sia keeps it where it is
      double g = scale * t[j][c] / slowest;
      if (st.running >= 0 && c != st.running && !keep) g *= factor;
      // A tie (equal A after Sia's rounding) goes to the type the job runs on: a move or a
      // preemption that gains nothing costs a restart (settings::stay_tie_break).
      const double tie = s_.stay_tie_break && c == st.running ? 1e-3 : 0.0;
      const double cost = sign * (powered(g, s_.p, s_.clip) - s_.lambda_n) - tie;
      cands.push_back({j, c, 0, cost, keep});
    }
  }
  return cands;
}

milp_model sia_policy::build(const snapshot& s, std::vector<candidate>& cands) const {
  const std::size_t k = s.cl->types.size();
  milp_model m;
  std::vector<std::vector<std::pair<int, double>>> type_rows(k);
  std::vector<std::pair<int, double>> one_type;  // the current job's columns
  for (std::size_t i = 0; i < cands.size(); ++i) {
    candidate& c = cands[i];
    c.column = m.add_column(c.keep ? 1 : 0, 1, c.cost, true);
    one_type.emplace_back(c.column, 1.0);
    type_rows[static_cast<std::size_t>(c.type)].emplace_back(
        c.column, s.jobs[static_cast<std::size_t>(c.job)].spec->scale_factor);
    if (i + 1 == cands.size() || cands[i + 1].job != c.job) {  // the job's row after its columns
      m.add_row(0, 1, one_type);
      one_type.clear();
    }
  }
  for (std::size_t c = 0; c < k; ++c)
    if (!type_rows[c].empty()) m.add_row(-INFINITY, s.cl->types[c].gpus, type_rows[c]);
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
      {"dp_cells",
       "most cells ((jobs + 1) x GPU-count states of the types) for solving the round's program "
       "exactly by dynamic programming; larger programs, or 0, go to CBC",
       4194304.0, 0.0, 1e9},
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
  s.dp_cells = o.get("dp_cells");
  return std::make_unique<sia_policy>(s);
}

}  // namespace tessera
