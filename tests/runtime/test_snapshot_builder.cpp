// Tests of the round-loop pieces shared by the simulator and the actor runtime
// (runtime/snapshot_builder): plan validation and the policy's view of the active jobs.
#include <catch2/catch.hpp>

#include <vector>

#include "runtime/snapshot_builder.hpp"

using namespace tessera;

TEST_CASE("validate_plan holds every executor's plans to the same rules", "[snapshot]") {
  server a;
  a.name = "a";
  a.gpu_type = "v100";
  a.gpus = 2;
  server b = a;
  b.name = "b";
  const cluster cl = make_cluster({a, b});
  round_plan p;
  p.assignments.push_back(assignment{1, 0, 0, {{0, 2}}, 0, -1});
  p.assignments.push_back(assignment{2, 0, 0, {{1, 1}}, 0, -1});
  CHECK(validate_plan(cl, p, "pol"));
  auto twice = p;
  twice.assignments.push_back(assignment{1, 0, 0, {{1, 1}}, 0, -1});
  auto e = validate_plan(cl, twice, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol placed job 1 twice");
  auto over = p;
  over.assignments.push_back(assignment{3, 0, 0, {{0, 1}}, 0, -1});
  e = validate_plan(cl, over, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol over-filled server a");
  auto invalid = p;
  invalid.assignments.push_back(assignment{4, 0, 0, {{5, 1}}, 0, -1});
  CHECK_FALSE(validate_plan(cl, invalid, "pol"));
}

TEST_CASE("build_snapshot makes the policy's view of the active jobs", "[snapshot]") {
  server a;
  a.gpu_type = "v100";
  a.gpus = 1;
  const cluster cl = make_cluster({a});
  job j;
  j.id = 3;
  j.total_steps = 100;
  std::vector<job_accounting> acc = {job_accounting{&j, 40, 12, 24, {2.5}, 0}};
  round_plan last;
  auto s = build_snapshot(10, 5, cl, acc, &last, 7);
  CHECK(s.now == 10);
  CHECK(s.round_length == 5);
  CHECK(s.cl == &cl);
  CHECK(s.last_plan == &last);
  CHECK(s.job_set_version == 7);
  REQUIRE(s.jobs.size() == 1);
  CHECK(s.jobs[0].spec == &j);
  CHECK(s.jobs[0].remaining_steps == 60);
  CHECK(s.jobs[0].run_time == 12);
  CHECK(s.jobs[0].attained_service == 24);
  CHECK(s.jobs[0].throughput == std::vector<double>{2.5});
  CHECK(s.jobs[0].last_type == 0);
  CHECK_FALSE(check_runnable(j, {0.0}));
  CHECK(check_runnable(j, {0.0, 1.0}));
}
