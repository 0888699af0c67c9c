#include "runtime/solver/milp.hpp"

#include <coin/CbcModel.hpp>
#include <coin/CbcSolver.hpp>
#include <coin/CoinError.hpp>
#include <coin/CoinFinite.hpp>
#include <coin/CoinMessageHandler.hpp>
#include <coin/CoinPackedMatrix.hpp>
#include <coin/OsiClpSolverInterface.hpp>

#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>

namespace tessera {

namespace {

/// CBC's command-line driver (CbcMain0 / CbcMain1) reads its arguments through process-wide
/// statics (CbcOrClpParam.cpp's read position and argument list), so two solves in different
/// threads scramble each other's settings: under `tessera sweep -j 2` with hops in two cells
/// CBC printed "String of -sec is illegal for integer parameter slogLevel" and ran with
/// whatever options survived (time limit, gap, the pump and probing that abort this build).
/// Every solve holds this lock from CbcMain0 to the end of CbcMain1.
std::mutex& cbc_driver_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

const char* to_string(milp_outcome o) {
  switch (o) {
    case milp_outcome::optimal:
      return "optimal";
    case milp_outcome::feasible:
      return "feasible";
    case milp_outcome::time_limit:
      return "time_limit";
    case milp_outcome::node_limit:
      return "node_limit";
    case milp_outcome::infeasible:
      return "infeasible";
    case milp_outcome::unbounded:
      return "unbounded";
  }
  return "unknown";
}

int milp_model::add_column(double lower, double upper, double objective, bool integer) {
  integer_.push_back(integer ? 1 : 0);
  return lp_.add_column(lower, upper, objective);
}

int milp_model::num_integers() const {
  return static_cast<int>(std::count(integer_.begin(), integer_.end(), 1));
}

namespace {

/// CBC's infinity is COIN_DBL_MAX; map IEEE infinities onto it.
double to_coin(double b) {
  if (b >= lp_inf) return COIN_DBL_MAX;
  if (b <= -lp_inf) return -COIN_DBL_MAX;
  return b;
}

error cbc_error(const std::string& what) { return error{error_kind::solver_failed, what}; }

/// Checks indices and values before the model reaches CBC.
status check_model(const milp_model& mm) {
  const lp_model& m = mm.relaxation();
  const int nc = m.num_columns(), nr = m.num_rows();
  for (int c = 0; c < nc; ++c) {
    const double lo = m.column_lower()[c], hi = m.column_upper()[c];
    if (std::isnan(lo) || std::isnan(hi) || !std::isfinite(m.objective()[c]))
      return error{error_kind::invalid_input,
                   "milp model: column " + std::to_string(c) + ": NaN bound or objective"};
    if (lo > hi)
      return error{error_kind::invalid_input,
                   "milp model: column " + std::to_string(c) + ": lower bound above upper"};
  }
  for (int r = 0; r < nr; ++r)
    if (std::isnan(m.row_lower()[r]) || std::isnan(m.row_upper()[r]))
      return error{error_kind::invalid_input,
                   "milp model: row " + std::to_string(r) + ": NaN bound"};
  for (std::size_t k = 0; k < m.num_coefficients(); ++k) {
    const int r = m.entry_rows()[k], c = m.entry_columns()[k];
    if (r < 0 || r >= nr || c < 0 || c >= nc)
      return error{error_kind::invalid_input, "milp model: coefficient (" + std::to_string(r) +
                                                  ", " + std::to_string(c) +
                                                  ") is outside the model"};
    if (!std::isfinite(m.entry_values()[k]))
      return error{error_kind::invalid_input, "milp model: coefficient (" + std::to_string(r) +
                                                  ", " + std::to_string(c) + ") is not finite"};
  }
  return {};
}

/// Column-major matrix with duplicate coefficients summed.
CoinPackedMatrix column_matrix(const lp_model& m) {
  const int nc = m.num_columns(), nr = m.num_rows();
  std::vector<std::size_t> order(m.num_coefficients());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const int ca = m.entry_columns()[a], cb = m.entry_columns()[b];
    return ca != cb ? ca < cb : m.entry_rows()[a] < m.entry_rows()[b];
  });
  std::vector<CoinBigIndex> start(nc + 1, 0);
  std::vector<int> index;
  std::vector<double> value;
  index.reserve(order.size());
  value.reserve(order.size());
  std::size_t k = 0;
  for (int c = 0; c < nc; ++c) {
    start[c] = static_cast<CoinBigIndex>(index.size());
    for (; k < order.size() && m.entry_columns()[order[k]] == c; ++k) {
      const int r = m.entry_rows()[order[k]];
      const double v = m.entry_values()[order[k]];
      if (!index.empty() && static_cast<CoinBigIndex>(index.size()) > start[c] && index.back() == r)
        value.back() += v;
      else {
        index.push_back(r);
        value.push_back(v);
      }
    }
  }
  start[nc] = static_cast<CoinBigIndex>(index.size());
  std::vector<int> length(nc);
  for (int c = 0; c < nc; ++c) length[c] = static_cast<int>(start[c + 1] - start[c]);
  return CoinPackedMatrix(true, nr, nc, start[nc], value.data(), index.data(), start.data(),
                          length.data());
}

/// CBC's solver calls this at fixed points; tessera does not intervene.
int no_callback(CbcModel*, int) { return 0; }

/// A number as CBC's command line reads it.
std::string arg(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Loads `mm` into `si` (minimising: CBC's sense), its log silenced and its integer columns
/// marked.
void load_into(const milp_model& mm, OsiClpSolverInterface& si) {
  const lp_model& m = mm.relaxation();
  const int nc = m.num_columns(), nr = m.num_rows();
  const double sign = m.sense() == lp_sense::maximize ? -1.0 : 1.0;
  std::vector<double> cl(nc), cu(nc), obj(nc), rl(nr), ru(nr);
  for (int c = 0; c < nc; ++c) {
    cl[c] = to_coin(m.column_lower()[c]);
    cu[c] = to_coin(m.column_upper()[c]);
    obj[c] = sign * m.objective()[c];
  }
  for (int r = 0; r < nr; ++r) {
    rl[r] = to_coin(m.row_lower()[r]);
    ru[r] = to_coin(m.row_upper()[r]);
  }
  si.messageHandler()->setLogLevel(0);
  si.getModelPtr()->setLogLevel(0);
  si.loadProblem(column_matrix(m), cl.data(), cu.data(), obj.data(), rl.data(), ru.data());
  for (int c = 0; c < nc; ++c)
    if (mm.is_integer(c)) si.setInteger(c);
}

/// `x` rounded where its columns are integer and clipped to the columns' bounds, into `out`
/// with its objective.
void take_solution(const milp_model& mm, std::vector<double> x, milp_solution& out) {
  const lp_model& m = mm.relaxation();
  double z = 0;
  for (int c = 0; c < m.num_columns(); ++c) {
    if (mm.is_integer(c)) x[c] = std::round(x[c]);
    x[c] = std::min(std::max(x[c], m.column_lower()[c]), m.column_upper()[c]);
    z += m.objective()[c] * x[c];
  }
  out.x = std::move(x);
  out.objective = z;
  out.has_solution = true;
}

/// A CBC model of `mm` (CBC clones the solver it is handed), its log off.
std::unique_ptr<CbcModel> cbc_model(const milp_model& mm) {
  OsiClpSolverInterface si;
  load_into(mm, si);
  auto model = std::make_unique<CbcModel>(si);
  model->setLogLevel(0);
  model->messageHandler()->setLogLevel(0);
  return model;
}

/// Solves the whole model with CBC (`solve_milp` without the relaxation-first path); the
/// caller has checked the model and that it has columns.
result<milp_solution> solve_with_cbc(const milp_model& mm, const milp_settings& s) {
  const lp_model& m = mm.relaxation();
  const int nc = m.num_columns();
  const double sign = m.sense() == lp_sense::maximize ? -1.0 : 1.0;  // CBC minimises
  milp_solution out;
  try {
    const auto owned = cbc_model(mm);
    CbcModel& model = *owned;
    // CBC's standard cuts and heuristics, as its command-line solver runs them; the parameter
    // store is local to this call, the driver's argument reader is not (see the lock).
    CbcSolverUsefulData data;
    std::unique_lock<std::mutex> driver(cbc_driver_mutex());
    CbcMain0(model, data);
    data.noPrinting_ = true;
    data.useSignalHandler_ = false;
    std::vector<std::string> args = {"tessera", "-log", "0", "-slog", "0"};
    if (s.time_limit_s > 0) {
      args.push_back("-sec");
      args.push_back(arg(s.time_limit_s));
    }
    if (s.node_limit > 0) {
      args.push_back("-maxN");
      args.push_back(std::to_string(s.node_limit));
    }
    args.push_back("-scaling");
    switch (s.scaling) {
      case lp_scaling::none:
        args.push_back("off");
        break;
      case lp_scaling::equilibrium:
        args.push_back("equilibrium");
        break;
      case lp_scaling::geometric:
        args.push_back("geometric");
        break;
      case lp_scaling::automatic:
        args.push_back("automatic");
        break;
    }
    if (!s.probing) {
      args.push_back("-probing");
      args.push_back("off");
    }
    if (!s.feasibility_pump) {
      args.push_back("-feas");
      args.push_back("off");
    }
    if (!s.preprocess) {
      args.push_back("-preprocess");
      args.push_back("off");
    }
    args.push_back("-ratio");
    args.push_back(arg(std::max(0.0, s.relative_gap)));
    args.push_back("-allow");
    args.push_back(arg(std::max(0.0, s.absolute_gap)));
    args.push_back("-solve");
    args.push_back("-quit");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    CbcMain1(static_cast<int>(argv.size()), argv.data(), model, no_callback, data);
    driver.unlock();

    out.nodes = model.getNodeCount();
    const int st = model.status(), sec = model.secondaryStatus();
    const double* best = model.bestSolution();
    out.has_solution = best != nullptr && model.getSolutionCount() > 0;
    if (!out.has_solution && best != nullptr && model.getMinimizationObjValue() < 1e49)
      out.has_solution = true;
    if (st == 2) return cbc_error("CBC abandoned the search (numerical difficulties)");
    if (sec == 7 || model.isContinuousUnbounded()) {
      out.outcome = milp_outcome::unbounded;
      out.has_solution = false;
    } else if (model.isProvenInfeasible() || sec == 1) {
      out.outcome = milp_outcome::infeasible;
      out.has_solution = false;
    } else if (sec == 4 || model.isSecondsLimitReached()) {
      out.outcome = milp_outcome::time_limit;
    } else if (st == 0 && out.has_solution) {
      out.outcome = milp_outcome::optimal;
    } else if (out.has_solution) {
      out.outcome = milp_outcome::feasible;
    } else if (st == 0) {
      out.outcome = milp_outcome::infeasible;
    } else {
      out.outcome = milp_outcome::node_limit;
    }
    if (out.has_solution) take_solution(mm, {best, best + nc}, out);
    const double bound = model.getBestPossibleObjValue();
    out.best_bound = std::abs(bound) < 1e49 ? sign * bound : sign * COIN_DBL_MAX;
    if (out.outcome == milp_outcome::optimal && std::abs(bound) >= 1e49)
      out.best_bound = out.objective;
  } catch (const CoinError& e) {
    return cbc_error("CBC: " + e.className() + "::" + e.methodName() + ": " + e.message());
  } catch (const std::exception& e) {
    return cbc_error(std::string("CBC: ") + e.what());
  }
  return out;
}

/// Solves a small model (a rounding neighbourhood: tens of columns) by CBC's branch and bound
/// alone, without the command-line driver's preprocessing, cuts and heuristics, whose set-up
/// costs more than such a model's search. Optimal or nothing: a node or time limit reached
/// counts as no solution.
result<milp_solution> solve_small(const milp_model& mm, const milp_settings& s) {
  const int nc = mm.num_columns();
  milp_solution out;
  try {
    const auto owned = cbc_model(mm);
    CbcModel& model = *owned;
    model.setMaximumNodes(10000);
    if (s.time_limit_s > 0) model.setMaximumSeconds(s.time_limit_s);
    model.setAllowableGap(0);
    model.setAllowableFractionGap(0);
    model.initialSolve();
    model.branchAndBound();
    if (!model.isProvenOptimal() || !model.bestSolution()) return out;
    out.nodes = model.getNodeCount();
    take_solution(mm, {model.bestSolution(), model.bestSolution() + nc}, out);
  } catch (const CoinError& e) {
    return cbc_error("CBC: " + e.className() + "::" + e.methodName() + ": " + e.message());
  }
  return out;
}

/// True when `v` is within `tol` of an integer.
bool integral(double v, double tol = 1e-7) { return std::abs(v - std::round(v)) <= tol; }

/// The rounding neighbourhood of relaxation solution `x` (milp_settings::relaxation_first)
/// as a MILP over its free columns: fixed columns' activity moved into the row bounds, rows
/// without a free column dropped. `free_col[c]` is c's column in it, -1 when fixed at
/// `fixed[c]`.
milp_model rounding_neighbourhood(const milp_model& mm, const std::vector<double>& x,
                                  std::vector<int>& free_col, std::vector<double>& fixed) {
  const lp_model& m = mm.relaxation();
  const int nc = m.num_columns(), nr = m.num_rows();
  milp_model sub;
  sub.set_sense(m.sense());
  free_col.assign(nc, -1);
  fixed.assign(nc, 0);
  for (int c = 0; c < nc; ++c) {
    double lo = m.column_lower()[c], hi = m.column_upper()[c];
    if (mm.is_integer(c) && !mm.is_flexible(c)) {
      if (integral(x[c])) {
        fixed[c] = std::round(x[c]);
        continue;
      }
      lo = std::max(lo, std::floor(x[c]));
      hi = std::min(hi, std::ceil(x[c]));
    }
    free_col[c] = sub.add_column(lo, hi, m.objective()[c], mm.is_integer(c));
  }
  std::vector<double> activity(nr, 0);  // of the fixed columns
  std::vector<char> has_free(nr, 0);
  const std::size_t nz = m.num_coefficients();
  for (std::size_t k = 0; k < nz; ++k) {
    const int r = m.entry_rows()[k], c = m.entry_columns()[k];
    if (free_col[c] < 0)
      activity[r] += m.entry_values()[k] * fixed[c];
    else
      has_free[r] = 1;
  }
  std::vector<int> row_of(nr, -1);
  for (int r = 0; r < nr; ++r)
    if (has_free[r]) {
      const double lo = m.row_lower()[r], hi = m.row_upper()[r];
      row_of[r] =
          sub.add_row(lo <= -lp_inf ? lo : lo - activity[r], hi >= lp_inf ? hi : hi - activity[r]);
    }
  for (std::size_t k = 0; k < nz; ++k) {
    const int c = m.entry_columns()[k];
    if (free_col[c] >= 0)
      sub.add_coefficient(row_of[m.entry_rows()[k]], free_col[c], m.entry_values()[k]);
  }
  return sub;
}

/// The relaxation-first path (milp_settings::relaxation_first): an optimal answer from the
/// LP relaxation and its rounding neighbourhood, or nothing when CBC must solve the model.
result<std::optional<milp_solution>> solve_from_relaxation(const milp_model& mm,
                                                           const milp_settings& s) {
  const lp_model& m = mm.relaxation();
  lp_settings ls;
  ls.scaling = lp_scaling::none;  // as CBC's solves (milp_settings::scaling)
  ls.set_packing_start = true;
  ls.time_limit_s = s.time_limit_s;
  auto lr = solve_lp(m, ls);
  // A relaxation CLP could not solve to optimality (or failed on): CBC decides the outcome.
  if (!lr || !lr->optimal()) return std::optional<milp_solution>{};
  const int nc = m.num_columns();
  milp_solution out;
  out.outcome = milp_outcome::optimal;
  out.best_bound = lr->objective;
  out.from_relaxation = true;
  bool all_integral = true;
  for (int c = 0; c < nc && all_integral; ++c)
    if (mm.is_integer(c) && !integral(lr->x[c])) all_integral = false;
  if (all_integral) {
    take_solution(mm, std::move(lr->x), out);
    return std::optional<milp_solution>{std::move(out)};
  }
  std::vector<int> free_col;
  std::vector<double> x;  // the fixed columns' values, then the free ones' from the sub-model
  milp_model sub = rounding_neighbourhood(mm, lr->x, free_col, x);
  auto sr = solve_small(sub, s);  // not empty: some column was fractional
  if (!sr || !sr->has_solution) return std::optional<milp_solution>{};
  for (int c = 0; c < nc; ++c)
    if (free_col[c] >= 0) x[c] = sr->x[free_col[c]];
  take_solution(mm, std::move(x), out);
  const double loss = m.sense() == lp_sense::maximize ? out.best_bound - out.objective
                                                      : out.objective - out.best_bound;
  if (loss > std::max(s.absolute_gap, s.relative_gap * std::abs(out.objective)))
    return std::optional<milp_solution>{};
  out.nodes = sr->nodes;
  return std::optional<milp_solution>{std::move(out)};
}

}  // namespace

result<milp_solution> solve_milp(const milp_model& mm, const milp_settings& s) {
  if (auto st = check_model(mm); !st) return st.err();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const lp_model& m = mm.relaxation();
  milp_solution out;
  if (m.num_columns() == 0) {
    for (int r = 0; r < m.num_rows(); ++r)
      if (m.row_lower()[r] > 0 || m.row_upper()[r] < 0) {
        out.outcome = milp_outcome::infeasible;
        out.seconds = elapsed();
        return out;
      }
    out.has_solution = true;
    out.seconds = elapsed();
    return out;
  }
  if (s.relaxation_first) {
    auto r = solve_from_relaxation(mm, s);
    if (!r) return r.err();
    if (r.value()) {
      out = std::move(*r.value());
      out.seconds = elapsed();
      return out;
    }
  }
  auto r = solve_with_cbc(mm, s);
  if (r) r->seconds = elapsed();
  return r;
}

}  // namespace tessera
