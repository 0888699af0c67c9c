// Gavel's allocation policies: properties on random small clusters, and one golden case per
// policy whose optimum is derived by hand in the comments.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "gavel_fixtures.hpp"
#include "policies/fifo.hpp"
#include "policies/finish_time_fairness.hpp"
#include "policies/gavel_family.hpp"
#include "policies/max_min_fairness.hpp"
#include "policies/max_sum_throughput.hpp"
#include "policies/min_total_duration.hpp"
#include "policies/type_blind.hpp"

using namespace tessera;
using tessera::test::gavel_fixture;

namespace {

/// A Gavel allocation policy in both variants: make(true) heterogeneity-aware, make(false)
/// agnostic (FIFO's most-free rule, an LP on the type-blind view).
struct named_factory {
  std::string name;
  std::function<std::unique_ptr<allocation_policy>(bool)> make;
};

/// The options of `specs` at their defaults.
options defaults(const std::vector<option_spec>& specs) {
  return validate_options(specs, {}, "test").value();
}

/// An LP policy built with default options, on the type-blind view unless `aware`.
template <class Make>
named_factory lp(std::string name, const std::vector<option_spec>& specs, Make make) {
  const options o = defaults(specs);
  return {std::move(name), [o, make](bool aware) {
            auto p = make(o);
            return aware ? std::move(p) : make_type_blind(std::move(p));
          }};
}

std::vector<named_factory> factories() {
  return {
      {"fifo",
       [](bool aware) {
         return make_fifo(options{}, aware ? fifo_choice::fastest : fifo_choice::most_free);
       }},
      lp("max_min_fairness", max_min_fairness_options(), make_max_min_fairness),
      lp("finish_time_fairness", finish_time_fairness_options(), make_finish_time_fairness),
      lp("min_total_duration", min_total_duration_options(), make_min_total_duration),
      lp("max_sum_throughput", max_sum_throughput_options(), make_max_sum_throughput),
  };
}

/// Checks an allocation against the constraints every Gavel policy must meet.
void check_properties(const snapshot& s, const allocation& a, const std::string& what) {
  INFO(what);
  const auto& types = s.cl->types;
  REQUIRE(a.x.size() == s.jobs.size());
  std::vector<double> used(types.size(), 0.0);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    REQUIRE(a.x[m].size() == types.size());
    double sum = 0;
    for (std::size_t j = 0; j < types.size(); ++j) {
      const double x = a.x[m][j];
      CHECK(std::isfinite(x));
      CHECK(x >= 0.0);
      CHECK(x <= 1.0);
      if (s.jobs[m].throughput[j] == 0) CHECK(x == 0.0);
      sum += x;
      used[j] += s.jobs[m].spec->scale_factor * x;
    }
    CHECK(sum <= 1.0 + 1e-6);
  }
  for (std::size_t j = 0; j < types.size(); ++j) CHECK(used[j] <= types[j].gpus + 1e-6);
}

/// min over jobs of (1/w) T.x / T_equal, the max-min fairness objective, on jobs that can run.
double maxmin_value(const snapshot& s, const allocation& a) {
  const matrix t = policy_throughputs(s);
  const auto eq = equal_share_throughputs(s, t);
  double v = 1e300;
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    if (eq[m] <= 0) continue;
    double eff = 0;
    for (std::size_t j = 0; j < t[m].size(); ++j) eff += t[m][j] * a.x[m][j];
    v = std::min(v, eff / (s.jobs[m].spec->priority_weight * eq[m]));
  }
  return v;
}

}  // namespace

TEST_CASE("gavel allocations: properties on random small clusters", "[policies]") {
  for (const auto& f : factories()) {
    for (bool aware : {false, true}) {
      auto policy = f.make(aware);
      std::mt19937 rng(1234);
      for (int trial = 0; trial < 150; ++trial) {
        auto fx = test::random_fixture(rng);
        auto a = policy->allocate(fx->snap);
        INFO(f.name << (aware ? "_perf" : "") << " trial " << trial);
        REQUIRE(a.ok());
        check_properties(fx->snap, *a, f.name);
      }
    }
  }
}

TEST_CASE("gavel allocations: recompute flags", "[policies]") {
  for (const auto& f : factories()) {
    INFO(f.name);
    const bool progress = f.name == "finish_time_fairness" || f.name == "min_total_duration";
    CHECK(f.make(true)->recompute_every_round() == progress);
  }
}

TEST_CASE("gavel allocations: empty snapshot and jobs that cannot run", "[policies]") {
  for (const auto& f : factories()) {
    for (bool aware : {false, true}) {
      INFO(f.name << " aware " << aware);
      gavel_fixture fx;
      fx.add_type("a", 2);
      fx.finish();
      auto p = f.make(aware);
      auto a = p->allocate(fx.snap);
      REQUIRE(a.ok());
      CHECK(a->x.empty());

      gavel_fixture fy;
      fy.add_type("a", 2);
      fy.add_job({0.0});          // runs nowhere
      fy.add_job({5.0}, 4);       // gang of 4 on a 2-GPU type: cannot fit
      fy.add_job({3.0}, 1, 500);  // runs
      fy.finish(100);
      auto b = p->allocate(fy.snap);
      REQUIRE(b.ok());
      check_properties(fy.snap, *b, f.name);
      CHECK(b->x[0][0] == 0.0);
      CHECK(b->x[1][0] == 0.0);
      CHECK(b->x[2][0] > 0.0);
    }
  }
}

TEST_CASE("gavel throughputs: the snapshot's rows and equal share", "[policies]") {
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_type("b", 3);
  fx.add_job({2.0, 1.0});
  fx.add_job({4.0, 0.0}, 2);
  fx.add_job({1.0, 3.0}, 4);
  const auto& s = fx.finish();
  const matrix aware = policy_throughputs(s);
  CHECK(aware[0] == std::vector<double>{2.0, 1.0});
  CHECK(aware[1] == std::vector<double>{4.0, 0.0});
  // G = 4 GPUs, demand = 1 + 2 + 4 = 7 > G, so f = 4/7 and T_equal = f * sum_j T n_j / G:
  // job 0: 4/7 * (2*1 + 1*3) / 4 = 5/7.
  const auto eq = equal_share_throughputs(s, aware);
  CHECK(eq[0] == Approx(5.0 / 7.0));
  CHECK(eq[1] == Approx(4.0 / 7.0 * 4.0 / 4.0));
  CHECK(eq[2] == Approx(4.0 / 7.0 * 10.0 / 4.0));
}

TEST_CASE("max_min_fairness: golden, heterogeneity-aware", "[policies]") {
  // Types A and B with one GPU each; job 1 runs at (2, 1) steps/s, job 2 at (1, 0) (B is
  // useless to it). G = 2 = demand, so f = 1: T_equal = (2+1)/2 = 1.5 and (1+0)/2 = 0.5.
  // Normalised rows: job 1 (4/3, 2/3), job 2 (2, 0). With a2 = t/2 and b1 = 1 - a1:
  // job 1 gets 2/3 + 2/3 a1 with a1 <= 1 - t/2, so 4/3 - t/3 >= t, t* = 1, and at t = 1 the
  // allocation is forced: a1 = a2 = b1 = 1/2.
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_type("b", 1);
  fx.add_job({2.0, 1.0});
  fx.add_job({1.0, 0.0});
  const auto& s = fx.finish();
  for (bool efficiency : {false, true}) {
    max_min_fairness p(efficiency);
    auto a = p.allocate(s);
    REQUIRE(a.ok());
    CHECK(p.last_solve().value == Approx(1.0));
    CHECK(a->x[0][0] == Approx(0.5));
    CHECK(a->x[0][1] == Approx(0.5));
    CHECK(a->x[1][0] == Approx(0.5));
    CHECK(a->x[1][1] == 0.0);
    CHECK(maxmin_value(s, *a) == Approx(1.0));
  }
  // Agnostic, on the type-blind view: one pooled type of 2 GPUs, job 1 at its mean 1.5, job 2
  // at 1 (it runs on A only). G = demand = 2, so T_equal = 1.5 and 1, both rows normalise to
  // 1 and the pooled optimum is y1 = y2 = 1. Spread over the usable types by GPU count: job 1
  // (1/2, 1/2), job 2 (1, 0); A is then 1.5 GPUs over its 1, so its column is scaled by 2/3:
  // job 1 (1/3, 1/2), job 2 (2/3, 0).
  auto agn = make_type_blind(std::make_unique<max_min_fairness>(true));
  auto b = agn->allocate(s);
  REQUIRE(b.ok());
  CHECK(b->x[0][0] == Approx(1.0 / 3.0));
  CHECK(b->x[0][1] == Approx(0.5));
  CHECK(b->x[1][0] == Approx(2.0 / 3.0));
  CHECK(b->x[1][1] == 0.0);
}

TEST_CASE("max_min_fairness: golden, priority weights", "[policies]") {
  // One type with one GPU, two jobs at 2 and 1 steps/s, weights 1 and 2. Demand 2 > G = 1,
  // f = 1/2: T_equal = 1 and 0.5. Objective min(2 x1 / 1, 1 x2 / (2 * 0.5)) = min(2 x1, x2)
  // with x1 + x2 <= 1: equal at x2 = 2 x1, so x1 = 1/3, x2 = 2/3, t* = 2/3.
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_job({2.0}, 1, 1000, -1, 0, 1.0);
  fx.add_job({1.0}, 1, 1000, -1, 0, 2.0);
  const auto& s = fx.finish();
  max_min_fairness p(true);
  auto a = p.allocate(s);
  REQUIRE(a.ok());
  CHECK(a->x[0][0] == Approx(1.0 / 3.0));
  CHECK(a->x[1][0] == Approx(2.0 / 3.0));
  CHECK(p.last_solve().value == Approx(2.0 / 3.0));
}

TEST_CASE("min_total_duration: golden", "[policies]") {
  // Types A, B with one GPU each. Job 1: (2, 1) steps/s, 100 steps left; job 2: (1, 0),
  // 50 left. Maximise z with 2 a1 + b1 >= 100 z and a2 >= 50 z: taking a2 = 50 z,
  // a1 = 1 - 50 z, b1 = 50 z (A and job 1's row full) gives 2 - 50 z >= 100 z, z* = 1/75:
  // makespan 75 s, a1 = 1/3, b1 = 2/3, a2 = 2/3 (forced: a1 >= 1/3 from job 1's row).
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_type("b", 1);
  fx.add_job({2.0, 1.0}, 1, 400, 100);
  fx.add_job({1.0, 0.0}, 1, 400, 50);
  const auto& s = fx.finish(1000);
  min_total_duration p(true);
  auto a = p.allocate(s);
  REQUIRE(a.ok());
  CHECK(p.last_makespan() == Approx(75.0));
  CHECK(a->x[0][0] == Approx(1.0 / 3.0));
  CHECK(a->x[0][1] == Approx(2.0 / 3.0));
  CHECK(a->x[1][0] == Approx(2.0 / 3.0));
  CHECK(a->x[1][1] == 0.0);
}

TEST_CASE("finish_time_fairness: golden", "[policies]") {
  SECTION("fresh jobs reduce to max-min fairness") {
    // At arrival (t = 0, rem = total) rho_m = T_equal_m / efftput_m, so minimising the max
    // rho maximises min efftput / T_equal: the max-min golden above, rho* = 1 / t* = 1.
    gavel_fixture fx;
    fx.add_type("a", 1);
    fx.add_type("b", 1);
    fx.add_job({2.0, 1.0});
    fx.add_job({1.0, 0.0});
    const auto& s = fx.finish(0);
    finish_time_fairness p(true, 1e-7, 100);
    auto a = p.allocate(s);
    REQUIRE(a.ok());
    CHECK(p.last_rho() == Approx(1.0).epsilon(1e-5));
    CHECK(a->x[0][0] == Approx(0.5).epsilon(1e-4));
    CHECK(a->x[0][1] == Approx(0.5).epsilon(1e-4));
    CHECK(a->x[1][0] == Approx(0.5).epsilon(1e-4));
  }
  SECTION("an older job with progress") {
    // One GPU type, one GPU, two jobs at 1 step/s; demand 2 > G = 1 so T_equal = 0.5 and
    // iso = 100 / 0.5 = 200 s for both (100 steps each). Now = 100: job 1 arrived at 0 with
    // 20 steps left, job 2 arrives now with 100 left. rho1 = (100 + 20 / x1) / 200,
    // rho2 = (100 / x2) / 200 with x1 + x2 = 1. Equalising: 0.5 + 0.1 / x1 = 0.5 / (1 - x1),
    // i.e. x1^2 + 0.2 x1 - 0.2 = 0, x1 = (-0.2 + sqrt(0.84)) / 2 = 0.358258, rho* = 0.5 /
    // (1 - x1) = 0.779129.
    gavel_fixture fx;
    fx.add_type("a", 1);
    fx.add_job({1.0}, 1, 100, 20, 0);
    fx.add_job({1.0}, 1, 100, 100, 100);
    const auto& s = fx.finish(100);
    const double x1 = (-0.2 + std::sqrt(0.84)) / 2;
    finish_time_fairness p(true, 1e-7, 100);
    auto a = p.allocate(s);
    REQUIRE(a.ok());
    CHECK(a->x[0][0] == Approx(x1).epsilon(1e-4));
    CHECK(a->x[1][0] == Approx(1 - x1).epsilon(1e-4));
    CHECK(p.last_rho() == Approx(0.5 / (1 - x1)).epsilon(1e-5));
    CHECK(p.last_lp_count() <= 101);
  }
}

TEST_CASE("max_sum_throughput: golden", "[policies]") {
  // Types A, B with one GPU each. Job 1: (4, 2) steps/s, normalised (1, 0.5); job 2: (3, 1),
  // normalised (1, 1/3). Each job and each GPU is used at most once; B is worth more to job 1
  // (0.5 > 1/3), so job 1 on B and job 2 on A: 1.5, against 1 + 1/3 the other way round.
  // Raw steps/s would tie (2 + 3 = 4 + 1), which is why the objective normalises.
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_type("b", 1);
  fx.add_job({4.0, 2.0});
  fx.add_job({3.0, 1.0});
  const auto& s = fx.finish();
  max_sum_throughput p;
  auto a = p.allocate(s);
  REQUIRE(a.ok());
  CHECK(p.last_solve().value == Approx(1.5));
  CHECK(a->x[0][0] == Approx(0.0).margin(1e-9));
  CHECK(a->x[0][1] == Approx(1.0));
  CHECK(a->x[1][0] == Approx(1.0));
  CHECK(a->x[1][1] == Approx(0.0).margin(1e-9));
}

TEST_CASE("max_sum_throughput: raw steps/s when not normalised", "[policies]") {
  // Types A, B with one GPU each. Job 1: (10, 20) steps/s, normalised (1/2, 1); job 2: (2, 8),
  // normalised (1/4, 1). Normalised: job 1 on A and job 2 on B give 1/2 + 1 = 1.5 against
  // 1 + 1/4 = 1.25 the other way round. Raw: job 1 on B and job 2 on A give 20 + 2 = 22
  // against 10 + 8 = 18: the model with the higher step rate takes its best GPU.
  gavel_fixture fx;
  fx.add_type("a", 1);
  fx.add_type("b", 1);
  fx.add_job({10.0, 20.0});
  fx.add_job({2.0, 8.0});
  const auto& s = fx.finish();
  max_sum_throughput normalised;
  auto a = normalised.allocate(s);
  REQUIRE(a.ok());
  CHECK(normalised.last_solve().value == Approx(1.5));
  CHECK(a->x[0][0] == Approx(1.0));
  CHECK(a->x[1][1] == Approx(1.0));
  max_sum_throughput raw(false);
  auto b = raw.allocate(s);
  REQUIRE(b.ok());
  CHECK(raw.last_solve().value == Approx(22.0));
  CHECK(b->x[0][1] == Approx(1.0));
  CHECK(b->x[1][0] == Approx(1.0));
}

TEST_CASE("fifo: golden", "[policies]") {
  // A: 2 GPUs (fast), B: 4 GPUs. In arrival order: j0 scale 2 (3, 1), j1 scale 2 (2, 1),
  // j2 scale 4 (5, 4), j3 scale 1 (1, 1).
  // Aware: j0 -> A (fastest; A full), j1 -> B (2 of 4 left), j2 needs 4: nothing fits, so the
  // walk stops and j3 waits too, although it would fit.
  // Agnostic: j0 -> B (most free, 4), j1 -> A (2 vs 2: tie, lower index), j2 stops the walk.
  gavel_fixture fx;
  fx.add_type("a", 2);
  fx.add_type("b", 4);
  fx.add_job({3.0, 1.0}, 2);
  fx.add_job({2.0, 1.0}, 2);
  fx.add_job({5.0, 4.0}, 4);
  fx.add_job({1.0, 1.0}, 1);
  const auto& s = fx.finish();
  auto aware = fifo(fifo_choice::fastest).allocate(s);
  REQUIRE(aware.ok());
  CHECK(aware->x == std::vector<std::vector<double>>{{1, 0}, {0, 1}, {0, 0}, {0, 0}});
  auto agnostic = fifo(fifo_choice::most_free).allocate(s);
  REQUIRE(agnostic.ok());
  CHECK(agnostic->x == std::vector<std::vector<double>>{{0, 1}, {1, 0}, {0, 0}, {0, 0}});

  // A job that can never fit (8 GPUs on a 6-GPU cluster) is skipped, not waited for.
  gavel_fixture fy;
  fy.add_type("a", 2);
  fy.add_type("b", 4);
  fy.add_job({1.0, 1.0}, 8);
  fy.add_job({1.0, 1.0}, 4);
  auto skip = fifo(fifo_choice::fastest).allocate(fy.finish());
  REQUIRE(skip.ok());
  CHECK(skip->x == std::vector<std::vector<double>>{{0, 0}, {0, 1}});
}
