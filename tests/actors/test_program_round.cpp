// The pieces of a program copy's round that are plain functions: its orders (dispatch_plan
// for kind "program"), its environment, its GPU indices, the mean of forked copies' buffers.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "actors/dispatch.hpp"
#include "actors/program_round.hpp"

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

TEST_CASE("average_copies is the exact mean of the copies that sent buffers", "[program]") {
  using copies = std::vector<std::pair<std::int64_t, std::vector<float>>>;
  CHECK(average_copies(copies{{5, {1, 2}}, {5, {3, 4}}, {5, {5, 6}}}, "mean") ==
        std::vector<float>{3, 4});
  // An absent copy (no data) is left out.
  CHECK(average_copies(copies{{5, {1, -2}}, {0, {}}, {9, {3, 4}}}, "mean") ==
        std::vector<float>{2, 1});
  // Weighted by steps: 1 x 3/4 + 5 x 1/4 = 2.
  CHECK(average_copies(copies{{3, {1}}, {1, {5}}}, "weighted") == std::vector<float>{2});
  // Weighted with no steps made falls back to the plain mean.
  CHECK(average_copies(copies{{0, {1}}, {0, {5}}}, "weighted") == std::vector<float>{3});
  // Property: the mean of identical copies is the copy, bit for bit.
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 10);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> v(1 + rng() % 64);
    for (auto& x : v) x = nd(rng);
    const int n = 1 + static_cast<int>(rng() % 5);
    copies c(static_cast<std::size_t>(n), {7, v});
    CHECK(average_copies(c, "mean") == v);
  }
}
