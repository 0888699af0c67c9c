#include "policies/allocation_lp.hpp"

#include "runtime/core/job_index.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

namespace tessera {

namespace {

/// One class of identical jobs.
struct job_class {
  std::vector<double> a;  ///< coefficients over types (0 = no column)
  int scale = 1;
  int count = 0;
};

/// Where one class sits in a built model.
struct class_layout {
  std::vector<int> col;  ///< column per type, -1 when absent
  int sum_row = -1;      ///< sum_j y <= 1
  int min_row = -1;      ///< sum_j a y - t >= 0 (max_min only)
};

/// A class LP and where its pieces are.
struct built_model {
  lp_model model;
  std::vector<class_layout> layout;
  int t_col = -1;             ///< t (max_min only)
  std::vector<int> cap_row;   ///< capacity row per type
};

/// Hash key of a (scale, integer cell) vector.
template <class T>
std::string bytes_key(int scale, const std::vector<T>& v) {
  std::string k(sizeof(int) + v.size() * sizeof(T), '\0');
  std::memcpy(k.data(), &scale, sizeof(int));
  if (!v.empty()) std::memcpy(k.data() + sizeof(int), v.data(), v.size() * sizeof(T));
  return k;
}

status check_input(const allocation_lp_input& in) {
  const std::size_t n = in.rows.size(), k = in.capacity.size();
  if (in.ids.size() != n || in.scale.size() != n)
    return error{error_kind::invalid_input,
                 "allocation lp: ids, rows and scale factors differ in length"};
  for (double c : in.capacity)
    if (!std::isfinite(c) || c < 0)
      return error{error_kind::invalid_input, "allocation lp: bad capacity"};
  for (std::size_t m = 0; m < n; ++m) {
    if (in.rows[m].size() != k)
      return error{error_kind::invalid_input,
                   "allocation lp: job " + std::to_string(in.ids[m]) + " has " +
                       std::to_string(in.rows[m].size()) + " coefficients for " +
                       std::to_string(k) + " GPU types"};
    if (in.scale[m] < 1)
      return error{error_kind::invalid_input,
                   "allocation lp: job " + std::to_string(in.ids[m]) + ": scale factor < 1"};
    for (double v : in.rows[m])
      if (!std::isfinite(v) || v < 0)
        return error{error_kind::invalid_input,
                     "allocation lp: job " + std::to_string(in.ids[m]) +
                         ": coefficient is negative or not finite"};
  }
  return {};
}

/// Builds the class LP: per class its columns (one per usable type), its row-sum row and, for
/// max_min, its objective row; then the t column and one capacity row per type.
built_model build_model(const std::vector<job_class>& classes,
                        const std::vector<double>& capacity, bool maxmin) {
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

/// Maps basis `fb` of model `from` onto model `to`: class c of `to` takes the statuses of
/// class src[c] of `from` (src[c] < 0: columns at zero, rows basic); t and the capacity rows
/// keep theirs. When several classes share a source (a crash from buckets), the first takes
/// the source's statuses as they are and the others a regular version of them, with exactly
/// as many basic variables as the class has rows (dropping the basic columns of least value
/// `fx` first, or making row slacks basic), so that the count of basic variables stays right.
/// A final pass repairs the count anyway (CLP repairs a singular basis by itself, but wants
/// the count right).
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

/// Turns a solved max_min model into the efficiency stage: t >= t* (1 - slack), objective
/// sum_c count_c a_c . y_c.
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

/// Starting bases from a crash: for the first stage and, when asked, the efficiency stage.
struct crash_bases {
  lp_basis first;
  lp_basis second;
};

/// Starting bases for `to` (built from `classes`) from a coarser LP over buckets of classes
/// with nearly equal rows; empty when there are too few classes or they do not bucket well.
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// An optimal basis kept for a later call, with what is needed to map it onto a new model.
struct carried_basis {
  allocation_objective obj = allocation_objective::max_min;
  int types = -1;
  built_model layout;                        ///< layout of its model (the model is dropped)
  /// Class index in that model of each job by id: class_at[ids.find(id)], -1 for none.
  /// Rebuilt in place at every solve (a hash map of every job was a tenth of a
  /// simulation's time at 100,000 jobs, where the job set changes nearly every round).
  job_index ids;
  std::vector<int> class_at;
  lp_basis basis;
  std::vector<double> x;
  bool usable(allocation_objective o, int k) const {
    return !basis.empty() && obj == o && types == k;
  }
};

/// Matches each class of a new model to the class of `from` that held its first job found
/// there; -1 for none. Several new classes may share a source (a class that split); map_basis
/// then gives all but one of them a regularised copy. Returns whether any matched.
bool match_classes(const carried_basis& from, const allocation_lp_input& in,
                   const std::vector<int>& class_of, int nclass, std::vector<int>& src) {
  src.assign(nclass, -1);
  bool any = false;
  for (std::size_t m = 0; m < class_of.size(); ++m) {
    const int c = class_of[m];
    if (c < 0 || src[c] >= 0) continue;
    const std::size_t at = from.ids.find(in.ids[m]);
    if (at == job_index::npos || from.class_at[at] < 0) continue;
    src[c] = from.class_at[at];
    any = true;
  }
  return any;
}

/// Records an optimal basis of model `b` for later calls.
void carry(carried_basis& into, allocation_objective obj, int k, const built_model& b,
           const allocation_lp_input& in, const std::vector<int>& class_of, lp_basis basis,
           std::vector<double> x) {
  into.obj = obj;
  into.types = k;
  into.layout.layout = b.layout;
  into.layout.t_col = b.t_col;
  into.layout.cap_row = b.cap_row;
  // A repeated id keeps its last class that is not -1, as the map this replaced did.
  into.ids.assign(class_of.size(), [&in](std::size_t m) { return in.ids[m]; });
  into.class_at.assign(class_of.size(), -1);
  for (std::size_t m = 0; m < class_of.size(); ++m)
    if (class_of[m] >= 0) into.class_at[into.ids.find(in.ids[m])] = class_of[m];
  into.basis = std::move(basis);
  into.x = std::move(x);
}

/// The classes of one call's jobs: jobs with identical rows over usable types (a type with
/// fewer GPUs than the job's scale is not usable) and equal scale share one when
/// `aggregate`; `class_of` gives each job's class, -1 for a job with no usable coefficient.
std::vector<job_class> build_classes(const allocation_lp_input& in, bool aggregate,
                                     std::vector<int>& class_of) {
  const int n = static_cast<int>(in.rows.size());
  const int k = static_cast<int>(in.capacity.size());
  std::vector<job_class> classes;
  class_of.assign(n, -1);
  std::unordered_map<std::string, int> index;
  if (aggregate) index.reserve(static_cast<std::size_t>(n) * 2);
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
      auto [it, fresh] = index.emplace(bytes_key(in.scale[m], a), c);
      if (fresh) classes.push_back(job_class{a, in.scale[m], 0});
      c = it->second;
    } else {
      classes.push_back(job_class{a, in.scale[m], 0});
    }
    ++classes[c].count;
    class_of[m] = c;
  }
  return classes;
}

/// max_min is invariant to scaling every row by one constant; scales so that the tightest
/// class's best coefficient is 1, which keeps t* of order 1 for CLP's tolerances. Returns the
/// factor divided out.
double normalise_rows(std::vector<job_class>& classes) {
  double norm = lp_inf;
  for (const auto& c : classes) norm = std::min(norm, *std::max_element(c.a.begin(), c.a.end()));
  for (auto& c : classes)
    for (double& v : c.a) v /= norm;
  return norm;
}

/// One call's class LP, loaded into the solver: the input, its classes and the model's
/// layout.
struct class_lp {
  const allocation_lp_input& in;
  allocation_objective obj;
  int k = 0;                       ///< GPU types
  std::vector<int> class_of;       ///< per job, -1 for none
  std::vector<job_class> classes;
  built_model bm;                  ///< layout only once loaded
};

/// Sets the solver's starting basis from `from` (an earlier call's optimum) when warm starts
/// are on and its classes match some of this call's; false when it did not.
result<bool> start_from(lp_solver& solver, const carried_basis& from, const class_lp& lp,
                        bool warm_start) {
  std::vector<int> src;
  if (!warm_start || !from.usable(lp.obj, lp.k) ||
      !match_classes(from, lp.in, lp.class_of, static_cast<int>(lp.classes.size()), src))
    return false;
  lp_basis b = map_basis(from.basis, from.x, from.layout, lp.bm, src, solver.num_columns(),
                         solver.num_rows());
  if (auto bs = solver.set_basis(b); !bs) return bs.err();
  return true;
}

/// Solves from the solver's current basis; an error when CLP fails or stops short of the
/// optimum.
result<lp_solution> solve_to_optimum(lp_solver& solver, const lp_settings& ls) {
  auto r = solver.solve(ls);
  if (!r) return r.err();
  if (!r->optimal())
    return error{error_kind::solver_failed,
                 std::string("allocation lp: solve ended ") + to_string(r->outcome)};
  return r;
}

/// The efficiency stage on the loaded model after the first stage's optimum t*: keeps every
/// class at t* (1 - slack) and maximises the sum. It starts from the last second-stage
/// optimum when there is one, else from the crash's basis (dual simplex: the objective barely
/// moved, but jobs arrived or t* moved), else from the first stage's optimum (primal: still
/// feasible). On an optimum, `y` takes it and `second` its basis; a stage that stops short
/// leaves `y` as it is. An error when CLP fails.
status run_efficiency_stage(lp_solver& solver, carried_basis& second, const class_lp& lp,
                            double t_star, const lp_basis& crash_second,
                            const allocation_lp_settings& s, const lp_settings& ls,
                            std::vector<double>& y, int& iterations) {
  if (!set_efficiency_stage(solver, lp.bm, lp.classes, t_star, s.efficiency_slack)) return {};
  bool carried = false;
  auto warm = start_from(solver, second, lp, s.warm_start);
  if (!warm) return {};  // the carried basis did not fit: skip the stage
  if (warm.value()) {
    carried = true;
  } else if (!crash_second.empty()) {
    if (!solver.set_basis(crash_second)) return {};
    carried = true;
  }
  lp_settings ls2 = ls;
  ls2.algorithm = carried ? lp_algorithm::dual : lp_algorithm::primal;
  auto r2 = solver.solve(ls2);
  if (!r2) return r2.err();
  iterations += r2->iterations;
  if (r2->optimal()) {
    y = r2->x;
    carry(second, lp.obj, lp.k, lp.bm, lp.in, lp.class_of, solver.basis(), r2->x);
  }
  return {};
}

/// Copies each class's solution `y` to its jobs (clamped to [0, 1], tiny values dropped, a
/// row over 1 scaled to 1), then shrinks any type whose capacity CLP's tolerance overshot
/// (a few 1e-6 GPUs was seen): the mechanism needs the capacity exactly.
void jobs_from_classes(const class_lp& lp, const std::vector<double>& y,
                       std::vector<std::vector<double>>& x) {
  const int n = static_cast<int>(lp.in.rows.size());
  for (int m = 0; m < n; ++m) {
    const int c = lp.class_of[m];
    if (c < 0) continue;
    double sum = 0;
    for (int j = 0; j < lp.k; ++j) {
      const int col = lp.bm.layout[c].col[j];
      const double v = col >= 0 ? std::clamp(y[col], 0.0, 1.0) : 0.0;
      x[m][j] = v < 1e-12 ? 0.0 : v;
      sum += x[m][j];
    }
    if (sum > 1.0)
      for (double& v : x[m]) v /= sum;
  }
  for (int j = 0; j < lp.k; ++j) {
    double used = 0;
    for (int m = 0; m < n; ++m) used += lp.in.scale[m] * x[m][j];
    if (used > lp.in.capacity[j] && used > 0) {
      const double f = lp.in.capacity[j] / used;
      for (int m = 0; m < n; ++m) x[m][j] *= f;
    }
  }
}

}  // namespace

struct allocation_lp::state {
  lp_solver solver;
  carried_basis first;   ///< first-stage optimum of the last call
  carried_basis second;  ///< efficiency-stage optimum of the last call that ran one
};

allocation_lp::allocation_lp() : state_(std::make_unique<state>()) {}
allocation_lp::~allocation_lp() = default;
allocation_lp::allocation_lp(allocation_lp&&) noexcept = default;
allocation_lp& allocation_lp::operator=(allocation_lp&&) noexcept = default;

void allocation_lp::reset() {
  state_->first = carried_basis{};
  state_->second = carried_basis{};
}

result<allocation_lp_result> allocation_lp::solve(const allocation_lp_input& in,
                                                  allocation_objective obj,
                                                  const allocation_lp_settings& s) {
  const auto t0 = std::chrono::steady_clock::now();
  if (auto st = check_input(in); !st) return st.err();
  auto& st = *state_;
  const bool maxmin = obj == allocation_objective::max_min;
  class_lp lp{in, obj, static_cast<int>(in.capacity.size()), {}, {}, {}};
  allocation_lp_result out;
  out.x.assign(in.rows.size(), std::vector<double>(lp.k, 0.0));

  lp.classes = build_classes(in, s.aggregate, lp.class_of);
  out.classes = static_cast<int>(lp.classes.size());
  if (lp.classes.empty()) {
    out.seconds = seconds_since(t0);
    return out;
  }
  const double norm = maxmin ? normalise_rows(lp.classes) : 1.0;

  // The model and its starting basis: the last call's optimum, else a crash.
  lp.bm = build_model(lp.classes, in.capacity, maxmin);
  if (auto ls = st.solver.load(lp.bm.model, false); !ls) return ls.err();
  lp.bm.model = lp_model{};  // loaded into CLP; only the layout is needed from here on
  auto warm = start_from(st.solver, st.first, lp, s.warm_start);
  if (!warm) return warm.err();
  out.warm = warm.value();
  lp_basis crash_second;  // crash basis for the efficiency stage
  if (!out.warm && s.crash) {
    crash_bases cb = crash_basis(lp.classes, lp.bm, st.solver.num_columns(),
                                 st.solver.num_rows(), in.capacity, maxmin,
                                 s.crash_min_classes, s.efficiency_stage, s.efficiency_slack);
    if (!cb.first.empty()) {
      if (auto bs = st.solver.set_basis(cb.first); !bs) return bs.err();
      out.crashed = true;
      crash_second = std::move(cb.second);
    }
  }

  // Stage 1.
  lp_settings ls;
  ls.algorithm = lp_algorithm::dual;
  ls.time_limit_s = s.time_limit_s;
  auto r1 = solve_to_optimum(st.solver, ls);
  if (!r1) {
    reset();
    return r1.err();
  }
  out.iterations += r1->iterations;
  std::vector<double> y = r1->x;
  const double t_star = maxmin ? r1->x[lp.bm.t_col] : 0.0;
  out.value = maxmin ? t_star * norm : r1->objective;
  carry(st.first, obj, lp.k, lp.bm, in, lp.class_of, st.solver.basis(), r1->x);

  // Stage 2: efficiency.
  if (maxmin && s.efficiency_stage) {
    if (auto e = run_efficiency_stage(st.solver, st.second, lp, t_star, crash_second, s, ls, y,
                                      out.iterations);
        !e) {
      reset();
      return e.err();
    }
  }

  jobs_from_classes(lp, y, out.x);
  out.seconds = seconds_since(t0);
  return out;
}

status check_snapshot(const snapshot& s) {
  if (!s.cl) return error{error_kind::internal, "snapshot has no cluster"};
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const auto* spec = s.jobs[m].spec;
    if (!spec)
      return error{error_kind::internal, "snapshot job " + std::to_string(m) + " has no spec"};
    if (spec->scale_factor < 1)
      return error{error_kind::invalid_input,
                   "job " + std::to_string(spec->id) + ": scale factor must be >= 1"};
  }
  return {};
}

allocation_lp_input lp_input_for(const snapshot& s) {
  allocation_lp_input in;
  const std::size_t k = s.cl ? s.cl->types.size() : 0;
  in.ids.reserve(s.jobs.size());
  in.scale.reserve(s.jobs.size());
  for (const auto& j : s.jobs) {
    in.ids.push_back(j.spec ? j.spec->id : 0);
    in.scale.push_back(j.spec ? j.spec->scale_factor : 1);
  }
  in.rows.assign(s.jobs.size(), std::vector<double>(k, 0.0));
  in.capacity.resize(k);
  for (std::size_t j = 0; j < k; ++j) in.capacity[j] = s.cl->types[j].gpus;
  return in;
}

}  // namespace tessera
