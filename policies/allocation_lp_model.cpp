// The class LP of allocation_lp (allocation_lp_model.hpp): job classes, the LP over them, the
// mapping of a basis between two such LPs, and the crash from a coarser LP over buckets.
#include "policies/allocation_lp_model.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

namespace tessera::detail {

namespace {

/// Hash key of a (scale, integer cell) vector.
template <class T>
std::string bytes_key(int scale, const std::vector<T>& v) {
  std::string k(sizeof(int) + v.size() * sizeof(T), '\0');
  std::memcpy(k.data(), &scale, sizeof(int));
  if (!v.empty()) std::memcpy(k.data() + sizeof(int), v.data(), v.size() * sizeof(T));
  return k;
}

}  // namespace

namespace {

/// Open-addressing index of job classes by (scale, coefficients), compared bit for bit as the
/// LP would see them: a lookup hashes k doubles and allocates nothing, where a string key
/// per job cost a malloc each (a tenth of a 10,000-GPU round's allocation).
class class_table {
 public:
  explicit class_table(std::size_t jobs) : slots_(slot_count(jobs), -1) {}
  /// The class equal to (scale, a), or -1 after reserving its slot for class `fresh`.
  int find_or_add(const std::vector<job_class>& classes, int scale, const std::vector<double>& a,
                  int fresh) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(scale, a) & mask;; i = (i + 1) & mask) {
      const int c = slots_[i];
      if (c < 0) {
        slots_[i] = fresh;
        return -1;
      }
      if (classes[c].scale == scale &&
          std::memcmp(classes[c].a.data(), a.data(), a.size() * sizeof(double)) == 0)
        return c;
    }
  }

 private:
  static std::size_t slot_count(std::size_t jobs) {
    std::size_t n = 16;
    while (n < 2 * jobs) n *= 2;
    return n;
  }
  static std::size_t hash(int scale, const std::vector<double>& a) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(scale);
    for (double v : a) {
      std::uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      h = (h ^ bits) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    return static_cast<std::size_t>(h);
  }
  std::vector<int> slots_;
};

}  // namespace

std::vector<job_class> build_classes(const allocation_lp_input& in, bool aggregate,
                                     std::vector<int>& class_of) {
  const int n = static_cast<int>(in.rows.size());
  const int k = static_cast<int>(in.capacity.size());
  std::vector<job_class> classes;
  class_of.assign(n, -1);
  class_table index(aggregate ? static_cast<std::size_t>(n) : 0);
  std::vector<double> a(k);
  for (int m = 0; m < n; ++m) {
    bool any = false;
    for (int j = 0; j < k; ++j) {
      const double v = in.rows[m][j];
      a[j] = (v > 0 && in.capacity[j] >= in.scale[m]) ? v : 0.0;  // also folds -0.0
      any = any || a[j] > 0;
    }
    if (!any) continue;
    int c = static_cast<int>(classes.size());
    if (aggregate) {
      if (const int found = index.find_or_add(classes, in.scale[m], a, c); found >= 0)
        c = found;
      else
        classes.push_back(job_class{a, in.scale[m], 0});
    } else {
      classes.push_back(job_class{a, in.scale[m], 0});
    }
    ++classes[c].count;
    class_of[m] = c;
  }
  return classes;
}

double normalise_rows(std::vector<job_class>& classes) {
  double norm = lp_inf;
  for (const auto& c : classes) norm = std::min(norm, *std::max_element(c.a.begin(), c.a.end()));
  for (auto& c : classes)
    for (double& v : c.a) v /= norm;
  return norm;
}

built_model build_model(const std::vector<job_class>& classes, const std::vector<double>& capacity,
                        bool maxmin) {
  built_model b;
  const int nclass = static_cast<int>(classes.size());
  const int k = static_cast<int>(capacity.size());
  auto& model = b.model;
  model.set_sense(lp_sense::maximize);
  b.layout.assign(nclass, class_layout{});
  std::size_t ncols = 0;
  for (const auto& c : classes)
    for (double v : c.a) ncols += v > 0;
  model.reserve(static_cast<int>(ncols) + 1, 2 * nclass + k, ncols * 3 + nclass);
  for (int c = 0; c < nclass; ++c) {
    b.layout[c].col.assign(k, -1);
    for (int j = 0; j < k; ++j)
      if (classes[c].a[j] > 0)
        b.layout[c].col[j] =
            model.add_column(0.0, 1.0, maxmin ? 0.0 : classes[c].count * classes[c].a[j]);
  }
  b.t_col = maxmin ? model.add_column(0.0, lp_inf, 1.0) : -1;
  for (int c = 0; c < nclass; ++c) {
    auto& l = b.layout[c];
    l.sum_row = model.add_row(-lp_inf, 1.0);
    for (int j = 0; j < k; ++j)
      if (l.col[j] >= 0) model.add_coefficient(l.sum_row, l.col[j], 1.0);
    if (maxmin) {
      l.min_row = model.add_row(0.0, lp_inf);
      for (int j = 0; j < k; ++j)
        if (l.col[j] >= 0) model.add_coefficient(l.min_row, l.col[j], classes[c].a[j]);
      model.add_coefficient(l.min_row, b.t_col, -1.0);
    }
  }
  b.cap_row.assign(k, -1);
  for (int j = 0; j < k; ++j) {
    b.cap_row[j] = model.add_row(-lp_inf, capacity[j]);
    for (int c = 0; c < nclass; ++c)
      if (b.layout[c].col[j] >= 0)
        model.add_coefficient(b.cap_row[j], b.layout[c].col[j],
                              static_cast<double>(classes[c].count) * classes[c].scale);
  }
  return b;
}

lp_basis map_basis(const lp_basis& fb, const std::vector<double>& fx, const built_model& from,
                   const built_model& to, const std::vector<int>& src, int to_columns,
                   int to_rows) {
  lp_basis b;
  b.columns.assign(to_columns, lp_var_status::at_lower);
  b.rows.assign(to_rows, lp_var_status::basic);
  const int k = static_cast<int>(to.cap_row.size());
  std::vector<char> used(from.layout.size(), 0);
  for (std::size_t c = 0; c < to.layout.size(); ++c) {
    const int oc = src[c];
    if (oc < 0) continue;
    const auto& ol = from.layout[oc];
    const auto& nl = to.layout[c];
    for (int j = 0; j < k; ++j)
      if (nl.col[j] >= 0 && ol.col[j] >= 0) b.columns[nl.col[j]] = fb.columns[ol.col[j]];
    b.rows[nl.sum_row] = fb.rows[ol.sum_row];
    if (nl.min_row >= 0 && ol.min_row >= 0) b.rows[nl.min_row] = fb.rows[ol.min_row];
    if (!used[oc]) {
      used[oc] = 1;
      continue;
    }
    // A further member of the same source: regularise to as many basics as rows.
    const int want = nl.min_row >= 0 ? 2 : 1;
    int have = (b.rows[nl.sum_row] == lp_var_status::basic) +
               (nl.min_row >= 0 && b.rows[nl.min_row] == lp_var_status::basic);
    for (int j = 0; j < k; ++j)
      if (nl.col[j] >= 0) have += b.columns[nl.col[j]] == lp_var_status::basic;
    auto value = [&](int j) {
      const int oc_col = ol.col[j];
      return oc_col >= 0 && static_cast<std::size_t>(oc_col) < fx.size() ? fx[oc_col] : 0.0;
    };
    while (have > want) {
      int drop = -1;
      for (int j = 0; j < k; ++j) {
        if (nl.col[j] < 0 || b.columns[nl.col[j]] != lp_var_status::basic) continue;
        if (drop < 0 || value(j) < value(drop)) drop = j;
      }
      if (drop < 0) {
        // Only row slacks are basic: make one nonbasic at its finite bound.
        if (nl.min_row >= 0 && b.rows[nl.min_row] == lp_var_status::basic)
          b.rows[nl.min_row] = lp_var_status::at_lower;
        else
          b.rows[nl.sum_row] = lp_var_status::at_upper;
      } else {
        b.columns[nl.col[drop]] = lp_var_status::at_lower;
      }
      --have;
    }
    if (have < want && nl.min_row >= 0 && b.rows[nl.min_row] != lp_var_status::basic) {
      b.rows[nl.min_row] = lp_var_status::basic;
      ++have;
    }
    if (have < want && b.rows[nl.sum_row] != lp_var_status::basic) {
      b.rows[nl.sum_row] = lp_var_status::basic;
      ++have;
    }
  }
  if (to.t_col >= 0 && from.t_col >= 0) b.columns[to.t_col] = fb.columns[from.t_col];
  for (int j = 0; j < k; ++j) b.rows[to.cap_row[j]] = fb.rows[from.cap_row[j]];

  long basic = 0;
  for (auto v : b.columns) basic += v == lp_var_status::basic;
  for (auto v : b.rows) basic += v == lp_var_status::basic;
  const long rows = to_rows;
  for (int r = 0; r < to_rows && basic < rows; ++r)
    if (b.rows[r] != lp_var_status::basic) {
      b.rows[r] = lp_var_status::basic;
      ++basic;
    }
  for (int col = to_columns - 1; col >= 0 && basic > rows; --col)
    if (b.columns[col] == lp_var_status::basic && col != to.t_col) {
      b.columns[col] = lp_var_status::at_lower;
      --basic;
    }
  return b;
}

bool set_efficiency_stage(lp_solver& solver, const built_model& b,
                          const std::vector<job_class>& classes, double t_star, double slack) {
  bool ok = static_cast<bool>(
      solver.set_column_bounds(b.t_col, std::max(0.0, t_star * (1.0 - slack)), lp_inf));
  ok = ok && solver.set_objective(b.t_col, 0.0);
  const std::size_t k = b.cap_row.size();
  for (std::size_t c = 0; ok && c < classes.size(); ++c)
    for (std::size_t j = 0; j < k; ++j)
      if (b.layout[c].col[j] >= 0)
        ok = ok && solver.set_objective(b.layout[c].col[j], classes[c].count * classes[c].a[j]);
  return ok;
}

crash_bases crash_basis(const std::vector<job_class>& classes, const built_model& to,
                        int to_columns, int to_rows, const std::vector<double>& capacity,
                        bool maxmin, int min_classes, bool efficiency, double slack) {
  const int nclass = static_cast<int>(classes.size());
  if (nclass < std::max(min_classes, 8)) return {};
  const int k = static_cast<int>(capacity.size());
  std::vector<int> bucket_of(nclass, -1);
  int nbucket = nclass;
  for (double eps : {0.01, 0.03, 0.1, 0.3, 1.0, 3.0}) {
    const double step = std::log1p(eps);
    std::unordered_map<std::string, int> index;
    index.reserve(static_cast<std::size_t>(nclass) * 2);
    std::vector<std::int32_t> cell(k);
    nbucket = 0;
    for (int c = 0; c < nclass; ++c) {
      for (int j = 0; j < k; ++j) {
        const double v = classes[c].a[j];
        cell[j] = v > 0 ? static_cast<std::int32_t>(std::floor(std::log(v) / step)) : INT_MIN;
      }
      auto [it, fresh] = index.emplace(bytes_key(classes[c].scale, cell), nbucket);
      if (fresh) ++nbucket;
      bucket_of[c] = it->second;
    }
    if (nbucket <= nclass / 2) break;
  }
  if (nbucket > nclass / 2) return {};

  std::vector<job_class> buckets(nbucket);
  for (auto& b : buckets) b.a.assign(k, 0.0);
  for (int c = 0; c < nclass; ++c) {
    auto& b = buckets[bucket_of[c]];
    b.scale = classes[c].scale;
    b.count += classes[c].count;
    for (int j = 0; j < k; ++j) b.a[j] += classes[c].count * classes[c].a[j];
  }
  for (auto& b : buckets)
    for (double& v : b.a) v /= b.count;

  const built_model coarse = build_model(buckets, capacity, maxmin);
  lp_solver sub;
  if (!sub.load(coarse.model)) return {};
  const int cc = coarse.model.num_columns(), cr = coarse.model.num_rows();
  const crash_bases cb =
      crash_basis(buckets, coarse, cc, cr, capacity, maxmin, min_classes, efficiency, slack);
  if (!cb.first.empty() && !sub.set_basis(cb.first)) return {};
  auto r = sub.solve();
  if (!r || !r->optimal()) return {};
  crash_bases out;
  out.first = map_basis(sub.basis(), r->x, coarse, to, bucket_of, to_columns, to_rows);
  if (maxmin && efficiency &&
      set_efficiency_stage(sub, coarse, buckets, r->x[coarse.t_col], slack) &&
      (cb.second.empty() || sub.set_basis(cb.second))) {
    lp_settings second;  // as in allocation_lp::solve: dual from a carried basis
    second.algorithm = cb.second.empty() ? lp_algorithm::primal : lp_algorithm::dual;
    auto r2 = sub.solve(second);
    if (r2 && r2->optimal())
      out.second = map_basis(sub.basis(), r2->x, coarse, to, bucket_of, to_columns, to_rows);
  }
  return out;
}

}  // namespace tessera::detail
