// The pieces of a program copy's round that are plain functions: its orders (dispatch_plan
// for kind "program"), its environment, its GPU indices, the mean of forked copies' buffers.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <thread>

#include "actors/dispatch.hpp"
#include "actors/program_average.hpp"
#include "actors/program_round.hpp"
#include "runtime/node/comm/local_aggregator.hpp"

using namespace tessera;
using namespace tessera::actors;

namespace {

cluster servers(const std::vector<std::pair<int, double>>& gpus_speed) {
  std::vector<server> sv;
  for (std::size_t i = 0; i < gpus_speed.size(); ++i) {
    server s;
    s.name = "n" + std::to_string(i);
    s.gpu_type = i % 2 ? "k80" : "v100";
    s.gpus = gpus_speed[i].first;
    s.speed = gpus_speed[i].second;
    sv.push_back(s);
  }
  return make_cluster(std::move(sv));
}

run_job program_job(job_id id, int scale, double steps, double step_time) {
  run_job j;
  j.spec.id = id;
  j.spec.job_type = "program";
  j.spec.scale_factor = scale;
  j.spec.total_steps = steps;
  j.kind = program_kind;
  j.step_time = step_time;
  j.program.command = {"python3", "train.py"};
  j.program.workdir = "/work/dir";
  j.program.env = {{"A", "1"}};
  j.program.grace_seconds = 7;
  return j;
}

dispatch_context context(const cluster& cl) {
  dispatch_context c;
  c.configured = &cl;
  for (std::size_t r = 0; r < cl.servers.size(); ++r) c.live_ranks.push_back(static_cast<int>(r));
  c.can_sync = true;
  c.round = 4;
  c.round_length = 2;
  c.report_grace = 6;
  c.checkpoint_dir = "/ckpt";
  c.hosts = {"host-a", "host-b", "host-c"};
  c.master_port_base = 30000;
  return c;
}

}  // namespace

TEST_CASE("a program copy's orders carry its command, directory and lease", "[program][dispatch]") {
  const cluster cl = servers({{2, 1.0}, {2, 0.5}, {1, 1.0}});
  const run_job j = program_job(5, 1, 100, 0.1);
  dispatch_job dj{&j, 40, 0, nullptr};
  round_plan p;
  p.assignments.push_back(assignment{5, 0, 0, {{1, 1}}, 0, -1});
  auto orders = dispatch_plan(
      p, context(cl), [&](std::int64_t) { return &dj; }, "pol");
  REQUIRE(orders);
  REQUIRE(orders->at(1).copies.size() == 1);
  const auto& o = orders->at(1).copies[0];
  CHECK(o.is_program());
  CHECK(o.checkpoint_path == "/ckpt/job-5");
  CHECK(o.program.command == j.program.command);
  CHECK(o.program.workdir == "/work/dir");
  CHECK(o.program.env == j.program.env);
  CHECK(o.program.grace == 7);
  CHECK(o.program.lease_steps == -1);  // one process: its lease is the round's time
  CHECK(o.program.master_addr == "host-b");
  CHECK(o.program.master_port >= 30000);
  CHECK(o.program.master_port < 30000 + 4096);
}

TEST_CASE("a program copy of several processes gets one lease in steps on every part",
          "[program][dispatch]") {
  const cluster cl = servers({{2, 1.0}, {2, 0.5}, {1, 1.0}});
  const run_job j = program_job(3, 3, 1000, 0.1);
  dispatch_job dj{&j, 0, 0, nullptr};
  round_plan p;  // a task split: 2 tasks on rank 0 (speed 1), 1 on rank 1 (speed 0.5)
  p.assignments.push_back(assignment{3, 0, -1, {{0, 2}}, 2, -1});
  p.assignments.push_back(assignment{3, 0, -1, {{1, 1}}, 1, -1});
  auto orders = dispatch_plan(
      p, context(cl), [&](std::int64_t) { return &dj; }, "pol");
  REQUIRE(orders);
  const auto& a = orders->at(0).copies.at(0);
  const auto& b = orders->at(1).copies.at(0);
  // The slowest part: one task at speed 0.5 takes 0.2 s; a 2 s round holds 10 steps.
  CHECK(a.program.lease_steps == 10);
  CHECK(b.program.lease_steps == 10);
  CHECK(a.program.master_addr == "host-a");  // the copy's first part
  CHECK(b.program.master_addr == "host-a");
  CHECK(a.program.master_port == b.program.master_port);
  CHECK(a.shard_begin == 0);
  CHECK(b.shard_begin == 2);

  // Once measured on a GPU type, the measured rate sets the lease.
  std::map<std::string, double> measured{{"k80", 2.5}, {"v100", 100}};
  dj.measured = &measured;
  auto again = dispatch_plan(
      p, context(cl), [&](std::int64_t) { return &dj; }, "pol");
  REQUIRE(again);
  CHECK(again->at(0).copies.at(0).program.lease_steps == 5);  // 2 s x 2.5 steps/s
}

TEST_CASE("a program's environment is torch.distributed's and the lease's", "[program]") {
  start_copy o;
  o.job = 12;
  o.copy = 1;
  o.kind = program_kind;
  o.scale = 4;
  o.shard_begin = 2;
  o.shards = 2;
  o.fork_ranks = {0, 3};
  o.checkpoint_path = "/ckpt/job-12";
  o.program.env = {{"USER_VAR", "x"}};
  o.program.master_addr = "host-a";
  o.program.master_port = 31234;
  program_context ctx;
  ctx.devices = {1, 2};
  const auto env = program_environment(o, 1, ctx, "/tmp/d/lease.sock");
  const std::map<std::string, std::string> want{{"USER_VAR", "x"},
                                                {"RANK", "3"},
                                                {"WORLD_SIZE", "4"},
                                                {"LOCAL_RANK", "1"},
                                                {"LOCAL_WORLD_SIZE", "2"},
                                                {"MASTER_ADDR", "host-a"},
                                                {"MASTER_PORT", "31234"},
                                                {"CUDA_VISIBLE_DEVICES", "2"},
                                                {"TESSERA_JOB_ID", "12"},
                                                {"TESSERA_COPY", "1"},
                                                {"TESSERA_COPIES", "2"},
                                                {"TESSERA_CHECKPOINT_DIR", "/ckpt/job-12"},
                                                {"TESSERA_LEASE", "/tmp/d/lease.sock"}};
  CHECK(env == want);
}

TEST_CASE("a program's CUDA_VISIBLE_DEVICES is its own GPU, as the node's process names it",
          "[program][gpu]") {
  start_copy o;
  o.kind = program_kind;
  o.scale = 3;
  o.shards = 3;
  program_context ctx;
  // Three tasks stacked on two GPUs: the third shares the first's.
  ctx.devices = {1, 2};
  CHECK(program_environment(o, 0, ctx, "s").at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK(program_environment(o, 2, ctx, "s").at("CUDA_VISIBLE_DEVICES") == "1");
  // The node process itself sees only some of the machine's GPUs: its ordinal 2 is "6".
  ctx.node_visible = "4,5,6";
  CHECK(program_environment(o, 1, ctx, "s").at("CUDA_VISIBLE_DEVICES") == "6");
  // A node without real GPUs hides every GPU from its programs.
  ctx.devices.clear();
  CHECK(program_environment(o, 0, ctx, "s").at("CUDA_VISIBLE_DEVICES") == "");
}

TEST_CASE("plan_merge: who is in a forked program's mean, with what weight", "[program]") {
  // Three copies of 2 values, 5 steps each: the plain mean.
  auto p = plan_merge({{0, true, 5, 2}, {1, true, 5, 2}, {2, true, 5, 2}}, "mean", 7);
  CHECK(p.count == 2);
  CHECK(p.copies == 3);
  CHECK(p.steps == 15);
  CHECK(p.total == 3);
  // An absent copy (its program did not ask) is not in it; the others carry on.
  p = plan_merge({{0, true, 5, 2}, {1, false, 0, 0}, {2, true, 9, 2}}, "mean", 7);
  CHECK(p.weight == std::vector<double>{1, 0, 1});
  CHECK(p.copies == 2);
  CHECK(p.steps == 14);
  // A copy with another size is left out, and told why (naming the job, copies and sizes).
  p = plan_merge({{0, true, 5, 2}, {1, true, 5, 3}}, "mean", 7);
  CHECK(p.weight == std::vector<double>{1, 0});
  CHECK(p.left_out[1] ==
        "job 7 copy 1 passed 3 values to average, copy 0 passed 2: it is "
        "left out of the mean");
  // Weighted by steps: weights 3 and 1.
  p = plan_merge({{0, true, 3, 1}, {1, true, 1, 1}}, "weighted", 7);
  CHECK(p.weight == std::vector<double>{3, 1});
  CHECK(p.total == 4);
  // Weighted with no steps made falls back to equal weights.
  p = plan_merge({{0, true, 0, 1}, {1, true, 0, 1}}, "weighted", 7);
  CHECK(p.weight == std::vector<double>{1, 1});
  // Nobody asked: an empty plan.
  CHECK(plan_merge({{0, false, 0, 0}, {1, false, 0, 0}}, "mean", 7).copies == 0);
}

namespace {

/// Runs merge_copies on `n` threads of one local world, copy c bringing `data[c]` (absent
/// when empty); returns every copy's buffer and outcome.
std::vector<std::pair<std::vector<float>, merge_outcome>> merge_on_threads(
    std::vector<std::vector<float>> data, std::vector<std::int64_t> steps,
    const std::string& rule) {
  const int n = static_cast<int>(data.size());
  auto world = std::make_shared<comm::local_world>(n);
  comm::group all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  std::vector<std::pair<std::vector<float>, merge_outcome>> out(data.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      comm::local_aggregator agg(world, r);
      auto& mine = data[static_cast<std::size_t>(r)];
      const copy_offer me{r, !mine.empty(), steps[static_cast<std::size_t>(r)], mine.size()};
      comm::reduce_options opt;
      opt.timeout = std::chrono::milliseconds(10000);
      auto m =
          merge_copies(agg, all, me, mine.empty() ? nullptr : mine.data(), nullptr, rule, 7, opt);
      REQUIRE(m);
      out[static_cast<std::size_t>(r)] = {mine, *m};
    });
  for (auto& t : threads) t.join();
  return out;
}

}  // namespace

TEST_CASE("merge_copies averages the copies' buffers in place, leaving absent ones out",
          "[program]") {
  auto got = merge_on_threads({{1, 2}, {3, 4}, {5, 6}}, {5, 5, 5}, "mean");
  for (const auto& [buf, outcome] : got) {
    CHECK(buf == std::vector<float>{3, 4});
    CHECK(outcome.copies == 3);
    CHECK(outcome.steps == 15);
    CHECK(outcome.left_out.empty());
  }
  // Copy 1's program never asked: the other two carry on with their mean.
  got = merge_on_threads({{1, -2}, {}, {3, 4}}, {5, 0, 9}, "mean");
  CHECK(got[0].first == std::vector<float>{2, 1});
  CHECK(got[2].first == std::vector<float>{2, 1});
  CHECK(got[0].second.copies == 2);
  // Weighted by steps: 1 x 3/4 + 5 x 1/4 = 2.
  got = merge_on_threads({{1}, {5}}, {3, 1}, "weighted");
  CHECK(got[0].first == std::vector<float>{2});
  CHECK(got[1].first == std::vector<float>{2});
  // A copy of another size keeps its buffers and is told why.
  got = merge_on_threads({{1, 2}, {9, 9, 9}}, {1, 1}, "mean");
  CHECK(got[0].first == std::vector<float>{1, 2});
  CHECK(got[1].first == std::vector<float>{9, 9, 9});
  CHECK(got[1].second.left_out.find("copy 1 passed 3 values") != std::string::npos);
  // Property: the mean of identical copies of values on a coarse grid is the copy, exactly.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> v(1 + rng() % 64);
    for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 8.0f;
    const std::size_t n = 1 + rng() % 4;
    got = merge_on_threads(std::vector<std::vector<float>>(n, v), std::vector<std::int64_t>(n, 7),
                           "mean");
    for (const auto& [buf, outcome] : got) CHECK(buf == v);
  }
}
