#include "runtime/solver/lp.hpp"

#include <coin/ClpSimplex.hpp>
#include <coin/ClpSolve.hpp>
#include <coin/CoinError.hpp>
#include <coin/CoinFinite.hpp>
#include <coin/CoinPackedMatrix.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

namespace tessera {

static_assert(static_cast<int>(lp_var_status::free) == ClpSimplex::isFree);
static_assert(static_cast<int>(lp_var_status::basic) == ClpSimplex::basic);
static_assert(static_cast<int>(lp_var_status::at_upper) == ClpSimplex::atUpperBound);
static_assert(static_cast<int>(lp_var_status::at_lower) == ClpSimplex::atLowerBound);
static_assert(static_cast<int>(lp_var_status::superbasic) == ClpSimplex::superBasic);
static_assert(static_cast<int>(lp_var_status::fixed) == ClpSimplex::isFixed);

const char* to_string(lp_outcome o) {
  switch (o) {
    case lp_outcome::optimal:
      return "optimal";
    case lp_outcome::infeasible:
      return "infeasible";
    case lp_outcome::unbounded:
      return "unbounded";
    case lp_outcome::time_limit:
      return "time_limit";
    case lp_outcome::iteration_limit:
      return "iteration_limit";
  }
  return "unknown";
}

// ---- lp_model ---------------------------------------------------------------------------

int lp_model::add_column(double lower, double upper, double objective) {
  col_lower_.push_back(lower);
  col_upper_.push_back(upper);
  objective_.push_back(objective);
  return num_columns() - 1;
}

int lp_model::add_row(double lower, double upper) {
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
  return num_rows() - 1;
}

int lp_model::add_row(double lower, double upper,
                      const std::vector<std::pair<int, double>>& entries) {
  const int r = add_row(lower, upper);
  for (const auto& [c, v] : entries) add_coefficient(r, c, v);
  return r;
}

void lp_model::add_coefficient(int row, int col, double value) {
  entry_row_.push_back(row);
  entry_col_.push_back(col);
  entry_value_.push_back(value);
}

void lp_model::set_column_bounds(int col, double lower, double upper) {
  col_lower_.at(col) = lower;
  col_upper_.at(col) = upper;
}

void lp_model::set_objective(int col, double value) { objective_.at(col) = value; }

void lp_model::set_row_bounds(int row, double lower, double upper) {
  row_lower_.at(row) = lower;
  row_upper_.at(row) = upper;
}

void lp_model::reserve(int columns, int rows, std::size_t nonzeros) {
  col_lower_.reserve(columns);
  col_upper_.reserve(columns);
  objective_.reserve(columns);
  row_lower_.reserve(rows);
  row_upper_.reserve(rows);
  entry_row_.reserve(nonzeros);
  entry_col_.reserve(nonzeros);
  entry_value_.reserve(nonzeros);
}

// ---- helpers ----------------------------------------------------------------------------

namespace {

/// CLP's infinity is COIN_DBL_MAX; map IEEE infinities onto it.
double to_clp(double b) {
  if (b >= lp_inf) return COIN_DBL_MAX;
  if (b <= -lp_inf) return -COIN_DBL_MAX;
  return b;
}

std::vector<double> to_clp(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), [](double b) { return to_clp(b); });
  return out;
}

error clp_error(const std::string& what) { return error{error_kind::solver_failed, what}; }

error coin_error(const CoinError& e) {
  return clp_error("CLP: " + e.className() + "::" + e.methodName() + ": " + e.message());
}

bool finite_or_inf(double v) { return !std::isnan(v); }

/// Checks indices and values of a model before it reaches CLP.
status check_model(const lp_model& m) {
  const int nc = m.num_columns(), nr = m.num_rows();
  for (int c = 0; c < nc; ++c) {
    if (!finite_or_inf(m.column_lower()[c]) || !finite_or_inf(m.column_upper()[c]) ||
        !std::isfinite(m.objective()[c]))
      return error{error_kind::invalid_input,
                   "lp model: column " + std::to_string(c) + ": NaN bound or objective"};
  }
  for (int r = 0; r < nr; ++r)
    if (!finite_or_inf(m.row_lower()[r]) || !finite_or_inf(m.row_upper()[r]))
      return error{error_kind::invalid_input, "lp model: row " + std::to_string(r) + ": NaN bound"};
  for (std::size_t k = 0; k < m.num_coefficients(); ++k) {
    const int r = m.entry_rows()[k], c = m.entry_columns()[k];
    if (r < 0 || r >= nr || c < 0 || c >= nc)
      return error{error_kind::invalid_input, "lp model: coefficient (" + std::to_string(r) + ", " +
                                                  std::to_string(c) + ") is outside the model"};
    if (!std::isfinite(m.entry_values()[k]))
      return error{error_kind::invalid_input, "lp model: coefficient (" + std::to_string(r) + ", " +
                                                  std::to_string(c) + ") is not finite"};
  }
  return {};
}

/// The starting basis of lp_settings::set_packing_start: every row basic (its slack in the
/// basis) except set-packing rows (at most b, every coefficient 1, no column shared with an
/// earlier such row), each of which holds its best-objective column in the basis, at the
/// row's bound, when that column improves the objective. Nonbasic columns sit at a finite
/// bound. Each such row's dual is then its best column's objective and every other column
/// of the row prices out, so the dual simplex starts dual feasible over those rows and pivots
/// only on the coupling rows.
void set_packing_start(ClpSimplex& clp) {
  const int nr = clp.numberRows(), nc = clp.numberColumns();
  const double* obj = clp.objective();
  const double dir = clp.optimizationDirection();  // 1 minimise, -1 maximise
  const double *rl = clp.rowLower(), *ru = clp.rowUpper();
  const double *cl = clp.columnLower(), *cu = clp.columnUpper();
  for (int r = 0; r < nr; ++r) clp.setRowStatus(r, ClpSimplex::basic);
  for (int c = 0; c < nc; ++c)
    clp.setColumnStatus(c, cl[c] > -COIN_DBL_MAX  ? ClpSimplex::atLowerBound
                           : cu[c] < COIN_DBL_MAX ? ClpSimplex::atUpperBound
                                                  : ClpSimplex::isFree);
  CoinPackedMatrix rows;
  rows.reverseOrderedCopyOf(*clp.matrix());
  std::vector<char> claimed(nc, 0);
  for (int r = 0; r < nr; ++r) {
    if (rl[r] > -COIN_DBL_MAX || !(ru[r] < COIN_DBL_MAX) || ru[r] < 0) continue;
    const CoinShallowPackedVector v = rows.getVector(r);
    const int n = v.getNumElements();
    bool packing = n > 0;
    for (int k = 0; k < n && packing; ++k)
      packing =
          v.getElements()[k] == 1.0 && !claimed[v.getIndices()[k]] && cl[v.getIndices()[k]] == 0;
    if (!packing) continue;
    int best = -1;
    for (int k = 0; k < n; ++k) {
      const int c = v.getIndices()[k];
      claimed[c] = 1;
      if (dir * obj[c] < 0 && (best < 0 || dir * obj[c] < dir * obj[best])) best = c;
    }
    if (best < 0) continue;
    clp.setColumnStatus(best, ClpSimplex::basic);
    clp.setRowStatus(r, ClpSimplex::atUpperBound);
  }
}

}  // namespace

// ---- lp_solver --------------------------------------------------------------------------

struct lp_solver::impl {
  ClpSimplex clp;
  bool loaded = false;
  bool have_basis = false;  // status array holds a basis worth starting from
  bool dirty = true;        // edited since the last solve
  lp_sense sense = lp_sense::minimize;
  result<lp_solution> last = error{error_kind::internal, "not solved"};

  impl() : clp(false) { clp.setLogLevel(0); }
};

lp_solver::lp_solver() : impl_(std::make_unique<impl>()) {}
lp_solver::~lp_solver() = default;
lp_solver::lp_solver(lp_solver&&) noexcept = default;
lp_solver& lp_solver::operator=(lp_solver&&) noexcept = default;

bool lp_solver::loaded() const { return impl_->loaded; }
int lp_solver::num_columns() const { return impl_->loaded ? impl_->clp.numberColumns() : 0; }
int lp_solver::num_rows() const { return impl_->loaded ? impl_->clp.numberRows() : 0; }

status lp_solver::load(const lp_model& m, bool keep_basis) {
  if (auto st = check_model(m); !st) return st;
  auto& d = *impl_;
  try {
    const int nc = m.num_columns(), nr = m.num_rows();
    // Column-major arrays, duplicates summed.
    std::vector<CoinBigIndex> start(nc + 1, 0);
    for (int c : m.entry_columns()) ++start[c + 1];
    for (int c = 0; c < nc; ++c) start[c + 1] += start[c];
    std::vector<int> index(m.num_coefficients());
    std::vector<double> value(m.num_coefficients());
    {
      std::vector<CoinBigIndex> fill(start.begin(), start.end() - 1);
      for (std::size_t k = 0; k < m.num_coefficients(); ++k) {
        const auto p = fill[m.entry_columns()[k]]++;
        index[p] = m.entry_rows()[k];
        value[p] = m.entry_values()[k];
      }
    }
    // Sort each column by row and merge duplicates in place.
    std::vector<CoinBigIndex> packed_start(nc + 1, 0);
    CoinBigIndex out = 0;
    std::vector<std::pair<int, double>> col;
    for (int c = 0; c < nc; ++c) {
      col.clear();
      for (auto p = start[c]; p < start[c + 1]; ++p) col.emplace_back(index[p], value[p]);
      std::sort(col.begin(), col.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      packed_start[c] = out;
      for (std::size_t i = 0; i < col.size(); ++i) {
        if (out > packed_start[c] && index[out - 1] == col[i].first) {
          value[out - 1] += col[i].second;
        } else {
          index[out] = col[i].first;
          value[out] = col[i].second;
          ++out;
        }
      }
    }
    packed_start[nc] = out;

    unsigned char* saved = nullptr;
    const bool same_size =
        d.loaded && d.have_basis && d.clp.numberColumns() == nc && d.clp.numberRows() == nr;
    if (keep_basis && same_size) saved = d.clp.statusCopy();
    const auto cl = to_clp(m.column_lower()), cu = to_clp(m.column_upper());
    const auto rl = to_clp(m.row_lower()), ru = to_clp(m.row_upper());
    d.clp.loadProblem(nc, nr, packed_start.data(), index.data(), value.data(), cl.data(), cu.data(),
                      m.objective().data(), rl.data(), ru.data());
    d.clp.setOptimizationDirection(m.sense() == lp_sense::maximize ? -1.0 : 1.0);
    d.sense = m.sense();
    if (saved) {
      d.clp.copyinStatus(saved);
      delete[] saved;
      d.have_basis = true;
    } else {
      d.have_basis = false;
    }
    d.loaded = true;
    d.dirty = true;
  } catch (const CoinError& e) {
    d.loaded = false;
    return coin_error(e);
  } catch (const std::exception& e) {
    d.loaded = false;
    return clp_error(std::string("CLP: ") + e.what());
  }
  return {};
}

result<lp_solution> lp_solver::solve(const lp_model& m, const lp_settings& s, bool keep_basis) {
  if (auto st = load(m, keep_basis); !st) return st.err();
  return solve(s);
}

result<lp_solution> lp_solver::solve(const lp_settings& s) {
  auto& d = *impl_;
  if (!d.loaded) return error{error_kind::internal, "lp_solver::solve: no model loaded"};
  // Nothing changed since an optimal solve: the answer stands.
  if (!d.dirty && d.last.ok() && d.last->optimal()) return d.last;
  const auto t0 = std::chrono::steady_clock::now();
  auto& clp = d.clp;
  const int nc = clp.numberColumns(), nr = clp.numberRows();
  lp_solution sol;
  sol.warm = d.have_basis;
  try {
    if (nc == 0) {
      // Nothing to decide; CLP refuses empty models, so check the rows by hand.
      const double* rl = clp.rowLower();
      const double* ru = clp.rowUpper();
      bool feasible = true;
      for (int r = 0; r < nr; ++r) feasible = feasible && rl[r] <= 0 && ru[r] >= 0;
      sol.outcome = feasible ? lp_outcome::optimal : lp_outcome::infeasible;
      sol.row_activity.assign(nr, 0.0);
      sol.row_duals.assign(nr, 0.0);
    } else {
      clp.setMaximumSeconds(s.time_limit_s > 0 ? s.time_limit_s : -1.0);
      clp.setMaximumIterations(s.iteration_limit > 0 ? s.iteration_limit : 2147483647);
      switch (s.scaling) {
        case lp_scaling::none:
          clp.scaling(0);
          break;
        case lp_scaling::equilibrium:
          clp.scaling(1);
          break;
        case lp_scaling::geometric:
          clp.scaling(2);
          break;
        case lp_scaling::automatic:
          clp.scaling(3);
          break;
      }
      if (s.algorithm == lp_algorithm::barrier || (s.presolve && !d.have_basis)) {
        ClpSolve how;
        how.setPresolveType(s.presolve ? ClpSolve::presolveOn : ClpSolve::presolveOff);
        how.setSolveType(s.algorithm == lp_algorithm::barrier  ? ClpSolve::useBarrier
                         : s.algorithm == lp_algorithm::primal ? ClpSolve::usePrimal
                                                               : ClpSolve::useDual);
        clp.initialSolve(how);
      } else if (s.algorithm == lp_algorithm::primal) {
        clp.primal();
      } else {
        if (s.set_packing_start && !d.have_basis) set_packing_start(clp);
        clp.dual();
      }
      const int st = clp.problemStatus();
      switch (st) {
        case 0:
          sol.outcome = lp_outcome::optimal;
          break;
        case 1:
          sol.outcome = lp_outcome::infeasible;
          break;
        case 2:
          sol.outcome = lp_outcome::unbounded;
          break;
        case 3: {
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const bool on_time =
              clp.secondaryStatus() == 9 || (s.time_limit_s > 0 && elapsed >= s.time_limit_s);
          sol.outcome = on_time ? lp_outcome::time_limit : lp_outcome::iteration_limit;
          break;
        }
        default:
          d.have_basis = false;
          d.dirty = true;
          return clp_error("CLP stopped with status " + std::to_string(st) + " (secondary status " +
                           std::to_string(clp.secondaryStatus()) + ")");
      }
      sol.iterations = clp.numberIterations();
      const double* x = clp.primalColumnSolution();
      const double* act = clp.primalRowSolution();
      const double* dual = clp.dualRowSolution();
      const double* rc = clp.dualColumnSolution();
      sol.x.assign(x, x + nc);
      sol.row_activity.assign(act, act + nr);
      sol.row_duals.assign(dual, dual + nr);
      sol.reduced_costs.assign(rc, rc + nc);
      const double* c = clp.objective();
      double obj = 0;
      for (int k = 0; k < nc; ++k) obj += c[k] * x[k];
      sol.objective = obj;
      d.have_basis = clp.statusExists();
    }
  } catch (const CoinError& e) {
    d.have_basis = false;
    return coin_error(e);
  } catch (const std::exception& e) {
    d.have_basis = false;
    return clp_error(std::string("CLP: ") + e.what());
  }
  sol.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  d.dirty = false;
  d.last = sol;
  return sol;
}

status lp_solver::set_column_bounds(int col, double lower, double upper) {
  auto& d = *impl_;
  if (!d.loaded || col < 0 || col >= d.clp.numberColumns())
    return error{error_kind::invalid_input, "lp_solver: no column " + std::to_string(col)};
  d.clp.setColumnBounds(col, to_clp(lower), to_clp(upper));
  d.dirty = true;
  return {};
}

status lp_solver::set_row_bounds(int row, double lower, double upper) {
  auto& d = *impl_;
  if (!d.loaded || row < 0 || row >= d.clp.numberRows())
    return error{error_kind::invalid_input, "lp_solver: no row " + std::to_string(row)};
  d.clp.setRowBounds(row, to_clp(lower), to_clp(upper));
  d.dirty = true;
  return {};
}

status lp_solver::set_objective(int col, double value) {
  auto& d = *impl_;
  if (!d.loaded || col < 0 || col >= d.clp.numberColumns())
    return error{error_kind::invalid_input, "lp_solver: no column " + std::to_string(col)};
  d.clp.setObjectiveCoefficient(col, value);
  d.dirty = true;
  return {};
}

status lp_solver::set_sense(lp_sense s) {
  auto& d = *impl_;
  if (!d.loaded) return error{error_kind::internal, "lp_solver: no model loaded"};
  d.clp.setOptimizationDirection(s == lp_sense::maximize ? -1.0 : 1.0);
  d.sense = s;
  d.dirty = true;
  return {};
}

status lp_solver::set_coefficient(int row, int col, double value) {
  auto& d = *impl_;
  if (!d.loaded || row < 0 || row >= d.clp.numberRows() || col < 0 || col >= d.clp.numberColumns())
    return error{error_kind::invalid_input, "lp_solver: no coefficient (" + std::to_string(row) +
                                                ", " + std::to_string(col) + ")"};
  try {
    d.clp.modifyCoefficient(row, col, value, true);
  } catch (const CoinError& e) {
    return coin_error(e);
  }
  d.dirty = true;
  return {};
}

lp_basis lp_solver::basis() const {
  const auto& d = *impl_;
  lp_basis b;
  if (!d.loaded || !d.have_basis || !d.clp.statusExists()) return b;
  const int nc = d.clp.numberColumns(), nr = d.clp.numberRows();
  const unsigned char* st = d.clp.statusArray();
  b.columns.resize(nc);
  b.rows.resize(nr);
  for (int c = 0; c < nc; ++c) b.columns[c] = static_cast<lp_var_status>(st[c] & 7);
  for (int r = 0; r < nr; ++r) b.rows[r] = static_cast<lp_var_status>(st[nc + r] & 7);
  return b;
}

status lp_solver::set_basis(const lp_basis& b) {
  auto& d = *impl_;
  if (!d.loaded) return error{error_kind::internal, "lp_solver: no model loaded"};
  const int nc = d.clp.numberColumns(), nr = d.clp.numberRows();
  if (static_cast<int>(b.columns.size()) != nc || static_cast<int>(b.rows.size()) != nr)
    return error{error_kind::invalid_input, "lp_solver::set_basis: basis is " +
                                                std::to_string(b.columns.size()) + "x" +
                                                std::to_string(b.rows.size()) + ", model is " +
                                                std::to_string(nc) + "x" + std::to_string(nr)};
  std::vector<unsigned char> st(nc + nr);
  for (int c = 0; c < nc; ++c) st[c] = static_cast<unsigned char>(b.columns[c]);
  for (int r = 0; r < nr; ++r) st[nc + r] = static_cast<unsigned char>(b.rows[r]);
  try {
    d.clp.copyinStatus(st.data());
  } catch (const CoinError& e) {
    return coin_error(e);
  }
  d.have_basis = true;
  d.dirty = true;
  return {};
}

void lp_solver::clear_basis() {
  auto& d = *impl_;
  d.have_basis = false;
  d.dirty = true;
  if (d.loaded) d.clp.createStatus();
}

result<lp_solution> solve_lp(const lp_model& m, const lp_settings& s) {
  lp_solver solver;
  return solver.solve(m, s);
}

}  // namespace tessera
