#pragma once
/// @file lp.hpp
/// A thin adapter over COIN-OR CLP for linear programs.
///
/// Build a model with `lp_model` (columns with bounds and objective, rows with bounds, sparse
/// coefficients), then solve it with `solve_lp` (one shot) or an `lp_solver`, which keeps the
/// CLP model alive so that a caller can edit bounds, objective or coefficients in place, or
/// hand in a starting basis, and re-solve from the previous basis (warm start).
///
/// The *outcome* of a solve (optimal, infeasible, unbounded, stopped on a limit) is a value in
/// `lp_solution`; a *failure* (CLP gave up on numerical trouble, threw, or was handed bad
/// indices) is a `tessera::error`. CLP's own log is silenced. CLP exceptions (`CoinError`)
/// never leave this adapter.

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera {

/// Infinite bound: use as a column or row bound for "none".
inline constexpr double lp_inf = std::numeric_limits<double>::infinity();

/// Direction of the objective.
enum class lp_sense { minimize, maximize };

/// The simplex variant to run.
enum class lp_algorithm {
  dual,     ///< dual simplex (default; the right choice after bound or right-hand-side edits)
  primal,   ///< primal simplex (the right choice after objective edits)
  barrier,  ///< CLP's interior-point method followed by crossover to a basis (cold solves)
};

/// How CLP scales the matrix before solving.
enum class lp_scaling {
  none,         ///< no scaling
  equilibrium,  ///< default: rows and columns by their largest entry
  geometric,    ///< geometric means (CLP's own default is "automatic", which may pick this)
  automatic,    ///< CLP decides
};

/// How a solve ended, when it did not fail.
enum class lp_outcome {
  optimal,          ///< an optimal solution was found
  infeasible,       ///< the constraints have no solution (primal infeasible)
  unbounded,        ///< the objective is unbounded (dual infeasible)
  time_limit,       ///< stopped on the time limit; the values are the last iterate
  iteration_limit,  ///< stopped on the iteration limit; the values are the last iterate
};

/// Name of an outcome, e.g. "optimal".
const char* to_string(lp_outcome o);

/// Status of one variable (column) or one row's slack in a simplex basis. The values match
/// CLP's `ClpSimplex::Status`.
enum class lp_var_status : std::uint8_t {
  free = 0,        ///< nonbasic free variable
  basic = 1,       ///< in the basis
  at_upper = 2,    ///< nonbasic at its upper bound
  at_lower = 3,    ///< nonbasic at its lower bound
  superbasic = 4,  ///< nonbasic between its bounds
  fixed = 5,       ///< nonbasic with equal bounds
};

/// A simplex basis: one status per column and one per row. A valid basis has exactly as many
/// `basic` entries as there are rows; CLP repairs an invalid or singular one by itself.
struct lp_basis {
  std::vector<lp_var_status> columns;  ///< status of each column
  std::vector<lp_var_status> rows;     ///< status of each row's slack (its activity)
  /// True when no basis is held.
  bool empty() const { return columns.empty() && rows.empty(); }
};

/// A linear program under construction: min or max c.x subject to row_lower <= A x <=
/// row_upper and col_lower <= x <= col_upper. Infinite bounds are `lp_inf` / `-lp_inf`.
class lp_model {
 public:
  /// Adds a column (variable) and returns its index.
  int add_column(double lower, double upper, double objective = 0);
  /// Adds a row (constraint) and returns its index.
  int add_row(double lower, double upper);
  /// Adds a row with its coefficients given as (column, value) pairs; returns its index.
  int add_row(double lower, double upper, const std::vector<std::pair<int, double>>& entries);
  /// Adds coefficient A[row][col] += value. Duplicates are summed when the model is loaded.
  void add_coefficient(int row, int col, double value);

  /// Sets the objective direction (default: minimise).
  void set_sense(lp_sense s) { sense_ = s; }
  /// The objective direction.
  lp_sense sense() const { return sense_; }
  /// Sets the bounds of a column.
  void set_column_bounds(int col, double lower, double upper);
  /// Sets the objective coefficient of a column.
  void set_objective(int col, double value);
  /// Sets the bounds of a row.
  void set_row_bounds(int row, double lower, double upper);
  /// Reserves space for columns, rows and nonzeros.
  void reserve(int columns, int rows, std::size_t nonzeros);

  /// Number of columns.
  int num_columns() const { return static_cast<int>(col_lower_.size()); }
  /// Number of rows.
  int num_rows() const { return static_cast<int>(row_lower_.size()); }
  /// Number of coefficients added (before duplicates are summed).
  std::size_t num_coefficients() const { return entry_value_.size(); }

  /// Column lower bounds.
  const std::vector<double>& column_lower() const { return col_lower_; }
  /// Column upper bounds.
  const std::vector<double>& column_upper() const { return col_upper_; }
  /// Objective coefficients.
  const std::vector<double>& objective() const { return objective_; }
  /// Row lower bounds.
  const std::vector<double>& row_lower() const { return row_lower_; }
  /// Row upper bounds.
  const std::vector<double>& row_upper() const { return row_upper_; }
  /// Coefficient triplets in the order they were added.
  const std::vector<int>& entry_rows() const { return entry_row_; }
  /// Column of each coefficient triplet.
  const std::vector<int>& entry_columns() const { return entry_col_; }
  /// Value of each coefficient triplet.
  const std::vector<double>& entry_values() const { return entry_value_; }

 private:
  lp_sense sense_ = lp_sense::minimize;
  std::vector<double> col_lower_, col_upper_, objective_;
  std::vector<double> row_lower_, row_upper_;
  std::vector<int> entry_row_, entry_col_;
  std::vector<double> entry_value_;
};

/// How to solve.
struct lp_settings {
  lp_algorithm algorithm = lp_algorithm::dual;  ///< simplex variant
  double time_limit_s = 0;                      ///< wall-clock limit in seconds; <= 0: none
  int iteration_limit = 0;                      ///< simplex iterations; <= 0: none
  bool presolve = false;  ///< run CLP's presolve first (only for cold solves; never warm)
  /// Matrix scaling. Equilibrium by default: the Debian build of CLP 1.17.6 (assertions on)
  /// aborted the process in ClpPackedMatrix::gutsOfTransposeTimesByRowGE3 ("elValue") under
  /// geometric and automatic scaling on a 10,000-job max-min LP, and an abort cannot be
  /// caught; equilibrium scaling solved the same LP.
  lp_scaling scaling = lp_scaling::equilibrium;
  /// Cold dual solves only: start from a basis in which every set-packing row (at most b,
  /// every coefficient 1, columns not in an earlier such row) is held at its bound by its
  /// best-objective column, instead of the all-slack basis. On assignment-like models (a
  /// choice per job under a few capacity rows) the dual simplex then pivots on the capacity
  /// rows only: Hops' ILP relaxations at 10,000 GPUs took 742 iterations instead of 8,100,
  /// 4.6x less time (docs/benchmarks/simulator-scale.md). The optimum is the same LP's.
  bool set_packing_start = false;
};

/// What a solve produced. Values are those of the last iterate unless `outcome` is optimal;
/// for infeasible or unbounded models they carry no meaning.
struct lp_solution {
  lp_outcome outcome = lp_outcome::optimal;  ///< how the solve ended
  double objective = 0;                      ///< c.x in the model's own sense
  std::vector<double> x;                     ///< column values
  std::vector<double> row_activity;          ///< A x
  /// Row duals: the rate of change of the objective (in the model's sense) per unit increase
  /// of a binding row bound.
  std::vector<double> row_duals;
  std::vector<double> reduced_costs;  ///< column reduced costs, in the model's sense
  int iterations = 0;                 ///< simplex iterations
  double seconds = 0;                 ///< wall time of the solve
  bool warm = false;                  ///< true when the solve started from a given basis

  /// True when the solve found an optimum.
  bool optimal() const { return outcome == lp_outcome::optimal; }
};

/// A CLP model kept alive between solves. Not copyable; movable.
///
/// Warm start: after a solve, the final basis stays in the solver. `solve()` without edits
/// returns at once; after `set_*` edits it restarts from that basis. `load()` replaces the
/// model; with `keep_basis` and unchanged dimensions the old basis becomes the starting basis,
/// and `set_basis()` hands in any other starting basis (e.g. one mapped from an older model).
class lp_solver {
 public:
  /// An empty solver with CLP's log silenced.
  lp_solver();
  /// Frees the CLP model.
  ~lp_solver();
  /// Moves the CLP model and its basis.
  lp_solver(lp_solver&&) noexcept;
  /// Moves the CLP model and its basis.
  lp_solver& operator=(lp_solver&&) noexcept;
  lp_solver(const lp_solver&) = delete;
  lp_solver& operator=(const lp_solver&) = delete;

  /// Loads a model, replacing any previous one. With `keep_basis`, a previous basis of the
  /// same dimensions is kept as the starting basis; otherwise the solve starts from the
  /// all-slack basis.
  status load(const lp_model& m, bool keep_basis = false);
  /// Solves the loaded model from the current basis.
  result<lp_solution> solve(const lp_settings& s = {});
  /// Loads `m` (keeping a same-sized basis when `keep_basis`) and solves it.
  result<lp_solution> solve(const lp_model& m, const lp_settings& s = {}, bool keep_basis = false);

  /// Changes a column's bounds in the loaded model.
  status set_column_bounds(int col, double lower, double upper);
  /// Changes a row's bounds in the loaded model.
  status set_row_bounds(int row, double lower, double upper);
  /// Changes a column's objective coefficient in the loaded model.
  status set_objective(int col, double value);
  /// Changes the objective direction of the loaded model.
  status set_sense(lp_sense s);
  /// Changes (or creates) coefficient A[row][col] of the loaded model.
  status set_coefficient(int row, int col, double value);

  /// The basis after the last solve (or the one handed in), empty when none.
  lp_basis basis() const;
  /// Sets the starting basis for the next solve; its sizes must match the loaded model.
  status set_basis(const lp_basis& b);
  /// Forgets the basis: the next solve starts from the all-slack basis.
  void clear_basis();

  /// True once a model is loaded.
  bool loaded() const;
  /// Columns of the loaded model.
  int num_columns() const;
  /// Rows of the loaded model.
  int num_rows() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Solves `m` once with a fresh CLP model.
result<lp_solution> solve_lp(const lp_model& m, const lp_settings& s = {});

}  // namespace tessera
