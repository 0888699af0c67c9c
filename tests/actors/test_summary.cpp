// A run's outcome goes through the simulator's metrics code (actors/summary.hpp): the
// mapping from run_summary to schedule_result, checked against metrics worked out by hand.
#include <catch2/catch.hpp>

#include "actors/summary.hpp"

using namespace tessera;
using namespace tessera::actors;

TEST_CASE("a run's metrics are the simulator's metrics of its schedule", "[summary]") {
  run_summary s;
  s.ok = true;
  job_summary a;
  a.id = 0;
  a.job_type = "mlp";
  a.scale = 1;
  a.total_steps = 60;
  a.finished = true;
  a.arrival = 0;
  a.first_start = 0;
  a.finish = 4;
  a.steps = 60;
  a.run_time = 3;
  a.busy_gpu_seconds = {2, 1};  // per rank
  a.restarts = 1;
  job_summary b = a;
  b.id = 1;
  b.arrival = 1;
  b.finish = 3;
  b.run_time = 1;
  b.busy_gpu_seconds = {0, 1};
  job_summary c = a;  // cancelled: counted as a job, not as finished
  c.id = 2;
  c.finished = false;
  c.canceled = true;
  c.finish = -1;
  c.busy_gpu_seconds = {0, 0};
  s.jobs = {a, b, c};
  s.round_records = {round_record{0, 1, 1, 2, 1}, round_record{1, 2, 0, 2, 0}};
  const auto r = schedule_of(s, "pol", 2);
  REQUIRE(r.jobs.size() == 3);
  CHECK(r.jobs[0].gpu_seconds == 3);
  CHECK(r.jobs[2].finish == -1);
  CHECK(r.end_time == 4);
  CHECK(r.complete);
  const auto m = run_metrics(s, "pol", 2);
  CHECK(m.policy == "pol");
  CHECK(m.jobs == 3);
  CHECK(m.finished == 2);
  CHECK(m.avg_jct == Approx((4.0 + 2.0) / 2));
  CHECK(m.makespan == Approx(4));
  CHECK(m.avg_wait == Approx((1.0 + 1.0) / 2));           // JCT - run time
  CHECK(m.utilisation == Approx((3.0 + 1.0) / (2 * 4)));  // GPU-seconds / (GPUs x makespan)
  CHECK(m.lr_avg == Approx((1.0 / 3 + 1.0 / 1) / 2));
  CHECK(m.fragmentation == Approx(0.5));  // 1 idle GPU while a job waited, over 2 rounds
  CHECK(m.rounds == 2);
}
