// allocation_lp (allocation_lp.hpp): checking the input, the two stages of a solve over the
// class LP (allocation_lp_model.hpp) with the bases carried between calls, and the answer per
// job; and the snapshot helpers the allocation policies share.
#include "policies/allocation_lp.hpp"

#include "policies/allocation_lp_model.hpp"
#include "runtime/core/job_index.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace tessera {

namespace {

using detail::build_classes;
using detail::build_model;
using detail::built_model;
using detail::crash_bases;
using detail::crash_basis;
using detail::job_class;
using detail::map_basis;
using detail::normalise_rows;
using detail::set_efficiency_stage;

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
      return error{error_kind::invalid_input, "allocation lp: job " + std::to_string(in.ids[m]) +
                                                  " has " + std::to_string(in.rows[m].size()) +
                                                  " coefficients for " + std::to_string(k) +
                                                  " GPU types"};
    if (in.scale[m] < 1)
      return error{error_kind::invalid_input,
                   "allocation lp: job " + std::to_string(in.ids[m]) + ": scale factor < 1"};
    for (double v : in.rows[m])
      if (!std::isfinite(v) || v < 0)
        return error{error_kind::invalid_input, "allocation lp: job " + std::to_string(in.ids[m]) +
                                                    ": coefficient is negative or not finite"};
  }
  return {};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// An optimal basis kept for a later call, with what is needed to map it onto a new model.
struct carried_basis {
  allocation_objective obj = allocation_objective::max_min;
  int types = -1;
  built_model layout;  ///< layout of its model (the model is dropped)
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

/// One call's class LP, loaded into the solver: the input, its classes and the model's
/// layout.
struct class_lp {
  const allocation_lp_input& in;
  allocation_objective obj;
  int k = 0;                  ///< GPU types
  std::vector<int> class_of;  ///< per job, -1 for none
  std::vector<job_class> classes;
  built_model bm;  ///< layout only once loaded
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
  out.x = rows_.take(in.rows.size(), static_cast<std::size_t>(lp.k));

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
    crash_bases cb =
        crash_basis(lp.classes, lp.bm, st.solver.num_columns(), st.solver.num_rows(), in.capacity,
                    maxmin, s.crash_min_classes, s.efficiency_stage, s.efficiency_slack);
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

std::vector<std::vector<double>> row_pool::take(std::size_t n, std::size_t k) {
  std::vector<std::vector<double>> out;
  out.reserve(n);
  while (out.size() < n && !spare_.empty()) {
    out.push_back(std::move(spare_.back()));
    spare_.pop_back();
    out.back().assign(k, 0.0);
  }
  while (out.size() < n) out.emplace_back(k, 0.0);
  return out;
}

void row_pool::give(std::vector<std::vector<double>>&& rows) {
  for (auto& r : rows) spare_.push_back(std::move(r));
  rows.clear();
}

allocation_lp_input lp_input_for(const snapshot& s) {
  row_pool fresh;
  return lp_input_for(s, fresh);
}

allocation_lp_input lp_input_for(const snapshot& s, row_pool& pool) {
  allocation_lp_input in;
  const std::size_t k = s.cl ? s.cl->types.size() : 0;
  in.ids.reserve(s.jobs.size());
  in.scale.reserve(s.jobs.size());
  for (const auto& j : s.jobs) {
    in.ids.push_back(j.spec ? j.spec->id : 0);
    in.scale.push_back(j.spec ? j.spec->scale_factor : 1);
  }
  in.rows = pool.take(s.jobs.size(), k);
  in.capacity.resize(k);
  for (std::size_t j = 0; j < k; ++j) in.capacity[j] = s.cl->types[j].gpus;
  return in;
}

}  // namespace tessera
