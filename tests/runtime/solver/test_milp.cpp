// The CBC adapter: small MILPs whose optima are worked out by hand in the comments, outcomes
// kept apart from failures, the time limit, bad input, and a model that once aborted CBC.
#include <catch2/catch.hpp>

#include <coin/CoinMpsIO.hpp>
#include <coin/CoinPackedMatrix.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "runtime/solver/milp.hpp"

using namespace tessera;

namespace {

// 0/1 knapsack, by hand: max 5a + 4b + 3c s.t. 2a + 3b + c <= 5. The subsets within weight 5:
// {a,b} (weight 5, value 9), {a,c} (3, 8), {b,c} (4, 7), singletons at most 5; {a,b,c} weighs
// 6. Optimum {a, b} = 9. The LP relaxation fills by value/weight (c 3, a 2.5, b 1.33): c = 1,
// a = 1, b = 2/3, value 10.67, so CBC must branch or cut to reach 9.
milp_model knapsack() {
  milp_model m;
  m.set_sense(lp_sense::maximize);
  const int a = m.add_binary(5), b = m.add_binary(4), c = m.add_binary(3);
  m.add_row(-lp_inf, 5, {{a, 2}, {b, 3}, {c, 1}});
  return m;
}

/// A generalised assignment problem on identical bins: `jobs` items of size 1/2/4/8 with
/// random values, one column per (item, bin) as a per-server formulation would have it.
/// Its many symmetric optima keep CBC busy for seconds at 220 x 64.
milp_model symmetric_gap(int jobs, int bins, unsigned seed) {
  std::mt19937 rng(seed);
  const int sizes[] = {1, 1, 1, 1, 1, 1, 1, 2, 2, 4, 4, 4, 8};
  milp_model m;
  m.set_sense(lp_sense::maximize);
  std::vector<std::vector<int>> col(jobs);
  std::vector<int> size(jobs);
  for (int j = 0; j < jobs; ++j) {
    size[j] = sizes[rng() % 13];
    const double w = 1 + (rng() % 1000) / 100.0;
    for (int s = 0; s < bins; ++s) col[j].push_back(m.add_binary(w * (1.0 + (s % 5) * 0.3)));
  }
  for (int j = 0; j < jobs; ++j) {
    std::vector<std::pair<int, double>> row;
    for (int c : col[j]) row.emplace_back(c, 1.0);
    m.add_row(-lp_inf, 1, row);
  }
  for (int s = 0; s < bins; ++s) {
    std::vector<std::pair<int, double>> row;
    for (int j = 0; j < jobs; ++j) row.emplace_back(col[j][s], size[j]);
    m.add_row(-lp_inf, 8, row);
  }
  return m;
}

}  // namespace

TEST_CASE("milp: a knapsack reaches its hand-computed optimum", "[solver]") {
  auto r = solve_milp(knapsack());
  REQUIRE(r.ok());
  CHECK(r->outcome == milp_outcome::optimal);
  CHECK(r->optimal());
  REQUIRE(r->has_solution);
  CHECK(r->objective == Approx(9));
  CHECK(r->x[0] == 1);
  CHECK(r->x[1] == 1);
  CHECK(r->x[2] == 0);
  CHECK(r->best_bound == Approx(9).margin(1e-6));
}

TEST_CASE("milp: general integers and continuous columns mix", "[solver]") {
  // min 1.5x + y, x integer in [0, 10], y continuous >= 0, x + y >= 2.5, x >= 1.2.
  // By hand: x >= 1.2 and integral means x >= 2; y = max(0, 2.5 - x). x = 2, y = 0.5 costs
  // 3.5; x = 3, y = 0 costs 4.5; larger x costs more. Optimum x = 2, y = 0.5, value 3.5 (the
  // LP relaxation's x = 1.2, y = 1.3, value 3.1, is not integral).
  milp_model m;
  const int x = m.add_column(0, 10, 1.5, true);
  const int y = m.add_column(0, lp_inf, 1, false);
  m.add_row(2.5, lp_inf, {{x, 1}, {y, 1}});
  m.add_row(1.2, lp_inf, {{x, 1}});
  CHECK(m.num_integers() == 1);
  auto r = solve_milp(m);
  REQUIRE(r.ok());
  CHECK(r->outcome == milp_outcome::optimal);
  CHECK(r->objective == Approx(3.5));
  CHECK(r->x[x] == 2);
  CHECK(r->x[y] == Approx(0.5));
}

TEST_CASE("milp: infeasible and unbounded are outcomes, not errors", "[solver]") {
  // The same outcomes whether CBC alone or the relaxation-first path solves them.
  milp_settings st;
  st.relaxation_first = GENERATE(false, true);
  INFO("relaxation_first " << st.relaxation_first);
  SECTION("infeasible") {
    // Two binaries cannot sum to 3.
    milp_model m;
    const int a = m.add_binary(1), b = m.add_binary(1);
    m.add_row(3, lp_inf, {{a, 1}, {b, 1}});
    auto r = solve_milp(m, st);
    REQUIRE(r.ok());
    CHECK(r->outcome == milp_outcome::infeasible);
    CHECK_FALSE(r->has_solution);
  }
  SECTION("integer infeasible, LP feasible") {
    // 2x = 1 with x integer in [0, 1]: the LP has x = 0.5, no integer point does.
    milp_model m;
    const int x = m.add_column(0, 1, 1, true);
    m.add_row(1, 1, {{x, 2}});
    auto r = solve_milp(m, st);
    REQUIRE(r.ok());
    CHECK(r->outcome == milp_outcome::infeasible);
  }
  SECTION("unbounded") {
    milp_model m;
    m.set_sense(lp_sense::maximize);
    const int x = m.add_column(0, lp_inf, 1, true);
    m.add_row(0, lp_inf, {{x, 1}});
    auto r = solve_milp(m, st);
    REQUIRE(r.ok());
    CHECK(r->outcome == milp_outcome::unbounded);
    CHECK_FALSE(r->has_solution);
  }
}

TEST_CASE("milp: the time limit stops a hard model and keeps the incumbent", "[solver]") {
  milp_settings s;
  s.time_limit_s = 0.3;
  s.relative_gap = 0;
  s.absolute_gap = 0;
  auto r = solve_milp(symmetric_gap(220, 64, 1), s);
  REQUIRE(r.ok());
  CHECK(r->outcome == milp_outcome::time_limit);
  CHECK(r->seconds < 5.0);
  if (r->has_solution) {
    CHECK(r->objective > 0);
    CHECK(r->best_bound >= r->objective - 1e-6);
  }
}

TEST_CASE("milp: a node limit with a solution is feasible-not-proven", "[solver]") {
  milp_settings s;
  s.time_limit_s = 30;
  s.node_limit = 1;
  s.relative_gap = 0;
  s.absolute_gap = 0;
  auto r = solve_milp(symmetric_gap(60, 16, 2), s);
  REQUIRE(r.ok());
  // Either CBC closed the gap at the root (optimal) or it stopped on the node limit.
  const bool ok = r->outcome == milp_outcome::optimal || r->outcome == milp_outcome::feasible ||
                  r->outcome == milp_outcome::node_limit;
  CHECK(ok);
  if (r->outcome == milp_outcome::feasible) CHECK(r->has_solution);
  if (r->outcome == milp_outcome::node_limit) CHECK_FALSE(r->has_solution);
}

TEST_CASE("milp: solves from several threads get their own settings", "[solver]") {
  // CBC's driver reads its arguments through process-wide statics; without the adapter's
  // lock, concurrent solves lost or swapped options (node limit, gap, preprocessing). Each
  // thread alternates settings whose answers differ, and every answer must equal the one the
  // same solve gives alone.
  std::vector<milp_model> models;
  for (unsigned seed = 1; seed <= 3; ++seed) models.push_back(symmetric_gap(30, 6, seed));
  std::vector<milp_settings> settings(3);
  settings[0].node_limit = 1;
  settings[0].relative_gap = 0;
  settings[1].relative_gap = 0.2;
  settings[2].preprocess = false;
  settings[2].relative_gap = 0;
  auto key = [](const milp_solution& r) {
    return std::to_string(static_cast<int>(r.outcome)) + " " + std::to_string(r.nodes) + " " +
           std::to_string(std::lround(r.objective * 1000));
  };
  std::vector<std::string> alone;
  for (const auto& m : models)
    for (const auto& st : settings) {
      auto r = solve_milp(m, st);
      REQUIRE(r.ok());
      alone.push_back(key(*r));
    }
  const int n_threads = 4, rounds = 6;
  std::vector<std::vector<std::string>> got(n_threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < rounds * 9; ++k) {
        const int i = (k + t) % 9;
        auto r = solve_milp(models[i / 3], settings[i % 3]);
        got[t].push_back(r.ok() ? std::to_string(i) + ": " + key(*r) : "error");
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < n_threads; ++t)
    for (int k = 0; k < rounds * 9; ++k) {
      const int i = (k + t) % 9;
      CHECK(got[t][k] == std::to_string(i) + ": " + alone[i]);
    }
}

TEST_CASE("milp: bad input is an error naming the column or row", "[solver]") {
  SECTION("NaN objective") {
    milp_model m;
    m.add_column(0, 1, std::numeric_limits<double>::quiet_NaN(), true);
    auto r = solve_milp(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().kind == error_kind::invalid_input);
    CHECK_THAT(r.err().message, Catch::Contains("column 0"));
  }
  SECTION("coefficient outside the model") {
    milp_model m;
    m.add_binary(1);
    const int row = m.add_row(-lp_inf, 1);
    m.add_coefficient(row, 5, 1.0);
    auto r = solve_milp(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().kind == error_kind::invalid_input);
  }
  SECTION("crossed bounds") {
    milp_model m;
    m.add_column(2, 1, 0, true);
    auto r = solve_milp(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.err().kind == error_kind::invalid_input);
  }
}

TEST_CASE("milp: an empty model is optimal at once", "[solver]") {
  milp_model m;
  auto r = solve_milp(m);
  REQUIRE(r.ok());
  CHECK(r->outcome == milp_outcome::optimal);
  CHECK(r->has_solution);
  CHECK(r->x.empty());
  CHECK(std::string(to_string(milp_outcome::time_limit)) == "time_limit");
}

TEST_CASE("milp: the Hops ILP that aborted scaled CBC with probing solves", "[solver]") {
  // A round of the hops policy on Gavel's 108-GPU cluster (500-job trace, preempt_margin
  // 0.3), written by CBC in exact (IEEE hex) MPS as CBC minimises it. With scaling and probing
  // on, the Debian CBC 2.10.8 aborted in ClpNonLinearCost::checkInfeasibilities; the adapter's
  // defaults (both off) solve it. Optimum -1125.24 (found by CBC without scaling).
  CoinMpsIO mps;
  mps.messageHandler()->setLogLevel(0);
  REQUIRE(mps.readMps(TESSERA_TEST_DATA_DIR "/milp/hops_scaled_probing_abort.mps", "mps") == 0);
  milp_model m;
  const int nc = mps.getNumCols(), nr = mps.getNumRows();
  for (int c = 0; c < nc; ++c)
    m.add_column(mps.getColLower()[c], mps.getColUpper()[c], mps.getObjCoefficients()[c],
                 mps.isInteger(c));
  for (int r = 0; r < nr; ++r) {
    const double lo = mps.getRowLower()[r], hi = mps.getRowUpper()[r];
    m.add_row(lo <= -1e30 ? -lp_inf : lo, hi >= 1e30 ? lp_inf : hi);
  }
  const CoinPackedMatrix* a = mps.getMatrixByCol();
  for (int c = 0; c < nc; ++c) {
    const auto v = a->getVector(c);
    for (int k = 0; k < v.getNumElements(); ++k)
      m.add_coefficient(v.getIndices()[k], c, v.getElements()[k]);
  }
  for (int c = 0; c < nc; ++c) {
    if (m.relaxation().column_upper()[c] >= 1e30)
      FAIL("unexpected infinite column bound in the fixture");
  }
  auto r = solve_milp(m);
  REQUIRE(r.ok());
  CHECK(r->outcome == milp_outcome::optimal);
  CHECK(r->objective == Approx(-1125.24).epsilon(1e-5));
}

// ---- relaxation first ----------------------------------------------------------------------

namespace {

/// A random packing MILP: `n` general-integer columns with positive values, `rows` capacity
/// rows with nonnegative coefficients, and (when `with_flexible`) two flexible integer
/// columns that buy capacity at a price, as Hops' pattern columns do.
milp_model random_packing(std::mt19937& rng, int n, int rows, bool with_flexible) {
  std::uniform_real_distribution<double> value(1, 20), coef(0, 4);
  milp_model m;
  m.set_sense(lp_sense::maximize);
  for (int c = 0; c < n; ++c) m.add_column(0, 1 + rng() % 4, value(rng), rng() % 5 != 0);
  std::vector<int> flex;
  if (with_flexible)
    for (int k = 0; k < 2; ++k) {
      flex.push_back(m.add_column(0, 3, -value(rng) / 4, true));
      m.set_flexible(flex.back());
    }
  for (int r = 0; r < rows; ++r) {
    std::vector<std::pair<int, double>> row;
    for (int c = 0; c < n; ++c)
      if (rng() % 2) row.emplace_back(c, std::floor(coef(rng)));
    for (int f : flex) row.emplace_back(f, -2.0 * (1 + rng() % 2));
    m.add_row(-lp_inf, 2 + rng() % 9, row);
  }
  return m;
}

/// True when `x` meets every bound, row and integrality of `m` (within 1e-6).
bool feasible(const milp_model& mm, const std::vector<double>& x) {
  const lp_model& m = mm.relaxation();
  for (int c = 0; c < m.num_columns(); ++c) {
    if (x[c] < m.column_lower()[c] - 1e-6 || x[c] > m.column_upper()[c] + 1e-6) return false;
    if (mm.is_integer(c) && std::abs(x[c] - std::round(x[c])) > 1e-6) return false;
  }
  std::vector<double> act(m.num_rows(), 0);
  for (std::size_t k = 0; k < m.num_coefficients(); ++k)
    act[m.entry_rows()[k]] += m.entry_values()[k] * x[m.entry_columns()[k]];
  for (int r = 0; r < m.num_rows(); ++r)
    if (act[r] < m.row_lower()[r] - 1e-6 || act[r] > m.row_upper()[r] + 1e-6) return false;
  return true;
}

}  // namespace

TEST_CASE("milp: relaxation first answers an integral relaxation without CBC", "[solver]") {
  // A 3 x 3 assignment (its matrix is totally unimodular, so the LP optimum is integral).
  // Values (9 2 7 / 6 4 3 / 5 8 1); the six permutations by hand: 9+4+1 = 14, 9+3+8 = 20,
  // 2+6+1 = 9, 2+3+5 = 10, 7+6+8 = 21, 7+4+5 = 16. Optimum 21: rows 0, 1, 2 to columns 2, 0, 1.
  milp_model m;
  m.set_sense(lp_sense::maximize);
  const double v[3][3] = {{9, 2, 7}, {6, 4, 3}, {5, 8, 1}};
  int col[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) col[i][j] = m.add_binary(v[i][j]);
  for (int i = 0; i < 3; ++i) {
    m.add_row(-lp_inf, 1, {{col[i][0], 1}, {col[i][1], 1}, {col[i][2], 1}});
    m.add_row(-lp_inf, 1, {{col[0][i], 1}, {col[1][i], 1}, {col[2][i], 1}});
  }
  milp_settings s;
  s.relaxation_first = true;
  auto r = solve_milp(m, s);
  REQUIRE(r.ok());
  CHECK(r->from_relaxation);
  CHECK(r->optimal());
  CHECK(r->objective == Approx(21));
  CHECK(r->x[col[0][2]] == 1);
  CHECK(r->x[col[1][0]] == 1);
  CHECK(r->x[col[2][1]] == 1);
}

TEST_CASE("milp: relaxation first falls back to CBC when rounding is not within the gap",
          "[solver]") {
  // The knapsack's relaxation (a = c = 1, b = 2/3, value 10.67) rounds to a = c = 1, b = 0:
  // value 8, 25% under the bound, so CBC solves it: optimum 9 (see knapsack()).
  milp_settings s;
  s.relaxation_first = true;
  auto r = solve_milp(knapsack(), s);
  REQUIRE(r.ok());
  CHECK_FALSE(r->from_relaxation);
  CHECK(r->optimal());
  CHECK(r->objective == Approx(9));
  // With a 35% gap (of 8) the rounding is good enough, and its bound is the relaxation's.
  s.relative_gap = 0.35;
  auto loose = solve_milp(knapsack(), s);
  REQUIRE(loose.ok());
  CHECK(loose->from_relaxation);
  CHECK(loose->objective == Approx(8));
  CHECK(loose->best_bound == Approx(32.0 / 3));
}

TEST_CASE("milp: relaxation first is feasible, within the gap and bounds the optimum",
          "[solver][property]") {
  std::mt19937 rng(35);
  int from_relaxation = 0, fallbacks = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const bool flex = trial % 2 == 0;
    const milp_model m = random_packing(rng, 4 + trial % 13, 1 + trial % 5, flex);
    milp_settings exact;
    exact.relative_gap = 0;
    exact.absolute_gap = 1e-9;
    auto best = solve_milp(m, exact);
    REQUIRE(best.ok());
    REQUIRE(best->optimal());
    milp_settings s;
    s.relaxation_first = true;
    s.relative_gap = 0.02;
    auto r = solve_milp(m, s);
    REQUIRE(r.ok());
    INFO("trial " << trial);
    REQUIRE(r->has_solution);
    CHECK(feasible(m, r->x));
    CHECK(r->objective >= best->objective * (1 - 0.02) - 1e-6);
    CHECK(r->objective <= best->objective + 1e-6);
    CHECK(r->best_bound >= best->objective - 1e-6);
    (r->from_relaxation ? from_relaxation : fallbacks)++;
  }
  // Both paths were taken (else this test would not test the neighbourhood).
  CHECK(from_relaxation > 20);
  CHECK(fallbacks > 5);
}
