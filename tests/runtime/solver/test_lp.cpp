// The CLP adapter on small LPs whose optima are worked out by hand in the comments.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "runtime/solver/lp.hpp"

using namespace tessera;

namespace {

// Wyndor Glass (Hillier & Lieberman's textbook example), solved by hand:
//   max 3x + 5y  s.t.  x <= 4,  2y <= 12,  3x + 2y <= 18,  x, y >= 0.
// Vertices: (0,0)=0, (4,0)=12, (4,3)=27, (2,6)=36, (0,6)=30, so the optimum is (2, 6) with
// value 36. Duals from the two binding rows: 2 u2 + 2 u3 = 5 and 3 u3 = 3 give u3 = 1,
// u2 = 1.5, and u1 = 0 (x <= 4 is slack).
lp_model wyndor() {
  lp_model m;
  m.set_sense(lp_sense::maximize);
  const int x = m.add_column(0, lp_inf, 3);
  const int y = m.add_column(0, lp_inf, 5);
  m.add_row(-lp_inf, 4, {{x, 1}});
  m.add_row(-lp_inf, 12, {{y, 2}});
  m.add_row(-lp_inf, 18, {{x, 3}, {y, 2}});
  return m;
}

}  // namespace

TEST_CASE("lp: maximisation with known optimum and duals", "[solver]") {
  auto r = solve_lp(wyndor());
  REQUIRE(r.ok());
  CHECK(r->outcome == lp_outcome::optimal);
  CHECK(r->optimal());
  CHECK(r->objective == Approx(36));
  CHECK(r->x[0] == Approx(2));
  CHECK(r->x[1] == Approx(6));
  CHECK(r->row_activity[2] == Approx(18));
  CHECK(r->row_duals[0] == Approx(0).margin(1e-9));
  CHECK(r->row_duals[1] == Approx(1.5));
  CHECK(r->row_duals[2] == Approx(1));
}

TEST_CASE("lp: minimisation with >= rows", "[solver]") {
  // min 2x + 3y  s.t.  x + y >= 4,  x + 3y >= 6,  x, y >= 0.
  // Vertices: (0,4)=12, (3,1)=9, (6,0)=12: optimum (3,1) = 9. Duals: u1 + u2 = 2 and
  // u1 + 3 u2 = 3 give u2 = 0.5, u1 = 1.5 (check: 4*1.5 + 6*0.5 = 9).
  lp_model m;
  const int x = m.add_column(0, lp_inf, 2);
  const int y = m.add_column(0, lp_inf, 3);
  m.add_row(4, lp_inf, {{x, 1}, {y, 1}});
  m.add_row(6, lp_inf, {{x, 1}, {y, 3}});
  for (auto alg : {lp_algorithm::dual, lp_algorithm::primal, lp_algorithm::barrier}) {
    lp_settings s;
    s.algorithm = alg;
    auto r = solve_lp(m, s);
    REQUIRE(r.ok());
    CHECK(r->optimal());
    CHECK(r->objective == Approx(9));
    CHECK(r->x[0] == Approx(3));
    CHECK(r->x[1] == Approx(1));
    CHECK(r->row_duals[0] == Approx(1.5));
    CHECK(r->row_duals[1] == Approx(0.5));
  }
  lp_settings pre;
  pre.presolve = true;
  auto r = solve_lp(m, pre);
  REQUIRE(r.ok());
  CHECK(r->objective == Approx(9));
}

TEST_CASE("lp: equality rows, free and negative-bounded columns", "[solver]") {
  // min x  s.t.  x - y = 0,  x free,  y in [-3, 5]:  x = y, so the optimum is x = y = -3.
  lp_model m;
  const int x = m.add_column(-lp_inf, lp_inf, 1);
  const int y = m.add_column(-3, 5, 0);
  m.add_row(0, 0, {{x, 1}, {y, -1}});
  auto r = solve_lp(m);
  REQUIRE(r.ok());
  CHECK(r->optimal());
  CHECK(r->objective == Approx(-3));
  CHECK(r->x[0] == Approx(-3));
}

TEST_CASE("lp: duplicate coefficients are summed", "[solver]") {
  // max x  s.t.  (1 + 1) x <= 3: x = 1.5.
  lp_model m;
  m.set_sense(lp_sense::maximize);
  const int x = m.add_column(0, lp_inf, 1);
  const int r0 = m.add_row(-lp_inf, 3);
  m.add_coefficient(r0, x, 1);
  m.add_coefficient(r0, x, 1);
  auto r = solve_lp(m);
  REQUIRE(r.ok());
  CHECK(r->x[0] == Approx(1.5));
}

TEST_CASE("lp: infeasible and unbounded are outcomes, not errors", "[solver]") {
  {
    // x in [0, 1] but x >= 2.
    lp_model m;
    const int x = m.add_column(0, 1, 1);
    m.add_row(2, lp_inf, {{x, 1}});
    auto r = solve_lp(m);
    REQUIRE(r.ok());
    CHECK(r->outcome == lp_outcome::infeasible);
    CHECK_FALSE(r->optimal());
  }
  {
    // max x + y  s.t.  x - y <= 1: y can grow without bound.
    lp_model m;
    m.set_sense(lp_sense::maximize);
    const int x = m.add_column(0, lp_inf, 1);
    const int y = m.add_column(0, lp_inf, 1);
    m.add_row(-lp_inf, 1, {{x, 1}, {y, -1}});
    auto r = solve_lp(m);
    REQUIRE(r.ok());
    CHECK(r->outcome == lp_outcome::unbounded);
  }
  CHECK(std::string(to_string(lp_outcome::time_limit)) == "time_limit");
}

TEST_CASE("lp: bad input is an error", "[solver]") {
  lp_model m;
  const int x = m.add_column(0, 1, 1);
  m.add_row(0, 1, {{x, std::numeric_limits<double>::quiet_NaN()}});
  auto r = solve_lp(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().kind == error_kind::invalid_input);

  lp_model m2;
  m2.add_column(0, 1, 1);
  m2.add_row(0, 1, {{5, 1.0}});  // no column 5
  auto r2 = solve_lp(m2);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.err().kind == error_kind::invalid_input);

  lp_solver s;
  CHECK_FALSE(s.solve().ok());  // nothing loaded
}

TEST_CASE("lp: empty models", "[solver]") {
  auto r = solve_lp(lp_model{});
  REQUIRE(r.ok());
  CHECK(r->optimal());
  CHECK(r->objective == 0);
  // A column without rows: min -x over [0, 1] gives x = 1.
  lp_model m;
  m.add_column(0, 1, -1);
  auto r2 = solve_lp(m);
  REQUIRE(r2.ok());
  CHECK(r2->objective == Approx(-1));
}

TEST_CASE("lp: warm re-solve after edits", "[solver]") {
  lp_solver s;
  auto r = s.solve(wyndor());
  REQUIRE(r.ok());
  CHECK_FALSE(r->warm);
  CHECK(r->objective == Approx(36));

  // Loosen 3x + 2y <= 18 to <= 24: x = 4, y = 6 are both at their other limits, value 42.
  REQUIRE(s.set_row_bounds(2, -lp_inf, 24).ok());
  auto r2 = s.solve();
  REQUIRE(r2.ok());
  CHECK(r2->warm);
  CHECK(r2->iterations <= 2);
  CHECK(r2->objective == Approx(42));
  CHECK(r2->x[0] == Approx(4));

  // Objective edit, primal simplex: max 3x + 1y over the same polytope: x = 4, y = 6 still
  // (both bounds bind), value 18.
  REQUIRE(s.set_objective(1, 1).ok());
  lp_settings p;
  p.algorithm = lp_algorithm::primal;
  auto r3 = s.solve(p);
  REQUIRE(r3.ok());
  CHECK(r3->objective == Approx(18));

  // Coefficient edit: 3x + 2y -> 3x + 4y <= 24 with objective 3x + y: at x = 4, y <= 3;
  // value 12 + 3 = 15 (y = 6 would need 36 > 24).
  REQUIRE(s.set_coefficient(2, 1, 4).ok());
  auto r4 = s.solve();
  REQUIRE(r4.ok());
  CHECK(r4->objective == Approx(15));

  // Minimise instead: 0 at the origin.
  REQUIRE(s.set_sense(lp_sense::minimize).ok());
  auto r5 = s.solve();
  REQUIRE(r5.ok());
  CHECK(r5->objective == Approx(0).margin(1e-12));

  CHECK_FALSE(s.set_row_bounds(7, 0, 1).ok());
  CHECK_FALSE(s.set_column_bounds(-1, 0, 1).ok());
}

TEST_CASE("lp: keep_basis on reload and explicit bases", "[solver]") {
  lp_solver s;
  REQUIRE(s.solve(wyndor()).ok());
  const lp_basis b = s.basis();
  REQUIRE(b.columns.size() == 2);
  REQUIRE(b.rows.size() == 3);
  int basic = 0;
  for (auto v : b.columns) basic += v == lp_var_status::basic;
  for (auto v : b.rows) basic += v == lp_var_status::basic;
  CHECK(basic == 3);  // a valid basis has one basic variable per row

  // Reload the same model keeping the basis: already optimal, no pivots.
  auto r = s.solve(wyndor(), {}, true);
  REQUIRE(r.ok());
  CHECK(r->warm);
  CHECK(r->iterations == 0);
  CHECK(r->objective == Approx(36));

  // A fresh solver handed the optimal basis needs no pivots either.
  lp_solver t;
  REQUIRE(t.load(wyndor()).ok());
  REQUIRE(t.set_basis(b).ok());
  auto r2 = t.solve();
  REQUIRE(r2.ok());
  CHECK(r2->iterations == 0);
  CHECK(r2->objective == Approx(36));

  lp_basis wrong = b;
  wrong.rows.pop_back();
  CHECK(t.set_basis(wrong).err().kind == error_kind::invalid_input);
  t.clear_basis();
  auto r3 = t.solve();
  REQUIRE(r3.ok());
  CHECK_FALSE(r3->warm);
  CHECK(r3->objective == Approx(36));
}

TEST_CASE("lp: limits stop the solve with an outcome", "[solver]") {
  // A random LP large enough to need many pivots: max sum c x, A x <= b, 0 <= x <= 1.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  lp_model m;
  m.set_sense(lp_sense::maximize);
  const int n = 400, rows = 300;
  for (int c = 0; c < n; ++c) m.add_column(0, 1, u(rng));
  for (int r = 0; r < rows; ++r) {
    const int row = m.add_row(-lp_inf, 5);
    for (int c = 0; c < n; ++c)
      if (rng() % 8 == 0) m.add_coefficient(row, c, u(rng));
  }
  lp_settings it;
  it.iteration_limit = 3;
  auto r = solve_lp(m, it);
  REQUIRE(r.ok());
  CHECK(r->outcome == lp_outcome::iteration_limit);

  auto full = solve_lp(m);
  REQUIRE(full.ok());
  CHECK(full->optimal());
  CHECK(full->iterations > 3);
}

TEST_CASE("lp: the time limit stops a long solve with an outcome", "[solver]") {
  // A dense-ish random LP that takes CLP thousands of pivots (seconds); 5 ms is far too short.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  lp_model m;
  m.set_sense(lp_sense::maximize);
  const int n = 3000, rows = 2000;
  for (int c = 0; c < n; ++c) m.add_column(0, 1, u(rng));
  for (int r = 0; r < rows; ++r) {
    const int row = m.add_row(-lp_inf, 5);
    for (int c = 0; c < n; ++c)
      if (rng() % 20 == 0) m.add_coefficient(row, c, u(rng));
  }
  lp_settings s;
  s.time_limit_s = 0.005;
  auto r = solve_lp(m, s);
  REQUIRE(r.ok());
  CHECK(r->outcome == lp_outcome::time_limit);
  CHECK(r->seconds < 1.0);
}

namespace {

/// An assignment-like LP as Hops' relaxations are: `groups` set-packing rows (each group's
/// 2-5 choices, at most its size), a few capacity rows over every choice, a pattern-like
/// column that buys capacity, and a free column in an equality row (not a packing row).
/// `tight`: capacity for about a sixth of the demand, else for most of it.
lp_model choice_lp(std::mt19937& rng, int groups, bool maximise, bool tight) {
  std::uniform_real_distribution<double> value(0.5, 10), use(0, 3);
  lp_model m;
  m.set_sense(maximise ? lp_sense::maximize : lp_sense::minimize);
  const double sign = maximise ? 1 : -1;
  std::vector<std::vector<int>> col(groups);
  for (int g = 0; g < groups; ++g) {
    const int size = 1 + static_cast<int>(rng() % 5);
    for (int c = 0, n = 2 + static_cast<int>(rng() % 4); c < n; ++c)
      col[g].push_back(m.add_column(0, size, sign * value(rng)));
    std::vector<std::pair<int, double>> row;
    for (int c : col[g]) row.emplace_back(c, 1.0);
    m.add_row(-lp_inf, size, row);
  }
  const int buy = m.add_column(0, 4, -sign * 3);
  const int free_col = m.add_column(-lp_inf, lp_inf, 0);
  for (int r = 0; r < 3; ++r) {
    std::vector<std::pair<int, double>> row;
    for (const auto& cs : col)
      for (int c : cs) row.emplace_back(c, std::floor(use(rng)));
    row.emplace_back(buy, -2.0);
    m.add_row(-lp_inf, tight ? groups / 2.0 : groups * 2.0, row);
  }
  m.add_row(1, 1, {{free_col, 1}, {buy, 0.5}});
  return m;
}

}  // namespace

TEST_CASE("lp: the set-packing start reaches the same optimum in fewer iterations",
          "[solver][property]") {
  std::mt19937 rng(42);
  int fewer = 0, loose = 0;
  for (int trial = 0; trial < 80; ++trial) {
    INFO("trial " << trial);
    const bool tight = trial % 4 == 3;
    const lp_model m = choice_lp(rng, 5 + trial * 3, trial % 3 != 0, tight);
    lp_settings plain;
    plain.scaling = lp_scaling::none;
    lp_settings packed = plain;
    packed.set_packing_start = true;
    auto a = solve_lp(m, plain);
    auto b = solve_lp(m, packed);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->optimal());
    REQUIRE(b->optimal());
    CHECK(b->objective == Approx(a->objective).epsilon(1e-9));
    if (tight) continue;  // most groups must leave the start basis: no saving expected
    ++loose;
    if (b->iterations < a->iterations) ++fewer;
  }
  // Iteration counts are deterministic: the start saves pivots where most groups fit.
  CHECK(fewer >= loose * 4 / 5);
}
