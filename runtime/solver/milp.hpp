#pragma once
/// @file milp.hpp
/// A thin adapter over COIN-OR CBC for mixed-integer linear programs.
///
/// Build a `milp_model` (an `lp_model` plus an integrality flag per column) and solve it with
/// `solve_milp`. CBC runs with its standard cuts and heuristics (as its command-line solver
/// does), single-threaded, with its log silenced.
///
/// The *outcome* of a solve (optimal, infeasible, unbounded, stopped on the time limit with or
/// without an incumbent, stopped on another limit with an unproven solution) is a value in
/// `milp_solution`; a *failure* (CBC abandoned the search on numerical trouble, threw, or was
/// handed bad indices or NaN) is a `tessera::error`. CBC and CLP exceptions (`CoinError`)
/// never leave this adapter.
///
/// Determinism: for a given model and settings CBC is deterministic unless the time limit
/// stops it, since where it stops then depends on the machine's speed.
///
/// Threads: solves from several threads are serialised (CBC's command-line driver keeps its
/// argument reader in process-wide statics); `milp_solution::seconds` includes the wait.

#include <cstddef>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/solver/lp.hpp"

namespace tessera {

/// How a MILP solve ended, when it did not fail.
enum class milp_outcome {
  optimal,     ///< proven optimal (to within the settings' gap)
  feasible,    ///< a solution, optimality not proven: stopped on a node or solution limit
  time_limit,  ///< stopped on the time limit; `has_solution` says whether there is an incumbent
  node_limit,  ///< stopped on a node or iteration limit before any solution was found
  infeasible,  ///< no integer solution exists
  unbounded,   ///< the LP relaxation is unbounded
};

/// Name of an outcome, e.g. "time_limit".
const char* to_string(milp_outcome o);

/// A mixed-integer linear program under construction: an `lp_model` whose columns may be
/// marked integer. Rows and coefficients are added as for an `lp_model`.
class milp_model {
 public:
  /// Adds a column; `integer` marks it integral. Returns its index.
  int add_column(double lower, double upper, double objective = 0, bool integer = false);
  /// Adds a binary (0/1 integer) column. Returns its index.
  int add_binary(double objective = 0) { return add_column(0, 1, objective, true); }
  /// Adds a row with bounds and returns its index.
  int add_row(double lower, double upper) { return lp_.add_row(lower, upper); }
  /// Adds a row with its (column, value) coefficients and returns its index.
  int add_row(double lower, double upper, const std::vector<std::pair<int, double>>& entries) {
    return lp_.add_row(lower, upper, entries);
  }
  /// Adds coefficient A[row][col] += value.
  void add_coefficient(int row, int col, double value) { lp_.add_coefficient(row, col, value); }
  /// Sets the objective direction (default: minimise).
  void set_sense(lp_sense s) { lp_.set_sense(s); }

  /// Number of columns.
  int num_columns() const { return lp_.num_columns(); }
  /// Number of rows.
  int num_rows() const { return lp_.num_rows(); }
  /// Number of integer columns.
  int num_integers() const;
  /// True when column `col` is integral.
  bool is_integer(int col) const { return integer_.at(col) != 0; }
  /// Marks integer column `col` flexible: the relaxation-first path's rounding neighbourhood
  /// (milp_settings::relaxation_first) leaves it its own bounds instead of fixing or
  /// rounding it. For a few columns that the rounding of many others must be able to adjust
  /// (e.g. how many servers are filled with each pattern).
  void set_flexible(int col) {
    if (flexible_.size() <= static_cast<std::size_t>(col)) flexible_.resize(col + 1, 0);
    flexible_[col] = 1;
  }
  /// True when column `col` was marked flexible.
  bool is_flexible(int col) const {
    return static_cast<std::size_t>(col) < flexible_.size() && flexible_[col] != 0;
  }
  /// The model without integrality (bounds, objective, rows, coefficients, sense).
  const lp_model& relaxation() const { return lp_; }

 private:
  lp_model lp_;
  std::vector<char> integer_;
  std::vector<char> flexible_;
};

/// How to solve.
struct milp_settings {
  double time_limit_s = 10;    ///< wall-clock limit in seconds; <= 0: none
  double relative_gap = 1e-6;  ///< stop once (bound - incumbent) / |incumbent| is this small
  double absolute_gap = 1e-9;  ///< stop once |bound - incumbent| is this small
  int node_limit = 0;          ///< branch-and-bound nodes; <= 0: none
  /// Matrix scaling inside CBC's LP solves. Off by default: the Debian build of CBC 2.10.8 /
  /// CLP 1.17.6 (assertions on) aborted the process in ClpNonLinearCost::checkInfeasibilities
  /// ("lowerValue <= upperValue") on a 300-column Hops ILP after probing had tightened bounds
  /// of the scaled model, and an abort cannot be caught; the same model solved unscaled, or
  /// without probing. Tessera's MILPs have small integer coefficients, so they need no scaling.
  lp_scaling scaling = lp_scaling::none;
  /// CBC's probing cut generator (the other half of the abort above). Off by default.
  bool probing = false;
  /// CBC's feasibility pump heuristic. Off by default: on a 415-column Hops ILP the same CBC
  /// build aborted the process in OsiClpSolverInterface::crunch() inside the pump's small
  /// branch-and-bound (CbcHeuristicFPump -> smallBranchAndBound -> CglPreProcess; the
  /// assertion of coin-or/Clp issue 288); without the pump CBC solves it to optimality
  /// (tests/policies/test_hops_cbc_abort.cpp). The pump only looks for a first incumbent;
  /// tessera's ILPs have an all-zero feasible solution and CBC's other heuristics.
  bool feasibility_pump = false;
  /// CBC's preprocessing (CglPreProcess) of the model before branch and bound. On by default.
  /// Its presolve's implied-free pass costs about (columns x row length) a solve, so on
  /// models with long capacity rows (Hops' ILP over thousands of window jobs) it takes most
  /// of the solve; off, CBC may return another of several optimal solutions.
  bool preprocess = true;
  /// Solve the LP relaxation first (CLP's dual simplex) and answer from it when it is enough:
  /// when its optimum is integral, that is the MILP's optimum; otherwise its rounding
  /// neighbourhood (integer columns with integral values fixed, fractional ones between
  /// their floor and ceiling, flexible columns free) is solved as a small MILP, and a
  /// solution within the gaps of the relaxation's bound (a bound on the MILP's optimum) is
  /// returned as optimal. Otherwise, or when the relaxation is not optimal, CBC solves the
  /// whole model. On models whose relaxation is tight this skips CBC's preprocessing, cuts
  /// and heuristics (Hops' ILP: docs/benchmarks/simulator-scale.md); the answer meets the
  /// same gaps, but may be another solution than CBC's. The time limit applies to each of
  /// the three solves (relaxation, neighbourhood, whole model) on its own.
  bool relaxation_first = false;
};

/// What a solve produced.
struct milp_solution {
  milp_outcome outcome = milp_outcome::optimal;  ///< how the solve ended
  bool has_solution = false;                     ///< an integer-feasible solution is held in `x`
  double objective = 0;   ///< objective of `x` in the model's own sense (if has_solution)
  double best_bound = 0;  ///< bound on the optimum in the model's sense (if known)
  std::vector<double> x;  ///< column values; integer columns rounded (if has_solution)
  int nodes = 0;          ///< branch-and-bound nodes explored
  double seconds = 0;     ///< wall time of the solve
  /// Answered by the relaxation-first path (milp_settings::relaxation_first): the
  /// relaxation was integral or its rounding neighbourhood held a solution within the gaps.
  bool from_relaxation = false;

  /// True when the solve proved optimality.
  bool optimal() const { return outcome == milp_outcome::optimal; }
};

/// Solves `m` with a fresh CBC model. An empty model (no columns) is optimal at once.
result<milp_solution> solve_milp(const milp_model& m, const milp_settings& s = {});

}  // namespace tessera
