// Hare's clairvoyant policy `hare_offline` (policies/hare_offline.hpp): shortest remaining
// work (at the job's best speed) first, hand-checked against SPT and LAS on one GPU, and the
// header's lower bound checked on random small clusters.
#include <catch2/catch.hpp>

#include <random>

#include "policies/hare.hpp"
#include "policies/hare_offline.hpp"
#include "policies/registry.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::make_job;
using tessera::test::make_snapshot;
using tessera::test::random_instance;

TEST_CASE("hare_offline: remaining work is measured at the job's best speed",
          "[policies][hare][hare_offline]") {
  // K = 2, best 4 steps/s, 300 steps left, weight 1: 300 x 2 / 4 = 150 ideal GPU-seconds.
  const job j = make_job(0, "alpha", 2, 1000);
  job_view v;
  v.spec = &j;
  v.remaining_steps = 300;
  v.throughput = {4.0, 1.0};
  CHECK(hare_remaining_work(v) == Approx(150));
  v.throughput = {0.0, 0.0};
  CHECK(std::isinf(hare_remaining_work(v)));

  // One GPU. Job 0: 300 steps at 4 steps/s (75 s of work); job 1: 100 steps at 1 step/s
  // (100 s). Fewer steps is not less work: job 0 goes first.
  const auto cl = make_cluster({{0, "f0", "fast", 0, 1, 1.0}});
  std::vector<job> jobs = {make_job(0, "a", 1, 300), make_job(1, "b", 1, 100)};
  auto pol = make_policy("hare_offline");
  REQUIRE(pol);
  auto p = pol.value()->plan(make_snapshot(cl, jobs, {{4.0}, {1.0}}));
  REQUIRE(p);
  REQUIRE(p->assignments.size() == 1);
  CHECK(p->assignments[0].job == 0);
  // Job 0 at 1 step/s instead: 300 s of work, job 1 goes first.
  p = pol.value()->plan(make_snapshot(cl, jobs, {{1.0}, {1.0}}));
  REQUIRE(p);
  CHECK(p->assignments[0].job == 1);
}

TEST_CASE("hare_offline: SPT on one GPU, against LAS, hand-computed",
          "[sim][policies][hare][hare_offline]") {
  // One GPU at 1 step/s, 360 s rounds, three jobs at t = 0: 1080, 720 and 360 steps.
  // hare_offline (shortest first): finishes at 360, 1080, 2160; average JCT 1200 s, the
  // optimum on one machine (SPT).
  // hare (least attained service; ties by id): rounds run jobs 0, 1, 2 (job 2 done at 1080),
  // then 0 and 1 tie at 360 s of service: 0, 1 (done at 1800), 0 (done at 2160); average
  // (2160 + 1800 + 1080) / 3 = 1680 s.
  const auto cl = make_cluster({{0, "g0", "fast", 0, 1, 1.0}});
  throughput_table t;
  t.set_isolated("fast", {"alpha", 1}, 1.0);
  std::vector<job> jobs = {make_job(0, "alpha", 1, 1080), make_job(1, "alpha", 1, 720),
                           make_job(2, "alpha", 1, 360)};
  auto off = make_policy("hare_offline");
  auto las = make_policy("hare");
  REQUIRE(off);
  REQUIRE(las);
  auto r_off = simulate(cl, t, jobs, *off.value(), sim_config{});
  auto r_las = simulate(cl, t, jobs, *las.value(), sim_config{});
  REQUIRE(r_off);
  REQUIRE(r_las);
  CHECK(r_off->jobs[2].finish == Approx(360));
  CHECK(r_off->jobs[1].finish == Approx(1080));
  CHECK(r_off->jobs[0].finish == Approx(2160));
  CHECK(compute_metrics(r_off.value()).avg_jct == Approx(1200));
  CHECK(r_las->jobs[2].finish == Approx(1080));
  CHECK(r_las->jobs[1].finish == Approx(1800));
  CHECK(r_las->jobs[0].finish == Approx(2160));
  CHECK(compute_metrics(r_las.value()).avg_jct == Approx(1680));
}

TEST_CASE("hare_offline: every JCT is at least the header's lower bound",
          "[policies][hare][hare_offline][property]") {
  // The bound (policies/hare_offline.hpp, point 1) holds for any schedule of K tasks per
  // step, so both Hare policies must respect it job by job; the offline policy's average JCT
  // is also compared with the online one's over all trials.
  std::mt19937 rng(9);
  double sum_off = 0, sum_las = 0, sum_bound = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto in = random_instance(rng);
    INFO("trial " << trial);
    const auto bound = hare_offline_lower_bound(in.cl, in.table, in.jobs);
    REQUIRE(bound.size() == in.jobs.size());
    for (const char* name : {"hare_offline", "hare"}) {
      auto pol = make_policy(name);
      REQUIRE(pol);
      auto r = simulate(in.cl, in.table, in.jobs, *pol.value(), sim_config{});
      REQUIRE(r);
      REQUIRE(r->complete);
      for (std::size_t i = 0; i < in.jobs.size(); ++i) {
        CHECK(bound[i] > 0);
        CHECK(r->jobs[i].finish - r->jobs[i].arrival >= bound[i] * (1 - 1e-9));
      }
      const double avg = compute_metrics(r.value()).avg_jct;
      (std::string(name) == "hare" ? sum_las : sum_off) += avg;
    }
    for (const double b : bound) sum_bound += b / static_cast<double>(bound.size());
  }
  CHECK(sum_off >= sum_bound);
  CHECK(sum_off <= sum_las);  // knowing sizes helps on average
}
