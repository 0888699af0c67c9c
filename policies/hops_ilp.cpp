#include "policies/hops_ilp.hpp"

#include "policies/hops_internal.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace tessera {

namespace {

void fill_patterns_rec(const std::vector<int>& sizes, std::size_t idx, int left,
                       std::vector<int>& cur, std::vector<std::vector<int>>& out, std::size_t limit,
                       bool& overflow) {
  if (overflow) return;
  if (idx == sizes.size()) {
    if (left < sizes.back()) {  // maximal: no size fits any more
      if (out.size() >= limit) {
        overflow = true;
        return;
      }
      out.push_back(cur);
    }
    return;
  }
  const int d = sizes[idx];
  for (int n = left / d; n >= 0; --n) {
    for (int k = 0; k < n; ++k) cur.push_back(d);
    fill_patterns_rec(sizes, idx + 1, left - n * d, cur, out, limit, overflow);
    cur.resize(cur.size() - n);
    if (overflow) return;
  }
}

/// Jobs that share the model's columns: one job, or (grouped) jobs of one shape whose
/// weights fall in one bin.
struct job_group {
  std::vector<int> members;  ///< job indices, ascending
  int rep = 0;               ///< the member whose configurations stand for the group's
  int shape = 0;             ///< jobs of one shape have the same configurations and u
  std::vector<double> unit;  ///< objective of one member on each configuration
};

/// The model's configuration columns and what the capacity rows need to know of them.
struct config_columns {
  std::vector<job_group> groups;
  std::vector<double> weight;         ///< per job: max_c value
  int shapes = 0;                     ///< shape ids are 0 .. shapes - 1
  std::vector<std::vector<int>> col;  ///< per group and configuration: its column
  std::vector<std::set<int>> sizes;   ///< per class: the partial-share sizes in use
  std::vector<bool> used_class;       ///< per class: some configuration uses it
};

/// Per job: its weight w = max_c value (the scale of its value vector).
double job_weight(const std::vector<double>& v) {
  double w = 0;
  for (double x : v) w = std::max(w, x);
  return w;
}

/// A job's shape: its configurations and its value vector over its weight (each value
/// rounded to 1e-9 of the weight), as bytes into `key` (its storage reused): two jobs have
/// the same key exactly when those fields are equal.
void shape_key(const std::vector<hops_config>& cfs, const std::vector<double>& v, double w,
               std::string& key) {
  key.clear();
  for (std::size_t c = 0; c < cfs.size(); ++c) {
    const auto& cf = cfs[c];
    detail::append_bytes(key, cf.cls);
    detail::append_bytes(key, cf.gpus);
    detail::append_bytes(key, cf.whole_servers);
    detail::append_bytes(key, static_cast<char>(cf.stay));
    detail::append_bytes(key, static_cast<char>(cf.pieces.size()));
    for (int d : cf.pieces) detail::append_bytes(key, d);
    detail::append_bytes(key, static_cast<long long>(std::llround(v[c] / w * 1e9)));
  }
}

/// The groups of `in` into `cc` (with each job's weight): one per job when its tolerance is
/// 0 (in job order, each its own shape), else one per (shape, weight bin), valued at the
/// bin's mean weight.
void group_jobs(const hops_ilp_input& in, config_columns& cc) {
  const std::size_t n = in.configs.size();
  const double t = in.group_tolerance;
  std::unordered_map<std::string, int> shapes;
  std::map<std::pair<int, long long>, int> bins;
  std::string key;
  std::vector<double> weight_sum;
  auto& out = cc.groups;
  cc.weight.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double w = cc.weight[i] = job_weight(in.value[i]);
    if (!(t > 0) || !(w > 0)) {
      out.push_back({{static_cast<int>(i)}, static_cast<int>(i), cc.shapes++, in.value[i]});
      weight_sum.push_back(0);
      continue;
    }
    shape_key(in.configs[i], in.value[i], w, key);
    const auto [shape_it, new_shape] = shapes.emplace(key, cc.shapes);
    if (new_shape) ++cc.shapes;
    const int shape = shape_it->second;
    const auto bin = static_cast<long long>(std::floor(std::log(w) / std::log1p(t)));
    const auto [it, fresh] = bins.emplace(std::make_pair(shape, bin), static_cast<int>(out.size()));
    if (fresh) {
      out.push_back({{}, static_cast<int>(i), shape, {}});
      for (double x : in.value[i]) out.back().unit.push_back(x / w);
      weight_sum.push_back(0);
    }
    out[it->second].members.push_back(static_cast<int>(i));
    weight_sum[it->second] += w;
  }
  for (std::size_t g = 0; g < out.size(); ++g)
    if (weight_sum[g] > 0)
      for (double& u : out[g].unit) u *= weight_sum[g] / out[g].members.size();
}

/// Checks every job's configurations against its class.
status check_configs(const hops_ilp_input& in) {
  const std::size_t n_classes = in.classes.size();
  for (std::size_t i = 0; i < in.configs.size(); ++i) {
    if (in.value[i].size() != in.configs[i].size())
      return error{error_kind::invalid_input, "Hops ILP: one value per configuration expected"};
    for (const auto& cf : in.configs[i]) {
      if (cf.cls < 0 || cf.cls >= static_cast<int>(n_classes))
        return error{error_kind::invalid_input, "Hops ILP: configuration names no class"};
      const auto& k = in.classes[cf.cls];
      int gpus = cf.whole_servers * k.capacity;
      for (int d : cf.pieces) {
        if (d <= 0 || d > k.capacity)
          return error{error_kind::invalid_input, "Hops ILP: share size outside the server"};
        gpus += d;
      }
      if (gpus != cf.gpus || cf.whole_servers < 0)
        return error{error_kind::invalid_input, "Hops ILP: configuration GPUs do not add up"};
    }
  }
  return {};
}

/// One column per group and configuration, counting the group's members on it (binary for
/// a one-job group), with the configuration's unit value (at least 0) as its objective.
void add_config_columns(const hops_ilp_input& in, milp_model& m, config_columns& out) {
  group_jobs(in, out);
  out.col.assign(out.groups.size(), {});
  out.sizes.assign(in.classes.size(), {});
  out.used_class.assign(in.classes.size(), false);
  for (std::size_t g = 0; g < out.groups.size(); ++g) {
    const auto& gr = out.groups[g];
    const double size = static_cast<double>(gr.members.size());
    for (std::size_t c = 0; c < in.configs[gr.rep].size(); ++c) {
      const auto& cf = in.configs[gr.rep][c];
      for (int d : cf.pieces) out.sizes[cf.cls].insert(d);
      out.used_class[cf.cls] = true;
      out.col[g].push_back(m.add_column(0, size, std::max(0.0, gr.unit[c]), true));
    }
  }
}

/// One configuration per job: sum_c n[g][c] <= members of g.
void add_one_config_rows(const config_columns& cc, milp_model& m) {
  for (std::size_t g = 0; g < cc.col.size(); ++g) {
    if (cc.col[g].empty()) continue;
    std::vector<std::pair<int, double>> row;
    for (int c : cc.col[g]) row.emplace_back(c, 1.0);
    m.add_row(-lp_inf, static_cast<double>(cc.groups[g].members.size()), row);
  }
}

/// Where one class's fill patterns sit in the model.
struct class_patterns {
  std::vector<std::vector<int>> patterns;  ///< the maximal multisets of the class's sizes
  std::vector<int> col;                    ///< the integer column counting each pattern
};

/// Class k's server row: its pattern columns (added here) plus whole servers used <= its
/// servers.
void add_server_row(const hops_ilp_input& in, std::size_t k, const config_columns& cc,
                    milp_model& m, class_patterns& cp) {
  const double n_servers = static_cast<double>(in.classes[k].servers.size());
  std::vector<std::pair<int, double>> row;
  for (std::size_t p = 0; p < cp.patterns.size(); ++p) {
    const int c = m.add_column(0, n_servers, 0, true);
    m.set_flexible(c);  // the rounding of the configuration columns may need other patterns
    cp.col.push_back(c);
    row.emplace_back(c, 1.0);
  }
  for (std::size_t g = 0; g < cc.groups.size(); ++g) {
    const auto& cfs = in.configs[cc.groups[g].rep];
    for (std::size_t c = 0; c < cfs.size(); ++c)
      if (cfs[c].cls == static_cast<int>(k) && cfs[c].whole_servers > 0)
        row.emplace_back(cc.col[g][c], cfs[c].whole_servers);
  }
  m.add_row(-lp_inf, n_servers, row);
}

/// Class k's row for share size d: shares of size d <= the slots of size d in its patterns.
void add_share_row(const hops_ilp_input& in, std::size_t k, int d, const config_columns& cc,
                   const class_patterns& cp, milp_model& m) {
  std::vector<std::pair<int, double>> row;
  for (std::size_t g = 0; g < cc.groups.size(); ++g) {
    const auto& cfs = in.configs[cc.groups[g].rep];
    for (std::size_t c = 0; c < cfs.size(); ++c) {
      if (cfs[c].cls != static_cast<int>(k)) continue;
      const auto n = std::count(cfs[c].pieces.begin(), cfs[c].pieces.end(), d);
      if (n > 0) row.emplace_back(cc.col[g][c], static_cast<double>(n));
    }
  }
  for (std::size_t p = 0; p < cp.patterns.size(); ++p) {
    const auto n = std::count(cp.patterns[p].begin(), cp.patterns[p].end(), d);
    if (n > 0) row.emplace_back(cp.col[p], -static_cast<double>(n));
  }
  m.add_row(-lp_inf, 0.0, row);
}

/// Per-server capacity of every used class through its fill patterns.
result<std::vector<class_patterns>> add_capacity_rows(const hops_ilp_input& in,
                                                      const config_columns& cc, milp_model& m) {
  std::vector<class_patterns> out(in.classes.size());
  for (std::size_t k = 0; k < in.classes.size(); ++k) {
    if (!cc.used_class[k]) continue;
    const auto& cls = in.classes[k];
    auto& cp = out[k];
    if (!cc.sizes[k].empty()) {
      cp.patterns =
          fill_patterns(std::vector<int>(cc.sizes[k].begin(), cc.sizes[k].end()), cls.capacity);
      if (cp.patterns.empty())
        return error{error_kind::solver_failed, "Hops ILP: too many fill patterns for servers of " +
                                                    std::to_string(cls.capacity) + " GPUs"};
    }
    add_server_row(in, k, cc, m, cp);
    for (int d : cc.sizes[k]) add_share_row(in, k, d, cc, cp, m);
  }
  return out;
}

/// Hands one shape's chosen configurations to its jobs: best unit value first, to the
/// highest weights first (ties: lower configuration index, lower job index).
void hand_out(const config_columns& cc, const std::vector<int>& gs, const std::vector<double>& x,
              std::vector<int>& choice) {
  const auto& u = cc.groups[gs.front()].unit;
  std::vector<int> chosen, jobs;
  for (int g : gs) {
    for (std::size_t c = 0; c < cc.col[g].size(); ++c)
      for (long n = std::lround(x[cc.col[g][c]]); n > 0; --n) chosen.push_back(static_cast<int>(c));
    jobs.insert(jobs.end(), cc.groups[g].members.begin(), cc.groups[g].members.end());
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](int a, int b) { return u[a] > u[b]; });
  const auto& w = cc.weight;
  std::stable_sort(jobs.begin(), jobs.end(),
                   [&](int a, int b) { return w[a] != w[b] ? w[a] > w[b] : a < b; });
  for (std::size_t r = 0; r < chosen.size() && r < jobs.size(); ++r) choice[jobs[r]] = chosen[r];
}

/// Reads CBC's solution: each job's chosen configuration and each class's pattern copies.
void read_solution(const hops_ilp_input& in, const config_columns& cc,
                   const std::vector<class_patterns>& cps, hops_ilp_result& res) {
  res.choice.assign(in.configs.size(), -1);
  if (!res.solution.has_solution) return;
  const auto& x = res.solution.x;
  std::vector<std::vector<int>> by_shape(cc.shapes);
  for (std::size_t g = 0; g < cc.groups.size(); ++g)
    by_shape[cc.groups[g].shape].push_back(static_cast<int>(g));
  for (const auto& gs : by_shape)
    if (!gs.empty()) hand_out(cc, gs, x, res.choice);
  for (std::size_t k = 0; k < cps.size(); ++k)
    for (std::size_t p = 0; p < cps[k].col.size(); ++p) {
      const int copies = static_cast<int>(std::lround(x[cps[k].col[p]]));
      for (int n = 0; n < copies; ++n) res.patterns[k].push_back(cps[k].patterns[p]);
    }
}

}  // namespace

std::vector<std::vector<int>> fill_patterns(const std::vector<int>& sizes_in, int capacity,
                                            std::size_t limit) {
  std::vector<int> sizes;
  for (int d : sizes_in)
    if (d > 0 && d <= capacity) sizes.push_back(d);
  std::sort(sizes.begin(), sizes.end(), std::greater<int>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<std::vector<int>> out;
  if (sizes.empty()) return out;
  std::vector<int> cur;
  bool overflow = false;
  fill_patterns_rec(sizes, 0, capacity, cur, out, limit, overflow);
  if (overflow) out.clear();
  return out;
}

result<hops_ilp_result> solve_hops_ilp(const hops_ilp_input& in, const milp_settings& s) {
  if (in.value.size() != in.configs.size())
    return error{error_kind::invalid_input, "Hops ILP: one value row per job expected"};
  milp_model m;
  m.set_sense(lp_sense::maximize);
  if (auto st = check_configs(in); !st) return st.err();
  config_columns cc;
  add_config_columns(in, m, cc);
  add_one_config_rows(cc, m);
  auto cps = add_capacity_rows(in, cc, m);
  if (!cps) return cps.err();
  hops_ilp_result res;
  res.patterns.resize(in.classes.size());
  res.columns = m.num_columns();
  res.rows = m.num_rows();
  res.integers = m.num_integers();
  res.groups = static_cast<int>(cc.groups.size());
  auto sol = solve_milp(m, s);
  if (!sol) return sol.err();
  res.solution = std::move(sol.value());
  read_solution(in, cc, cps.value(), res);
  return res;
}

}  // namespace tessera
