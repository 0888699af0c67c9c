// actors/task_layout: which node computes which shards of a job copy, on hand-checked plans.
#include <catch2/catch.hpp>

#include "actors/task_layout.hpp"

using namespace tessera;

namespace {

assignment place(job_id job, std::vector<server_share> shares, int tasks = 0, int copy = 0) {
  assignment a;
  a.job = job;
  a.copy = copy;
  a.shares = std::move(shares);
  a.tasks = tasks;
  return a;
}

}  // namespace

TEST_CASE("spread_tasks: proportional whole tasks, remainders to the largest fractions first",
          "[layout]") {
  CHECK(spread_tasks(4, {2, 2}) == std::vector<int>{2, 2});
  CHECK(spread_tasks(3, {1, 1}) == std::vector<int>{2, 1});  // tie: the earlier bin
  CHECK(spread_tasks(5, {1, 3}) == std::vector<int>{1, 4});  // 1.25 / 3.75
  CHECK(spread_tasks(2, {1, 1, 1}) == std::vector<int>{1, 1, 0});
  CHECK(spread_tasks(0, {4}) == std::vector<int>{0});
}

TEST_CASE("layout: a gang on one server, a gang over servers, a task split", "[layout]") {
  round_plan p;
  p.assignments.push_back(place(1, {{0, 4}}));          // K = 4 gang on server 0
  p.assignments.push_back(place(2, {{3, 1}, {1, 1}}));  // K = 2 gang over 3 and 1
  // Hare split of a K = 8 job: 4 tasks on 1 GPU of server 2 (4 task-times), 3 on 3 GPUs of
  // server 1 (1 each), 1 on server 3.
  p.assignments.push_back(place(3, {{2, 1}}, 4));
  p.assignments.push_back(place(3, {{1, 3}}, 3));
  p.assignments.push_back(place(3, {{3, 1}}, 1));
  const auto layout = layout_copies(p, [](job_id id) { return id == 1 ? 4 : id == 2 ? 2 : 8; });
  REQUIRE(layout.size() == 3);

  REQUIRE(layout[0].parts.size() == 1);
  CHECK(layout[0].parts[0].tasks == 4);
  CHECK(layout[0].parts[0].task_times == 1);

  // Job 2: parts in server order (1, then 3), one shard each.
  REQUIRE(layout[1].parts.size() == 2);
  CHECK(layout[1].parts[0].server == 1);
  CHECK(layout[1].parts[0].shard_begin == 0);
  CHECK(layout[1].parts[1].server == 3);
  CHECK(layout[1].parts[1].shard_begin == 1);

  // Job 3: servers 1, 2, 3 take shards 0-2, 3-6, 7.
  const auto& parts = layout[2].parts;
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].server == 1);
  CHECK(parts[0].tasks == 3);
  CHECK(parts[0].task_times == 1);
  CHECK(parts[1].server == 2);
  CHECK(parts[1].shard_begin == 3);
  CHECK(parts[1].tasks == 4);
  CHECK(parts[1].task_times == 4);
  CHECK(parts[2].shard_begin == 7);
}

TEST_CASE("layout: two pieces of a split on one server merge, copies stay apart", "[layout]") {
  round_plan p;
  // K = 6: 4 tasks on 2 GPUs (2 each) and 2 tasks on 1 GPU (2) of the same server 0.
  p.assignments.push_back(place(5, {{0, 2}}, 4));
  p.assignments.push_back(place(5, {{0, 1}}, 2));
  p.assignments.push_back(place(5, {{1, 2}}, 0, 1));  // copy 1 of the job, a K-GPU gang
  const auto layout = layout_copies(p, [](job_id) { return 6; });
  REQUIRE(layout.size() == 2);
  REQUIRE(layout[0].parts.size() == 1);
  CHECK(layout[0].parts[0].gpus == 3);
  CHECK(layout[0].parts[0].tasks == 6);
  CHECK(layout[0].parts[0].task_times == 2);
  CHECK(layout[1].copy == 1);
  CHECK(layout[1].parts[0].tasks == 6);  // 6 tasks on 2 GPUs: 3 task-times
  CHECK(layout[1].parts[0].task_times == 3);
}
