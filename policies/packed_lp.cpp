#include "policies/packed_lp.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "runtime/core/server_throughput.hpp"
#include "runtime/solver/lp.hpp"

namespace tessera {

namespace {

constexpr double efficiency_slack = 1e-6;
constexpr double min_fraction = 1e-9;  ///< smaller class-pair fractions are dropped

/// Identical jobs: same job type, scale, weight and alone row.
struct packed_class {
  std::string job_type;
  int scale = 1;
  double weight = 0;
  std::vector<double> a;
  std::vector<std::size_t> members;  ///< indices into snapshot::jobs
  std::vector<int> col;              ///< column of y[c][j], -1 when absent
  int sum_row = -1, min_row = -1;
};

/// Two classes whose members may share GPUs (c <= d), with their co-located coefficients.
struct class_pair {
  std::size_t c = 0, d = 0;
  std::vector<double> tc, td;  ///< co-located throughput of c's and d's member on each type
  std::vector<int> col;        ///< column of v[c][d][j], -1 when the type has no entry
};

std::vector<packed_class> make_classes(const snapshot& s, const packed_lp_input& in) {
  std::map<std::tuple<std::string, int, double, std::vector<double>>, std::size_t> index;
  std::vector<packed_class> out;
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const job& j = *s.jobs[m].spec;
    const bool any =
        std::any_of(in.alone[m].begin(), in.alone[m].end(), [](double v) { return v > 0; });
    if (!any && !(in.weight[m] > 0)) continue;  // takes no part
    auto key = std::make_tuple(j.job_type, j.scale_factor, in.weight[m], in.alone[m]);
    auto [it, fresh] = index.emplace(std::move(key), out.size());
    if (fresh) out.push_back({j.job_type, j.scale_factor, in.weight[m], in.alone[m], {}, {}});
    out[it->second].members.push_back(m);
  }
  return out;
}

/// The class pairs with a co-location entry on some type that has room for them.
std::vector<class_pair> make_pairs(const snapshot& s, const std::vector<packed_class>& cls) {
  std::vector<class_pair> out;
  if (!s.rates) return out;
  const std::size_t k = s.cl->types.size();
  for (std::size_t c = 0; c < cls.size(); ++c)
    for (std::size_t d = c; d < cls.size(); ++d) {
      if (cls[c].scale != cls[d].scale || (c == d && cls[c].members.size() < 2)) continue;
      class_pair p{c, d, std::vector<double>(k, 0.0), std::vector<double>(k, 0.0),
                   std::vector<int>(k, -1)};
      bool any = false;
      for (std::size_t j = 0; j < k; ++j) {
        const auto& type = s.cl->types[j];
        if (type.gpus < cls[c].scale) continue;
        auto t = s.rates->colocated_table(static_cast<int>(j), cls[c].job_type, cls[d].job_type,
                                          cls[c].scale);
        if (!t) continue;
        p.tc[j] = t->first * type.mean_speed;
        p.td[j] = t->second * type.mean_speed;
        any = true;
      }
      if (any) out.push_back(std::move(p));
    }
  return out;
}

/// Per-member share of a class pair's total fraction for class c's members.
double member_share(const class_pair& p, const std::vector<packed_class>& cls, bool of_c) {
  const double n = static_cast<double>(cls[of_c ? p.c : p.d].members.size());
  return p.c == p.d ? 2.0 / n : 1.0 / n;
}

/// Builds the class LP (objective: max t); `sum_coef` receives each column's coefficient in
/// sum_m e_m, the efficiency stage's objective.
lp_model build_model(const snapshot& s, std::vector<packed_class>& cls,
                     std::vector<class_pair>& pairs, int& t_col, std::vector<double>& sum_coef) {
  lp_model model;
  model.set_sense(lp_sense::maximize);
  const std::size_t k = s.cl->types.size();
  std::vector<int> cap_row(k);
  for (std::size_t j = 0; j < k; ++j) cap_row[j] = model.add_row(-lp_inf, s.cl->types[j].gpus);
  t_col = model.add_column(0, lp_inf, 1.0);
  sum_coef.assign(1, 0.0);
  auto column = [&](double upper, double sum) {
    sum_coef.push_back(sum);
    return model.add_column(0, upper, 0.0);
  };
  for (auto& c : cls) {
    c.sum_row = model.add_row(-lp_inf, 1.0);
    c.min_row = model.add_row(0, lp_inf);
    model.add_coefficient(c.min_row, t_col, -1.0);
    c.col.assign(k, -1);
    const double n = static_cast<double>(c.members.size());
    for (std::size_t j = 0; j < k; ++j) {
      if (!(c.a[j] > 0) || s.cl->types[j].gpus < c.scale) continue;
      c.col[j] = column(1.0, n * c.a[j]);
      model.add_coefficient(cap_row[j], c.col[j], n * c.scale);
      model.add_coefficient(c.sum_row, c.col[j], 1.0);
      model.add_coefficient(c.min_row, c.col[j], c.a[j]);
    }
  }
  for (auto& p : pairs) {
    auto& a = cls[p.c];
    auto& b = cls[p.d];
    const double sa = member_share(p, cls, true), sb = member_share(p, cls, false);
    for (std::size_t j = 0; j < k; ++j) {
      if (!(p.tc[j] > 0)) continue;
      const double ea = a.weight * p.tc[j], eb = b.weight * p.td[j];
      p.col[j] = column(lp_inf, ea + eb);
      model.add_coefficient(cap_row[j], p.col[j], a.scale);
      if (p.c == p.d) {
        model.add_coefficient(a.sum_row, p.col[j], sa);
        model.add_coefficient(a.min_row, p.col[j], sa * (ea + eb) / 2);
        continue;
      }
      model.add_coefficient(a.sum_row, p.col[j], sa);
      model.add_coefficient(a.min_row, p.col[j], sa * ea);
      model.add_coefficient(b.sum_row, p.col[j], sb);
      model.add_coefficient(b.min_row, p.col[j], sb * eb);
    }
  }
  return model;
}

/// Spreads the class LP's solution `v` over the jobs.
allocation disaggregate(const snapshot& s, const std::vector<packed_class>& cls,
                        const std::vector<class_pair>& pairs, const std::vector<double>& v) {
  const std::size_t k = s.cl->types.size();
  allocation out;
  out.x.assign(s.jobs.size(), std::vector<double>(k, 0.0));
  for (const auto& c : cls)
    for (std::size_t j = 0; j < k; ++j)
      if (c.col[j] >= 0)
        for (std::size_t m : c.members) out.x[m][j] = std::clamp(v[c.col[j]], 0.0, 1.0);
  std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> job_pairs;
  for (const auto& p : pairs) {
    const auto& a = cls[p.c].members;
    const auto& b = cls[p.d].members;
    const double n =
        p.c == p.d ? a.size() * (a.size() - 1) / 2.0 : static_cast<double>(a.size()) * b.size();
    for (std::size_t j = 0; j < k; ++j) {
      if (p.col[j] < 0 || v[p.col[j]] <= min_fraction) continue;
      const double u = std::min(1.0, v[p.col[j]] / n);
      for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t l = p.c == p.d ? i + 1 : 0; l < b.size(); ++l) {
          auto key = std::minmax(a[i], b[l]);
          auto& x = job_pairs[{key.first, key.second}];
          x.resize(k, 0.0);
          x[j] += u;
        }
    }
  }
  for (auto& [key, x] : job_pairs) out.pairs.push_back({key.first, key.second, std::move(x)});
  return out;
}

status check_input(const snapshot& s, const packed_lp_input& in) {
  const std::size_t k = s.cl->types.size();
  if (in.alone.size() != s.jobs.size() || in.weight.size() != s.jobs.size())
    return error{error_kind::invalid_input, "packed lp: rows and weights differ from the jobs"};
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const bool bad_row =
        in.alone[m].size() != k || std::any_of(in.alone[m].begin(), in.alone[m].end(),
                                               [](double v) { return !std::isfinite(v) || v < 0; });
    if (bad_row || !std::isfinite(in.weight[m]) || in.weight[m] < 0)
      return error{error_kind::invalid_input,
                   "packed lp: job " + std::to_string(s.jobs[m].spec->id) +
                       ": coefficients must be finite and non-negative, one per GPU type"};
  }
  return {};
}

}  // namespace

result<packed_lp_result> solve_packed_lp(const snapshot& s, const packed_lp_input& in) {
  if (auto st = check_input(s, in); !st) return st.err();
  packed_lp_result out;
  auto cls = make_classes(s, in);
  auto pairs = make_pairs(s, cls);
  out.classes = static_cast<int>(cls.size());
  if (cls.empty()) {
    out.alloc.x.assign(s.jobs.size(), std::vector<double>(s.cl->types.size(), 0.0));
    return out;
  }
  int t_col = -1;
  std::vector<double> sum_coef;
  lp_model model = build_model(s, cls, pairs, t_col, sum_coef);
  out.pair_columns = model.num_columns() - 1;
  for (const auto& c : cls)
    out.pair_columns -= static_cast<int>(
        std::count_if(c.col.begin(), c.col.end(), [](int col) { return col >= 0; }));
  lp_solver solver;
  auto first = solver.solve(model);
  if (!first) return first.err();
  if (!first->optimal())
    return error{error_kind::solver_failed,
                 std::string("packed lp: max-min stage ended ") + to_string(first->outcome)};
  out.value = first->x[t_col];
  std::vector<double> v = first->x;
  if (in.efficiency_stage) {
    model.set_column_bounds(t_col, out.value * (1 - efficiency_slack), lp_inf);
    for (int col = 0; col < model.num_columns(); ++col) model.set_objective(col, sum_coef[col]);
    lp_settings primal;
    primal.algorithm = lp_algorithm::primal;
    auto second = solver.solve(model, primal, true);
    if (!second) return second.err();
    if (second->optimal()) v = second->x;  // else keep the max-min optimum
  }
  out.alloc = disaggregate(s, cls, pairs, v);
  return out;
}

bool shares_no_gpu(const snapshot& s) {
  return s.rates == nullptr || !s.rates->type_table().has_colocated();
}

}  // namespace tessera
