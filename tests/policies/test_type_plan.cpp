// The fluid makespan plan (policies/type_plan.hpp): a hand-solved instance under a heavy
// load, the light-load case, and the program's bounds and constraints on random clusters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>

#include "policies/type_plan.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::make_job;
using tessera::test::make_snapshot;

namespace {

/// One server of 4 "fast" GPUs and one of 4 "slow" ones.
cluster fast4_slow4() {
  return make_cluster({{0, "f0", "fast", 0, 4, 1.0}, {0, "s0", "slow", 0, 4, 1.0}});
}

}  // namespace

TEST_CASE("type plan: under a heavy load each type goes to the jobs it helps most",
          "[policies][type_plan]") {
  // Jobs 0-7 ("x": 10 steps/s fast, 1 slow, 1000 steps) and 8-15 ("y": 1 fast, 0.97 slow, 970
  // steps), one GPU each. x on the slow type is under min_fit 0.3 of its best: not planned.
  // Work in GPU-seconds: x 8 x 100 = 800 on fast; y 8 x 970 = 7,760 on fast or 8,000 on slow.
  // With a share f of y's work on fast both types fill by T: 800 + 7,760 f = 8,000 (1 - f),
  // so f = 7,200 / 15,760 and T = (800 + 7,760 f) / 4 = 1,086.29 s; each y job's own time
  // (about 986 s) is under T.
  const cluster cl = fast4_slow4();
  std::vector<job> jobs;
  std::vector<std::vector<double>> tput;
  for (int m = 0; m < 16; ++m) {
    jobs.push_back(make_job(m, m < 8 ? "x" : "y", 1, m < 8 ? 1000 : 970));
    tput.push_back(m < 8 ? std::vector<double>{10, 1} : std::vector<double>{1, 0.97});
  }
  const auto s = make_snapshot(cl, jobs, tput);
  const type_plan tp = fluid_type_plan(s, {});
  REQUIRE(tp.solved);
  const double f = 7200.0 / 15760.0;
  CHECK(tp.horizon == Approx((800 + 7760 * f) / 4).epsilon(1e-6));
  CHECK(tp.prefer(0) == std::vector<std::size_t>{0});
  CHECK(tp.share(0, 1) == 0);
  CHECK(tp.prefer(8) == std::vector<std::size_t>{1, 0});  // most of y's work on slow
  CHECK(tp.share(8, 0) == Approx(f).epsilon(1e-6));
  CHECK(tp.bottleneck == std::vector<char>{1, 1});
}

TEST_CASE("type plan: under a light load each job is planned on its fastest type",
          "[policies][type_plan]") {
  // One x and one y job: the longest job's own time (y: 970 s on fast) sets T, the types have
  // room, and the efficiency term puts y on fast too (970 GPU-seconds against 1,000).
  const cluster cl = fast4_slow4();
  const std::vector<job> jobs = {make_job(0, "x", 1, 1000), make_job(1, "y", 1, 970)};
  const auto s = make_snapshot(cl, jobs, {{10, 1}, {1, 0.97}});
  const type_plan tp = fluid_type_plan(s, {});
  REQUIRE(tp.solved);
  CHECK(tp.horizon == Approx(970).epsilon(1e-6));
  CHECK(tp.prefer(0) == std::vector<std::size_t>{0});
  CHECK(tp.prefer(1) == std::vector<std::size_t>{0});
  CHECK(tp.bottleneck == std::vector<char>{0, 0});
}

TEST_CASE("type plan: no job, or no rate, gives no plan", "[policies][type_plan]") {
  const cluster cl = fast4_slow4();
  const std::vector<job> none;
  CHECK_FALSE(fluid_type_plan(make_snapshot(cl, none, {}), {}).solved);
  const std::vector<job> jobs = {make_job(0, "z", 1, 100)};
  const type_plan tp = fluid_type_plan(make_snapshot(cl, jobs, {{0, 0}}), {});
  CHECK_FALSE(tp.solved);
  CHECK(tp.prefer(0).empty());
}

TEST_CASE("type plan: bounds and constraints hold on random clusters", "[policies][type_plan]") {
  // Per instance: each job's shares sum to 1 over types at >= min_fit x its best rate; its
  // preferred types hold >= least_share, largest first; every type's planned GPU-seconds fit
  // in G_t x T, exactly so on a bottleneck; T lies between the lower bounds (the longest job
  // at its best rate; all work at best rates over all GPUs) and the all-at-best plan's T.
  std::mt19937 rng(20261129);
  std::uniform_real_distribution<double> rate(0.1, 5.0);
  int bottlenecks = 0;
  for (int trial = 0; trial < 200; ++trial) {
    INFO("trial " << trial);
    const test::instance in = test::random_instance(rng);
    const std::size_t nt = in.cl.types.size();
    std::vector<std::vector<double>> tput;
    for (std::size_t m = 0; m < in.jobs.size(); ++m) {  // random rates, a fifth of them 0
      std::vector<double> r(nt);
      for (double& v : r) v = rng() % 5 == 0 ? 0.0 : rate(rng);
      if (*std::max_element(r.begin(), r.end()) == 0) r[0] = 1;
      tput.push_back(r);
    }
    const auto s = make_snapshot(in.cl, in.jobs, tput);
    const type_plan_params p;
    const type_plan tp = fluid_type_plan(s, p);
    REQUIRE(tp.solved);
    std::vector<double> load(nt, 0.0), best_load(nt, 0.0);
    double lower = 0, work = 0, longest_best = 0;
    std::map<std::vector<double>, double> group_longest;
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      const auto& r = tput[i];
      const double best = *std::max_element(r.begin(), r.end());
      const auto best_t =
          static_cast<std::size_t>(std::max_element(r.begin(), r.end()) - r.begin());
      const double k = s.jobs[i].spec->scale_factor, rem = s.jobs[i].remaining_steps;
      double sum = 0, own = 0;
      for (std::size_t t = 0; t < nt; ++t) {
        const double x = tp.share(i, t);
        CHECK(x >= 0);
        if (x > 1e-9) {
          CHECK(r[t] >= p.min_fit * best);
          load[t] += x * k * rem / r[t];
          own += x * rem / r[t];
        }
        sum += x;
      }
      CHECK(sum == Approx(1).epsilon(1e-6));
      CHECK(own <= tp.horizon * (1 + 1e-6));
      for (std::size_t q = 0; q < tp.prefer(i).size(); ++q) {
        CHECK(tp.share(i, tp.prefer(i)[q]) >= p.least_share);
        if (q > 0) CHECK(tp.share(i, tp.prefer(i)[q - 1]) >= tp.share(i, tp.prefer(i)[q]));
      }
      lower = std::max(lower, rem / best);
      work += k * rem / best;
      best_load[best_t] += k * rem / best;
      group_longest[r] = std::max(group_longest[r], rem / best);
    }
    for (const auto& [r, t] : group_longest) longest_best = std::max(longest_best, t);
    double all_at_best = longest_best;
    for (std::size_t t = 0; t < nt; ++t) {
      CHECK(load[t] <= in.cl.types[t].gpus * tp.horizon * (1 + 1e-6) + 1e-6);
      if (tp.bottleneck[t]) {
        CHECK(load[t] == Approx(in.cl.types[t].gpus * tp.horizon).epsilon(1e-6));
        ++bottlenecks;
      }
      all_at_best = std::max(all_at_best, best_load[t] / in.cl.types[t].gpus);
    }
    CHECK(tp.horizon >= lower * (1 - 1e-6));
    CHECK(tp.horizon >= work / in.cl.total_gpus() * (1 - 1e-6));
    CHECK(tp.horizon <= all_at_best * (1 + 1e-6));
  }
  CHECK(bottlenecks > 0);  // the instances include loaded ones
}
