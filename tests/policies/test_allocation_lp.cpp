// The shared allocation LP: the class reduction, warm starts and the crash give the same
// optimum as the plain LP over every job, built here independently with lp_model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "gavel_fixtures.hpp"
#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"
#include "policies/max_min_fairness.hpp"

using namespace tessera;

namespace {

/// The full LP, one block of variables per job (no classes), solved cold.
double full_lp_value(const allocation_lp_input& in, allocation_objective obj) {
  const bool maxmin = obj == allocation_objective::max_min;
  const std::size_t n = in.rows.size(), k = in.capacity.size();
  lp_model m;
  m.set_sense(lp_sense::maximize);
  const int t = maxmin ? m.add_column(0, lp_inf, 1) : -1;
  std::vector<int> cap(k);
  for (std::size_t j = 0; j < k; ++j) cap[j] = m.add_row(-lp_inf, in.capacity[j]);
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::pair<int, double>> sum, val;
    for (std::size_t j = 0; j < k; ++j) {
      const double a = in.rows[i][j];
      if (a <= 0 || in.capacity[j] < in.scale[i]) continue;
      const int x = m.add_column(0, 1, maxmin ? 0.0 : a);
      sum.emplace_back(x, 1.0);
      val.emplace_back(x, a);
      m.add_coefficient(cap[j], x, in.scale[i]);
    }
    if (sum.empty()) continue;  // runs nowhere: not part of the LP
    any = true;
    m.add_row(-lp_inf, 1, sum);
    if (maxmin) {
      val.emplace_back(t, -1.0);
      m.add_row(0, lp_inf, val);
    }
  }
  if (!any) return 0;
  auto r = solve_lp(m);
  REQUIRE(r.ok());
  REQUIRE(r->optimal());
  return r->objective;
}

/// Random LP input whose rows come from a small pool, so that jobs share classes.
allocation_lp_input random_input(std::mt19937& rng, int max_jobs, int pool_size) {
  allocation_lp_input in;
  const int k = 1 + static_cast<int>(rng() % 4);
  for (int j = 0; j < k; ++j) in.capacity.push_back(1 + static_cast<double>(rng() % 12));
  std::uniform_real_distribution<double> u(0.05, 5.0);
  std::vector<std::vector<double>> pool(pool_size, std::vector<double>(k));
  for (auto& row : pool)
    for (auto& v : row) v = rng() % 4 == 0 ? 0.0 : u(rng);
  const int scales[] = {1, 2, 4, 8};
  const int n = 1 + static_cast<int>(rng() % max_jobs);
  for (int m = 0; m < n; ++m) {
    in.ids.push_back(m);
    in.rows.push_back(pool[rng() % pool_size]);
    in.scale.push_back(scales[rng() % 3 == 0 ? rng() % 4 : 0]);
  }
  return in;
}

double rel_diff(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

}  // namespace

TEST_CASE("allocation lp: class reduction keeps the optimum", "[policies]") {
  std::mt19937 rng(42);
  int merged = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto in = random_input(rng, 40, 1 + static_cast<int>(rng() % 6));
    for (auto obj : {allocation_objective::max_min, allocation_objective::max_sum}) {
      allocation_lp agg;
      auto r = agg.solve(in, obj);
      REQUIRE(r.ok());
      INFO("trial " << trial << " classes " << r->classes << " jobs " << in.rows.size());
      CHECK(rel_diff(r->value, full_lp_value(in, obj)) < 1e-7);
      merged += r->classes < static_cast<int>(in.rows.size());
      // The value is what the allocation achieves.
      double lo = 1e300, sum = 0;
      bool any = false;
      for (std::size_t m = 0; m < in.rows.size(); ++m) {
        double v = 0;
        bool runs = false;
        for (std::size_t j = 0; j < in.capacity.size(); ++j) {
          v += in.rows[m][j] * r->x[m][j];
          runs = runs || (in.rows[m][j] > 0 && in.capacity[j] >= in.scale[m]);
        }
        if (!runs) continue;
        any = true;
        lo = std::min(lo, v);
        sum += v;
      }
      if (any) CHECK(rel_diff(obj == allocation_objective::max_min ? lo : sum, r->value) < 1e-6);
      // Same optimum without aggregation.
      allocation_lp plain;
      allocation_lp_settings s;
      s.aggregate = false;
      auto p = plain.solve(in, obj, s);
      REQUIRE(p.ok());
      CHECK(rel_diff(p->value, r->value) < 1e-7);
    }
  }
  CHECK(merged > 100);  // the instances did exercise the reduction
}

TEST_CASE("allocation lp: max-min fairness equals the full LP on random snapshots", "[policies]") {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    auto fx = test::random_fixture(rng);
    const auto& s = fx->snap;
    max_min_fairness p(true);
    auto a = p.allocate(s);
    REQUIRE(a.ok());
    // The full LP over jobs, built from the snapshot by hand (rows weighted by scale factor).
    const matrix t = policy_throughputs(s);
    const auto eq = equal_share_throughputs(s, t);
    allocation_lp_input in = lp_input_for(s);
    for (std::size_t m = 0; m < s.jobs.size(); ++m)
      for (std::size_t j = 0; j < t[m].size(); ++j)
        in.rows[m][j] = eq[m] > 0 ? s.jobs[m].spec->scale_factor * t[m][j] /
                                        (s.jobs[m].spec->priority_weight * eq[m])
                                  : 0;
    INFO("trial " << trial);
    CHECK(rel_diff(p.last_solve().value, full_lp_value(in, allocation_objective::max_min)) < 1e-7);
  }
}

TEST_CASE("allocation lp: warm re-solves match cold solves", "[policies]") {
  std::mt19937 rng(5);
  for (auto obj : {allocation_objective::max_min, allocation_objective::max_sum}) {
    allocation_lp warm;
    auto in = random_input(rng, 30, 5);
    in.capacity = {8, 6, 4};
    for (auto& r : in.rows) r.resize(3, 1.0);
    job_id next = 1000;
    int warm_solves = 0;
    for (int step = 0; step < 60; ++step) {
      // Mutate: add a job, drop one, or perturb a row.
      const int what = static_cast<int>(rng() % 3);
      if (what == 0 || in.rows.empty()) {
        in.ids.push_back(next++);
        in.rows.push_back(in.rows.empty() ? std::vector<double>{1, 2, 3}
                                          : in.rows[rng() % in.rows.size()]);
        in.scale.push_back(1 << (rng() % 3));
      } else if (what == 1) {
        const std::size_t i = rng() % in.rows.size();
        in.ids.erase(in.ids.begin() + i);
        in.rows.erase(in.rows.begin() + i);
        in.scale.erase(in.scale.begin() + i);
      } else {
        auto& row = in.rows[rng() % in.rows.size()];
        for (auto& v : row) v *= 0.5 + (rng() % 100) / 100.0;
      }
      auto w = warm.solve(in, obj);
      REQUIRE(w.ok());
      warm_solves += w->warm;
      allocation_lp cold;
      auto c = cold.solve(in, obj);
      REQUIRE(c.ok());
      INFO("step " << step);
      CHECK_FALSE(c->warm);
      CHECK(rel_diff(w->value, c->value) < 1e-7);
    }
    CHECK(warm_solves > 40);
  }
}

TEST_CASE("allocation lp: the crash keeps the optimum", "[policies]") {
  // 700 distinct rows: 20 base rows, each job's perturbed by up to 2% so no two are equal.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.2, 5.0), jitter(0.98, 1.02);
  std::vector<std::vector<double>> base(20, std::vector<double>(3));
  for (auto& row : base)
    for (auto& v : row) v = rng() % 5 == 0 ? 0.0 : u(rng);
  allocation_lp_input in;
  in.capacity = {120, 100, 150};
  for (int m = 0; m < 700; ++m) {
    auto row = base[rng() % base.size()];
    for (auto& v : row) v *= jitter(rng);
    in.ids.push_back(m);
    in.rows.push_back(row);
    in.scale.push_back(1 << (rng() % 3));
  }
  for (auto obj : {allocation_objective::max_min, allocation_objective::max_sum}) {
    allocation_lp crashed, plain;
    allocation_lp_settings off;
    off.crash = false;
    auto a = crashed.solve(in, obj);
    auto b = plain.solve(in, obj, off);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->classes == 700);
    CHECK(a->crashed);
    CHECK_FALSE(b->crashed);
    CHECK(rel_diff(a->value, b->value) < 1e-7);
    CHECK(a->iterations < b->iterations);
  }
}

TEST_CASE("allocation lp: bad input", "[policies]") {
  allocation_lp lp;
  allocation_lp_input in;
  in.capacity = {1, 2};
  in.ids = {1};
  in.rows = {{1.0}};  // one coefficient for two types
  in.scale = {1};
  auto r = lp.solve(in, allocation_objective::max_min);
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().kind == error_kind::invalid_input);
  in.rows = {{1.0, -2.0}};
  CHECK(lp.solve(in, allocation_objective::max_min).err().kind == error_kind::invalid_input);
  in.rows = {{1.0, 2.0}};
  in.scale = {0};
  CHECK(lp.solve(in, allocation_objective::max_min).err().kind == error_kind::invalid_input);
}

TEST_CASE("row_pool: taken matrices are zeros of the asked shape, whatever was given back",
          "[allocation_lp]") {
  row_pool pool;
  auto a = pool.take(3, 2);
  REQUIRE(a.size() == 3);
  for (auto& row : a) {
    CHECK(row == std::vector<double>(2, 0.0));
    std::fill(row.begin(), row.end(), 7.0);
  }
  pool.give(std::move(a));
  auto b = pool.take(5, 3);  // more rows, longer rows: three reused, two new
  REQUIRE(b.size() == 5);
  for (const auto& row : b) CHECK(row == std::vector<double>(3, 0.0));
  auto c = pool.take(0, 3);
  CHECK(c.empty());
  pool.give(std::move(b));
  auto d = pool.take(1, 1);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == std::vector<double>{0.0});
}

TEST_CASE("max_min_fairness allocates the same with its spent rows handed back",
          "[allocation_lp]") {
  // Two policies see the same sequence of job sets (3-12 jobs, so the pool both grows and is
  // left with spare rows); one is handed each spent allocation back (as the Gavel adapter
  // does), the other not. Both carry their LP basis alike, so their allocations must match.
  std::mt19937 rng(11);
  max_min_fairness with_pool(true, true), without(true, true);
  for (int round = 0; round < 10; ++round) {
    test::gavel_fixture f;
    f.add_type("v100", 4);
    f.add_type("k80", 4);
    const int n = 3 + static_cast<int>(rng() % 10);
    for (int m = 0; m < n; ++m)
      f.add_job({1.0 + rng() % 5, 0.5 + rng() % 3}, 1 + static_cast<int>(rng() % 2));
    snapshot s = f.finish(round * 360.0);
    s.job_set_version = static_cast<std::uint64_t>(round + 1);
    auto a = with_pool.allocate(s);
    auto b = without.allocate(s);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(a->x == b->x);
    with_pool.recycle(std::move(a.value()));
  }
}
