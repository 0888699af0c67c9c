// Tests of a node's executor (actors/node_actor.cpp): the speed factor throttles steps, state
// moves through checkpoints bit for bit, and the budget and total steps bound a round.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>

#include "actor_support.hpp"
#include "runtime/train/checkpoint.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

start_copy order(const std::string& path, std::int64_t total, std::int64_t resume) {
  start_copy c;
  c.job = 4;
  c.kind = "softmax_regression";
  c.seed = 11;
  c.total_steps = total;
  c.resume_step = resume;
  c.step_time = 0.02;
  c.checkpoint_path = path;
  return c;
}

}  // namespace

TEST_CASE("a node's speed factor throttles its steps", "[actors][node]") {
  temp_dir dir("throttle");
  const auto kinds = train::builtin_trainables();
  // 0.6 s at 0.02 s/step: 30 steps at speed 1.0, 15 at 0.5, 7 at 0.25 (a step that would end
  // past the deadline is not begun).
  for (auto [speed, expect] : {std::pair{1.0, 30}, std::pair{0.5, 15}, std::pair{0.25, 7}}) {
    copy_slot slot;
    slot.order = order(dir.file("job-4-" + std::to_string(expect) + ".ckpt"), 1000, 0);
    slot.round = 0;
    std::int64_t started_at = -1;
    const auto t0 = std::chrono::steady_clock::now();
    run_copy_round(slot, kinds, speed, 0.6, [&](std::int64_t s) { started_at = s; });
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO("speed " << speed << " steps " << slot.steps << " wall " << wall);
    CHECK(slot.error.empty());
    CHECK(started_at == 0);
    CHECK(slot.steps <= expect);
    CHECK(slot.steps >= expect - 2);  // scheduling jitter on a loaded host
    CHECK(wall <= 0.6 + 0.2);
    CHECK(slot.checkpointed);
    CHECK(slot.ema_throughput == Approx(50.0 * speed).epsilon(0.2));
  }
}

TEST_CASE("a copy resumes from a checkpoint bit for bit", "[actors][node]") {
  temp_dir dir("resume");
  const auto kinds = train::builtin_trainables();
  const auto path = dir.file("job-4.ckpt");
  // Round 0 on one "node" (slot a), rounds 1.. on another (slot b) loading the checkpoint.
  copy_slot a;
  a.order = order(path, 25, 0);
  a.order.step_budget = 10;
  a.round = 0;
  run_copy_round(a, kinds, 1.0, 5.0, {});
  REQUIRE(a.error.empty());
  CHECK(a.steps == 10);
  auto h = train::read_checkpoint_header(path);
  REQUIRE(h);
  CHECK(h->job == 4);
  CHECK(h->round == 0);

  copy_slot b;
  b.order = order(path, 25, 10);
  b.round = 1;
  std::int64_t started_at = -1;
  run_copy_round(b, kinds, 1.0, 5.0, [&](std::int64_t s) { started_at = s; });
  REQUIRE(b.error.empty());
  CHECK(started_at == 10);
  CHECK(b.steps == 15);
  CHECK(b.finished);
  CHECK(b.accuracy > 0.5);
  REQUIRE(b.model);
  CHECK(same_bits(b.model->params(), uninterrupted("softmax_regression", 11, 25)));
}

TEST_CASE("a copy refuses a missing or older checkpoint", "[actors][node]") {
  temp_dir dir("missing");
  const auto kinds = train::builtin_trainables();
  copy_slot s;
  s.order = order(dir.file("none.ckpt"), 25, 5);
  run_copy_round(s, kinds, 1.0, 1.0, {});
  CHECK(s.error.find("missing") != std::string::npos);
  CHECK_FALSE(s.checkpointed);

  copy_slot bad;
  bad.order = order(dir.file("x.ckpt"), 25, 0);
  bad.order.kind = "no_such_kind";
  run_copy_round(bad, kinds, 1.0, 1.0, {});
  CHECK(bad.error.find("no_such_kind") != std::string::npos);
}
