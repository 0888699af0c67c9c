// Task-level execution of round plans (Hare; runtime/core/task_split.hpp): step times of
// task splits derived by hand, the simulator running them, and plan validation of splits.
#include <catch2/catch.hpp>

#include "runtime/core/metrics.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/task_split.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::fixed_plan;
using tessera::test::make_job;

namespace {

/// Servers 0, 1: "f0", "f1", 2 "fast" GPUs each; servers 2, 3: "s0", "s1", 2 "slow" GPUs
/// each (speed factor 1). Each type has 4 GPUs, so a job of scale 4 can run on either (the
/// policies' view gives a type with fewer GPUs than K no throughput).
cluster two_servers() {
  return make_cluster({{0, "f0", "fast", 0, 2, 1.0},
                       {0, "f1", "fast", 0, 2, 1.0},
                       {0, "s0", "slow", 0, 2, 1.0},
                       {0, "s1", "slow", 0, 2, 1.0}});
}

/// alpha at scale 4: fast 4 steps/s on one server, 2 spanning servers; slow 1 and 0.5.
/// Per-task times: fast 0.25 s (0.5 s spanning), slow 1 s (2 s spanning).
/// alpha at scale 2: fast 3 steps/s, slow 1.
throughput_table split_table() {
  throughput_table t;
  t.set_isolated("fast", {"alpha", 4}, 4.0);
  t.set_isolated("fast", {"alpha", 4}, 2.0, false);
  t.set_isolated("slow", {"alpha", 4}, 1.0);
  t.set_isolated("slow", {"alpha", 4}, 0.5, false);
  t.set_isolated("fast", {"alpha", 2}, 3.0);
  t.set_isolated("slow", {"alpha", 2}, 1.0);
  return t;
}

assignment part(job_id id, int server, int gpus, int tasks, int type = 0) {
  assignment a;
  a.job = id;
  a.type = type;
  a.shares = {server_share{server, gpus}};
  a.tasks = tasks;
  return a;
}

}  // namespace

TEST_CASE("task split: step time is the slowest GPU's tasks x its per-task time",
          "[sim][hare][task_split]") {
  const auto cl = two_servers();
  const server_throughput rates(cl, split_table());
  const job j = make_job(0, "alpha", 4, 1000);
  CHECK(task_seconds(rates, 0, "alpha", 4, false) == Approx(0.25));
  CHECK(task_seconds(rates, 2, "alpha", 4, true) == Approx(2.0));
  CHECK(std::isinf(task_seconds(rates, 0, "beta", 4, false)));  // unknown job type

  // 4 tasks on 2 fast GPUs of one server: 2 per GPU x 0.25 s = 0.5 s per step.
  const auto a = part(0, 0, 2, 4);
  CHECK(tasks_per_gpu(a) == 2);
  CHECK(split_step_seconds(rates, j, {&a}) == Approx(0.5));
  CHECK(split_rate(rates, j, {&a}) == Approx(2.0));
  // All 4 on one fast GPU: 4 x 0.25 = 1 s.
  const auto b = part(0, 0, 1, 4);
  CHECK(split_step_seconds(rates, j, {&b}) == Approx(1.0));
  // 3 tasks on a fast GPU + 1 on a slow one: spans servers, so 0.5 s and 2 s per task;
  // max(3 x 0.5, 1 x 2) = 2 s.
  const auto c1 = part(0, 0, 1, 3), c2 = part(0, 2, 1, 1, 1);
  CHECK(spans_servers({&c1, &c2}));
  CHECK(split_step_seconds(rates, j, {&c1, &c2}) == Approx(2.0));
  // 3 tasks on 2 fast GPUs: the busiest runs ceil(3/2) = 2, i.e. 1 s; the slow GPU's 2 s
  // still decides.
  const auto d1 = part(0, 0, 2, 3);
  CHECK(tasks_per_gpu(d1) == 2);
  CHECK(split_step_seconds(rates, j, {&d1, &c2}) == Approx(2.0));
  // A split that is a gang (K tasks on K GPUs of one server) runs at the gang's rate.
  const job g = make_job(1, "alpha", 2, 100);
  const auto e = part(1, 0, 2, 2);
  sim_executor exec(cl, split_table(), 0);
  CHECK(split_rate(rates, g, {&e}) == Approx(exec.rate(g, {{0, 2}})));
  CHECK(split_rate(rates, g, {&e}) == Approx(3.0));
  // No parts, or a server without an estimate: no rate.
  CHECK(split_rate(rates, j, {}) == 0.0);
  const job unknown = make_job(2, "beta", 4, 10);
  CHECK(split_rate(rates, unknown, {&a}) == 0.0);
}

TEST_CASE("simulator: a task split on one server, hand-computed", "[sim][hare][task_split]") {
  // Job 0 (alpha, K = 4, 1000 steps): 4 tasks on f0's 2 GPUs = 2 steps/s (above). Round
  // [0, 360): 720 steps; 280 left take 140 s: finish at 500. GPU-seconds 2 x 500 = 1000.
  const auto cl = two_servers();
  const auto table = split_table();
  std::vector<job> jobs = {make_job(0, "alpha", 4, 1000)};
  fixed_plan pol({part(0, 0, 2, 4)});
  auto r = simulate(cl, table, jobs, pol, sim_config{});
  REQUIRE(r);
  REQUIRE(r->complete);
  CHECK(r->jobs[0].finish == Approx(500));
  CHECK(r->jobs[0].run_time == Approx(500));
  CHECK(r->jobs[0].gpu_seconds == Approx(1000));
  CHECK(r->rounds[0].busy_gpus == 2);
  CHECK(r->rounds[0].idle_gpus == 6);

  // With a 10 s restart cost: only the first round loses it (the same split again is no
  // move): 350 s x 2 = 700 steps, 300 left take 150 s: finish at 510, no restarts.
  sim_config cfg;
  cfg.restart_cost = 10;
  auto r2 = simulate(cl, table, jobs, pol, cfg);
  REQUIRE(r2);
  CHECK(r2->jobs[0].finish == Approx(510));
  CHECK(r2->jobs[0].restarts == 0);
}

TEST_CASE("simulator: a task split over two GPU types, hand-computed", "[sim][hare][task_split]") {
  // 3 tasks on one fast GPU + 1 on one slow GPU: 2 s per step (above), 0.5 steps/s. 100
  // steps take 200 s: finish at 200, on 2 GPUs: 400 GPU-seconds. Job 1 (alpha, K = 2, 30
  // steps) shares f0's other GPU with both its tasks: 2 x 1/3 s per step, 1.5 steps/s, 20 s.
  const auto cl = two_servers();
  const auto table = split_table();
  std::vector<job> jobs = {make_job(0, "alpha", 4, 100), make_job(1, "alpha", 2, 30)};
  fixed_plan pol({part(0, 0, 1, 3), part(0, 2, 1, 1, 1), part(1, 0, 1, 2)});
  auto r = simulate(cl, table, jobs, pol, sim_config{});
  REQUIRE(r);
  REQUIRE(r->complete);
  CHECK(r->jobs[0].finish == Approx(200));
  CHECK(r->jobs[0].gpu_seconds == Approx(400));
  CHECK(r->jobs[1].finish == Approx(20));
  CHECK(r->jobs[1].gpu_seconds == Approx(20));
  CHECK(r->rounds[0].busy_gpus == 3);
  auto m = compute_metrics(r.value());
  CHECK(m.makespan == Approx(200));
}

TEST_CASE("validate_plan: task splits must sum to K, one task per GPU at least, fit",
          "[snapshot][hare][task_split]") {
  const auto cl = two_servers();
  std::vector<job> jobs = {make_job(0, "alpha", 4, 100)};
  const snapshot s = test::make_snapshot(cl, jobs, {{4.0, 1.0}});
  auto check = [&](std::vector<assignment> as) {
    round_plan p;
    p.assignments = std::move(as);
    return validate_plan(s, p, "pol");
  };
  CHECK(check({part(0, 0, 2, 3), part(0, 2, 1, 1, 1)}));
  CHECK(check({part(0, 0, 2, 4)}));                    // one part holding all K tasks
  CHECK(check({part(0, 0, 1, 2), part(0, 0, 1, 2)}));  // two parts on one server

  auto e = check({part(0, 0, 2, 2), part(0, 2, 1, 1, 1)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message ==
        "pol placed 3 tasks per step of job 0 over 2 placements; they must sum to its scale "
        "factor 4");
  e = check({part(0, 0, 2, 5)});
  REQUIRE_FALSE(e);
  CHECK_THAT(e.err().message, Catch::Contains("placed 5 tasks per step of job 0"));
  e = check({part(0, 0, 2, 1), part(0, 2, 1, 3, 1)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message ==
        "pol gave job 0 2 GPUs for 1 tasks per step (every GPU of a placement must run a task)");
  e = check({part(0, 0, 2, 0), part(0, 2, 2, 2, 1)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message ==
        "pol placed job 0 twice (a task split needs tasks > 0 on every placement)");
  e = check({part(0, 0, 2, 2), part(0, 0, 1, 2)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol over-filled server f0");
  e = check({part(0, 0, 1, -1)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol gave job 0 -1 tasks per step");
  e = check({part(7, 0, 1, 4)});
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol placed job 7, which is not active");

  // Without the jobs (the cluster-only form), the sum cannot be checked, the rest can.
  round_plan p;
  p.assignments = {part(0, 0, 2, 2), part(0, 2, 1, 1, 1)};
  CHECK(validate_plan(cl, p, "pol"));
  p.assignments = {part(0, 0, 2, 1)};
  CHECK_FALSE(validate_plan(cl, p, "pol"));
}

TEST_CASE("simulator: a split whose tasks do not sum to K is refused", "[sim][hare][task_split]") {
  const auto cl = two_servers();
  std::vector<job> jobs = {make_job(0, "alpha", 4, 100)};
  fixed_plan pol({part(0, 0, 2, 2), part(0, 2, 1, 1, 1)});
  auto r = simulate(cl, split_table(), jobs, pol, sim_config{});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("fixed placed 3 tasks per step of job 0"));
}
