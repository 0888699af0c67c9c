#include "policies/hops_ilp.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>

namespace tessera {

namespace {

void fill_patterns_rec(const std::vector<int>& sizes, std::size_t idx, int left,
                       std::vector<int>& cur, std::vector<std::vector<int>>& out,
                       std::size_t limit, bool& overflow) {
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

/// The model's configuration columns and what the capacity rows need to know of them.
struct config_columns {
  std::vector<std::vector<int>> col;  ///< per job and configuration: its binary column
  std::vector<std::set<int>> sizes;   ///< per class: the partial-share sizes in use
  std::vector<bool> used_class;       ///< per class: some configuration uses it
};

/// Where one class's fill patterns sit in the model.
struct class_patterns {
  std::vector<std::vector<int>> patterns;  ///< the maximal multisets of the class's sizes
  std::vector<int> col;                    ///< the integer column counting each pattern
};

/// Checks every configuration against its class and adds one binary column per
/// configuration, job by job, with the configuration's value (at least 0) as its objective.
status add_config_columns(const hops_ilp_input& in, milp_model& m, config_columns& out) {
  const std::size_t n_jobs = in.configs.size(), n_classes = in.classes.size();
  out.col.assign(n_jobs, {});
  out.sizes.assign(n_classes, {});
  out.used_class.assign(n_classes, false);
  for (std::size_t i = 0; i < n_jobs; ++i) {
    if (in.value[i].size() != in.configs[i].size())
      return error{error_kind::invalid_input, "Hops ILP: one value per configuration expected"};
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      const auto& cf = in.configs[i][c];
      if (cf.cls < 0 || cf.cls >= static_cast<int>(n_classes))
        return error{error_kind::invalid_input, "Hops ILP: configuration names no class"};
      const auto& k = in.classes[cf.cls];
      int gpus = cf.whole_servers * k.capacity;
      for (int d : cf.pieces) {
        if (d <= 0 || d > k.capacity)
          return error{error_kind::invalid_input, "Hops ILP: share size outside the server"};
        out.sizes[cf.cls].insert(d);
        gpus += d;
      }
      if (gpus != cf.gpus || cf.whole_servers < 0)
        return error{error_kind::invalid_input, "Hops ILP: configuration GPUs do not add up"};
      out.used_class[cf.cls] = true;
      out.col[i].push_back(m.add_binary(std::max(0.0, in.value[i][c])));
    }
  }
  return {};
}

/// One configuration per job: sum_c y[i][c] <= 1.
void add_one_config_rows(const config_columns& cc, milp_model& m) {
  for (const auto& cols : cc.col) {
    if (cols.empty()) continue;
    std::vector<std::pair<int, double>> row;
    for (int c : cols) row.emplace_back(c, 1.0);
    m.add_row(-lp_inf, 1.0, row);
  }
}

/// Class k's server row: its pattern columns (added here) plus whole servers used <= its
/// servers.
void add_server_row(const hops_ilp_input& in, std::size_t k, const config_columns& cc,
                    milp_model& m, class_patterns& cp) {
  const double n_servers = static_cast<double>(in.classes[k].servers.size());
  std::vector<std::pair<int, double>> row;
  for (std::size_t p = 0; p < cp.patterns.size(); ++p) {
    const int c = m.add_column(0, n_servers, 0, true);
    cp.col.push_back(c);
    row.emplace_back(c, 1.0);
  }
  for (std::size_t i = 0; i < in.configs.size(); ++i)
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      const auto& cf = in.configs[i][c];
      if (cf.cls == static_cast<int>(k) && cf.whole_servers > 0)
        row.emplace_back(cc.col[i][c], cf.whole_servers);
    }
  m.add_row(-lp_inf, n_servers, row);
}

/// Class k's row for share size d: shares of size d <= the slots of size d in its patterns.
void add_share_row(const hops_ilp_input& in, std::size_t k, int d, const config_columns& cc,
                   const class_patterns& cp, milp_model& m) {
  std::vector<std::pair<int, double>> row;
  for (std::size_t i = 0; i < in.configs.size(); ++i)
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      const auto& cf = in.configs[i][c];
      if (cf.cls != static_cast<int>(k)) continue;
      const auto n = std::count(cf.pieces.begin(), cf.pieces.end(), d);
      if (n > 0) row.emplace_back(cc.col[i][c], static_cast<double>(n));
    }
  for (std::size_t p = 0; p < cp.patterns.size(); ++p) {
    const auto n = std::count(cp.patterns[p].begin(), cp.patterns[p].end(), d);
    if (n > 0) row.emplace_back(cp.col[p], -static_cast<double>(n));
  }
  m.add_row(-lp_inf, 0.0, row);
}

/// Per-server capacity of every used class through its fill patterns.
result<std::vector<class_patterns>> add_capacity_rows(const hops_ilp_input& in,
                                                      const config_columns& cc,
                                                      milp_model& m) {
  std::vector<class_patterns> out(in.classes.size());
  for (std::size_t k = 0; k < in.classes.size(); ++k) {
    if (!cc.used_class[k]) continue;
    const auto& cls = in.classes[k];
    auto& cp = out[k];
    if (!cc.sizes[k].empty()) {
      cp.patterns =
          fill_patterns(std::vector<int>(cc.sizes[k].begin(), cc.sizes[k].end()), cls.capacity);
      if (cp.patterns.empty())
        return error{error_kind::solver_failed,
                     "Hops ILP: too many fill patterns for servers of " +
                         std::to_string(cls.capacity) + " GPUs"};
    }
    add_server_row(in, k, cc, m, cp);
    for (int d : cc.sizes[k]) add_share_row(in, k, d, cc, cp, m);
  }
  return out;
}

/// Reads CBC's solution: each job's chosen configuration and each class's pattern copies.
void read_solution(const config_columns& cc, const std::vector<class_patterns>& cps,
                   hops_ilp_result& res) {
  res.choice.assign(cc.col.size(), -1);
  if (!res.solution.has_solution) return;
  const auto& x = res.solution.x;
  for (std::size_t i = 0; i < cc.col.size(); ++i)
    for (std::size_t c = 0; c < cc.col[i].size(); ++c)
      if (x[cc.col[i][c]] > 0.5) {
        res.choice[i] = static_cast<int>(c);
        break;
      }
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
  config_columns cc;
  if (auto st = add_config_columns(in, m, cc); !st) return st.err();
  add_one_config_rows(cc, m);
  auto cps = add_capacity_rows(in, cc, m);
  if (!cps) return cps.err();
  hops_ilp_result res;
  res.patterns.resize(in.classes.size());
  res.columns = m.num_columns();
  res.rows = m.num_rows();
  res.integers = m.num_integers();
  auto sol = solve_milp(m, s);
  if (!sol) return sol.err();
  res.solution = std::move(sol.value());
  read_solution(cc, cps.value(), res);
  return res;
}

}  // namespace tessera
