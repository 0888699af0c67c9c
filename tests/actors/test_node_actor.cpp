// Tests of a node's executor (actors/copy_round.cpp): the speed factor throttles steps (not
// on real GPUs), state moves through checkpoints bit for bit, the budget and total steps bound
// a round, an unusable checkpoint falls back (never loaded, never fatal), a stale writer is
// fenced off, a failed write is reported.
#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "actor_support.hpp"
#include "runtime/node/train/checkpoint.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

/// Job 4's order writing to `path`, resuming from `resume_path` at `resume` ("" = fresh).
start_copy order(const std::string& path, std::int64_t total, std::int64_t resume,
                 const std::string& resume_path = "") {
  start_copy c;
  c.job = 4;
  c.kind = "softmax_regression";
  c.seed = 11;
  c.total_steps = total;
  c.resume_step = resume;
  c.resume_path = resume_path;
  c.step_time = 0.02;
  c.checkpoint_path = path;
  return c;
}

/// Runs job 4 (25 steps in all) from step 0 to `steps` in round `round`, checkpointed at `path`.
void checkpoint_at(const std::string& path, std::int64_t steps, std::int64_t round) {
  copy_slot s;
  s.order = order(path, 25, 0);
  s.order.step_budget = steps;
  s.round = round;
  run_copy_round(s, train::builtin_trainables(), 1.0, 5.0, {});
  REQUIRE(s.error.empty());
  REQUIRE(s.checkpointed);
}

/// Flips one payload byte of `path` in place.
void flip_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(train::checkpoint_header_size + 5));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(train::checkpoint_header_size + 5));
  f.put(static_cast<char>(c ^ 0x01));
}

/// Runs job 4 to its end from `o` in round 2 on slot `s`.
void resume_round(copy_slot& s, const start_copy& o) {
  s.order = o;
  s.round = 2;
  run_copy_round(s, train::builtin_trainables(), 1.0, 5.0, {});
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
    CHECK(slot.steps <= expect);  // the throttle: never faster than its speed allows
    // A busy host loses steps to scheduling: the slack grows with the suite's time scale.
    CHECK(slot.steps >= expect - 2 * tessera::test::time_scale());
    CHECK(wall <= 0.6 + 0.2 * tessera::test::time_scale());
    CHECK(slot.checkpointed);
    CHECK(slot.ema_throughput ==
          Approx(50.0 * speed).epsilon(tessera::test::loaded_tolerance(0.2)));
  }
}

TEST_CASE("a copy on a node with real GPUs is not throttled: its rate is what it measures",
          "[actors][node][gpu]") {
  temp_dir dir("unthrottled");
  const auto kinds = train::builtin_trainables();
  // The same order as above at speed 0.25 would make 7 steps in 0.6 s; with no throttle a
  // step of this small model takes well under its declared 0.02 s.
  copy_slot slot;
  slot.order = order(dir.file("job-4.ckpt"), 100000, 0);
  slot.round = 0;
  const auto t0 = std::chrono::steady_clock::now();
  run_copy_round(slot, kinds, std::nullopt, 0.6, {});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("steps " << slot.steps << " wall " << wall << " rate " << slot.ema_throughput);
  CHECK(slot.error.empty());
  CHECK(slot.steps > 3 * 30);
  CHECK(slot.ema_throughput > 3 * 50.0);
  CHECK(wall <= 0.6 + 0.2);  // the last step's time keeps it within the round
  CHECK(slot.checkpointed);
}

TEST_CASE("on a node with real GPUs a kind taking a device runs on the copy's GPU",
          "[actors][node][gpu]") {
  temp_dir dir("device");
  // "on_gpu" takes the "device" key (as the CUDA MLP does) and records it; the CPU kinds
  // refuse the key, so they are made without it.
  auto seen = std::make_shared<std::vector<double>>();
  auto kinds = train::builtin_trainables();
  const auto base = train::builtin_trainables();
  REQUIRE(kinds.add(
      "on_gpu", "records its device",
      [seen, base](std::uint64_t seed,
                   const train::trainable_config& c) -> result<std::unique_ptr<train::trainable>> {
        auto rest = c;
        seen->push_back(rest.count("device") ? rest.at("device") : -1.0);
        rest.erase("device");
        return base.make("softmax_regression", seed, rest);
      },
      [](std::uint64_t, const train::trainable_config&) { return status{}; }));
  for (const std::string kind : {"on_gpu", "softmax_regression"}) {
    copy_slot slot;
    slot.order = order(dir.file(kind + ".ckpt"), 5, 0);
    slot.order.kind = kind;
    slot.devices = {3};
    slot.round = 0;
    run_copy_round(slot, kinds, std::nullopt, 5.0, {});
    INFO(kind << ": " << slot.error);
    CHECK(slot.error.empty());
    CHECK(slot.steps == 5);
  }
  REQUIRE(seen->size() == 1);
  CHECK(seen->front() == 3.0);
  // A job naming its device keeps it; a node without real GPUs (no indices) adds none.
  for (const bool named : {true, false}) {
    copy_slot slot;
    slot.order = order(dir.file(std::string("named") + (named ? "1" : "0") + ".ckpt"), 5, 0);
    slot.order.kind = "on_gpu";
    if (named)
      slot.order.config = {{"device", 1.0}};
    else
      slot.devices.clear();
    slot.round = 0;
    run_copy_round(slot, kinds, std::nullopt, 5.0, {});
    CHECK(slot.error.empty());
  }
  REQUIRE(seen->size() == 3);
  CHECK((*seen)[1] == 1.0);
  CHECK((*seen)[2] == -1.0);
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
  b.order = order(dir.file("job-4.r1.ckpt"), 25, 10, path);
  b.round = 1;
  std::int64_t started_at = -1;
  run_copy_round(b, kinds, 1.0, 5.0, [&](std::int64_t s) { started_at = s; });
  REQUIRE(b.error.empty());
  CHECK(b.source == state_source::resume);
  CHECK(b.bad_files.empty());
  CHECK(started_at == 10);
  CHECK(b.steps == 15);
  CHECK(b.finished);
  CHECK(b.accuracy > 0.5);
  REQUIRE(b.model);
  CHECK(same_bits(b.model->params(), uninterrupted("softmax_regression", 11, 25)));
}

TEST_CASE("a copy whose checkpoint is corrupt, truncated or deleted falls back and says so",
          "[actors][node][fallback]") {
  temp_dir dir("fallback");
  const auto older = dir.file("job-4.r0.ckpt"), newer = dir.file("job-4.r1.ckpt");
  const auto reference = uninterrupted("softmax_regression", 11, 25);
  struct damage {
    std::string name;
    std::function<void()> apply;
    std::string why;  ///< in the reported reason
  };
  const std::vector<damage> cases = {
      {"a flipped byte", [&] { flip_byte(newer); }, "payload checksum mismatch"},
      {"truncated", [&] { std::filesystem::resize_file(newer, 30); }, "truncated"},
      {"deleted", [&] { std::filesystem::remove(newer); }, "cannot open checkpoint"},
  };
  for (const auto& d : cases) {
    INFO(d.name);
    checkpoint_at(older, 5, 0);
    checkpoint_at(newer, 10, 1);
    d.apply();
    auto o = order(dir.file("job-4.r2.ckpt"), 25, 10, newer);
    o.fallback_path = older;
    o.fallback_step = 5;
    std::int64_t started_at = -1;
    copy_slot s;
    s.order = o;
    s.round = 2;
    run_copy_round(s, train::builtin_trainables(), 1.0, 5.0,
                   [&](std::int64_t step) { started_at = step; });
    REQUIRE(s.error.empty());  // the run goes on: nothing fatal
    CHECK(s.source == state_source::fallback);
    CHECK(s.bad_files == std::vector<std::string>{newer});
    CHECK(s.source_why.find(newer + ": ") == 0);
    CHECK(s.source_why.find(d.why) != std::string::npos);
    CHECK(started_at == 5);  // from the previous good checkpoint, not the bad one
    CHECK(s.steps == 20);
    CHECK(s.checkpointed);
    REQUIRE(s.model);
    CHECK(same_bits(s.model->params(), reference));  // the bad state was never loaded
  }
}

TEST_CASE("a copy with no usable checkpoint restarts from scratch", "[actors][node][fallback]") {
  temp_dir dir("scratch");
  const auto older = dir.file("job-4.r0.ckpt"), newer = dir.file("job-4.r1.ckpt");
  checkpoint_at(older, 5, 0);
  checkpoint_at(newer, 10, 1);
  flip_byte(newer);
  std::filesystem::resize_file(older, 7);
  auto o = order(dir.file("job-4.r2.ckpt"), 25, 10, newer);
  o.fallback_path = older;
  o.fallback_step = 5;
  copy_slot s;
  resume_round(s, o);
  REQUIRE(s.error.empty());
  CHECK(s.source == state_source::scratch);
  CHECK(s.bad_files == std::vector<std::string>{newer, older});
  CHECK(s.start_step == 0);
  CHECK(s.steps == 25);
  REQUIRE(s.model);
  CHECK(same_bits(s.model->params(), uninterrupted("softmax_regression", 11, 25)));

  // Only a resume file, and it is gone: from scratch too.
  copy_slot lone;
  resume_round(lone, order(dir.file("job-4.r3.ckpt"), 25, 10, dir.file("gone.ckpt")));
  CHECK(lone.error.empty());
  CHECK(lone.source == state_source::scratch);
  CHECK(lone.start_step == 0);
  // No checkpoint expected: a fresh start, not a restart.
  copy_slot fresh;
  resume_round(fresh, order(dir.file("job-4.r4.ckpt"), 25, 0));
  CHECK(fresh.source == state_source::fresh);
  CHECK(fresh.bad_files.empty());
}

TEST_CASE("a checkpoint of another job or at another step is not loaded",
          "[actors][node][fallback]") {
  temp_dir dir("mismatch");
  const auto older = dir.file("job-4.r0.ckpt"), newer = dir.file("job-4.r1.ckpt");
  checkpoint_at(older, 5, 0);
  checkpoint_at(newer, 10, 1);
  auto o = order(dir.file("job-4.r2.ckpt"), 25, 12, newer);  // confirmed at 12, holds 10
  o.fallback_path = older;
  o.fallback_step = 5;
  copy_slot s;
  resume_round(s, o);
  CHECK(s.source == state_source::fallback);
  CHECK(s.source_why == newer + ": at step 10, confirmed at step 12");

  auto other = order(dir.file("job-5.r2.ckpt"), 25, 10, newer);
  other.job = 5;
  copy_slot t;
  resume_round(t, other);
  CHECK(t.source == state_source::scratch);
  CHECK(t.source_why == newer + ": holds job 4, expected 5");
}

TEST_CASE("a stale writer's checkpoint is refused by the fence, a failed write is reported",
          "[actors][node][fence]") {
  temp_dir dir("fence");
  const auto kinds = train::builtin_trainables();
  const auto fence = dir.file("job-4.fence");
  REQUIRE(train::write_fence(fence, 8));
  copy_slot stale;
  stale.order = order(dir.file("job-4.r3.ckpt"), 25, 0);
  stale.order.fence_path = fence;
  stale.order.epoch = 7;  // dispatched before the fence moved on
  stale.round = 3;
  bool before_rename = false;
  copy_hooks hooks;
  hooks.before_checkpoint_rename = [&](const start_copy& o, std::int64_t round) {
    before_rename = o.job == 4 && round == 3;
  };
  run_copy_round(stale, kinds, 1.0, 0.2, {}, nullptr, 0, hooks);
  CHECK(before_rename);
  CHECK(stale.fenced);
  CHECK_FALSE(stale.checkpointed);
  CHECK(stale.retry);  // its round is lost; the run goes on
  CHECK(stale.error.find("holds epoch 8, newer than this writer's 7") != std::string::npos);
  CHECK(dir.entries() == std::vector<std::string>{"job-4.fence"});  // nothing published

  copy_slot current;
  current.order = stale.order;
  current.order.epoch = 8;
  current.round = 3;
  run_copy_round(current, kinds, 1.0, 0.2, {}, nullptr, 0, hooks);
  CHECK(current.checkpointed);
  CHECK_FALSE(current.fenced);
  auto h = train::read_checkpoint_header(dir.file("job-4.r3.ckpt"));
  REQUIRE(h);
  CHECK(h->epoch == 8);
  CHECK(h->round == 3);

  // A full directory: the round ran, its checkpoint is not written, nothing is fatal.
  copy_slot full;
  full.order = order(dir.file("job-4.r4.ckpt"), 25, 0);
  full.round = 4;
  copy_hooks no_space;
  no_space.checkpoint_errno = [](const start_copy&, std::int64_t) { return ENOSPC; };
  run_copy_round(full, kinds, 1.0, 0.2, {}, nullptr, 0, no_space);
  CHECK(full.error.empty());
  CHECK_FALSE(full.checkpointed);
  CHECK(full.steps > 0);
  CHECK(full.checkpoint_error.find("No space left on device") != std::string::npos);
  CHECK_FALSE(full.model);  // ahead of every checkpoint: the next round loads one
  CHECK_FALSE(std::filesystem::exists(dir.file("job-4.r4.ckpt")));
}

TEST_CASE("a copy of an unknown kind fails", "[actors][node]") {
  temp_dir dir("unknown");
  copy_slot bad;
  bad.order = order(dir.file("x.ckpt"), 25, 0);
  bad.order.kind = "no_such_kind";
  run_copy_round(bad, train::builtin_trainables(), 1.0, 1.0, {});
  CHECK(bad.error.find("no_such_kind") != std::string::npos);
  CHECK_FALSE(bad.checkpointed);
}

TEST_CASE("the two copies of a pair step at their speed shares side by side",
          "[actors][node][packing]") {
  temp_dir dir("pair");
  const auto kinds = train::builtin_trainables();
  // 0.6 s at 0.02 s/step on a speed-1.0 node: 24 steps at share 0.8, 12 at share 0.4.
  copy_slot a, b;
  a.order = order(dir.file("job-4.ckpt"), 1000, 0);
  a.order.partner = 5;
  a.order.speed_share = 0.8;
  b.order = order(dir.file("job-5.ckpt"), 1000, 0);
  b.order.job = 5;
  b.order.seed = 12;
  b.order.partner = 4;
  b.order.speed_share = 0.4;
  std::thread ta([&] { run_copy_round(a, kinds, 1.0, 0.6, {}); });
  std::thread tb([&] { run_copy_round(b, kinds, 1.0, 0.6, {}); });
  ta.join();
  tb.join();
  INFO("steps " << a.steps << " and " << b.steps);
  CHECK(a.error.empty());
  CHECK(b.error.empty());
  // Never faster than the share allows; a busy host loses steps to scheduling, more
  // under a larger time scale (ASan, 2 cores shared with other tests).
  const double slack = 2 * tessera::test::time_scale();
  CHECK(a.steps <= 24);
  CHECK(a.steps >= 24 - slack);
  CHECK(b.steps <= 12);
  CHECK(b.steps >= 12 - slack);
  CHECK(static_cast<double>(a.steps) / static_cast<double>(b.steps) ==
        Approx(2.0).epsilon(tessera::test::loaded_tolerance(0.2)));
  CHECK(a.ema_throughput == Approx(50.0 * 0.8).epsilon(tessera::test::loaded_tolerance(0.2)));
}
