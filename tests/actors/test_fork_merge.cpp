// Forked copies (HadarE) in the node executor: copies draw disjoint batches, and at the round end
// they merge their states through the aggregator (runtime/node/train/fork_merge.hpp) and all
// continue from the merged state.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <thread>

#include "actor_support.hpp"
#include "runtime/node/train/fork_merge.hpp"
#include "runtime/node/comm/local_aggregator.hpp"
#include "runtime/node/train/checkpoint.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

start_copy forked_order(const std::string& path, int copy, std::vector<std::int32_t> ranks,
                        std::int64_t budget) {
  start_copy c;
  c.job = 9;
  c.copy = copy;
  c.kind = "mlp";
  c.seed = 5;
  c.config = {{"hidden", 8}};
  c.scale = 2;
  c.total_steps = 1000;
  c.resume_step = 0;
  c.step_budget = budget;
  c.step_time = 0.001;
  c.checkpoint_path = path;
  c.fork_ranks = std::move(ranks);
  c.aggregate_timeout = 5;
  return c;
}

}  // namespace

TEST_CASE(
    "forked copies merge to the mean of their parameters and momentum, in rank order, bit for bit",
    "[actors][fork]") {
  temp_dir dir("fork");
  const auto kinds = train::builtin_trainables();
  const auto path = dir.file("job-9.ckpt");
  // Copy c runs on rank ranks[c]; ranks are deliberately not in copy order.
  const std::vector<std::int32_t> ranks{2, 0, 1};
  const std::vector<std::int64_t> budgets{5, 3, 2};
  auto world = std::make_shared<comm::local_world>(3);
  std::vector<std::unique_ptr<copy_slot>> slots;
  for (int c = 0; c < 3; ++c) {
    slots.push_back(std::make_unique<copy_slot>());
    slots[c]->order = forked_order(path, c, ranks, budgets[c]);
    slots[c]->round = 0;
  }
  std::vector<std::thread> threads;
  for (int c = 0; c < 3; ++c)
    threads.emplace_back([&, c] {
      comm::local_aggregator agg(world, ranks[c]);
      run_copy_round(*slots[c], kinds, 1.0, 10.0, {}, &agg);
    });
  for (auto& t : threads) t.join();

  // Reference in one thread: copy c makes its i-th step on batch i * 3 + c from the same
  // initial model; the merge sums the copies in rank order (rank 0 = copy 1, rank 1 = copy 2,
  // rank 2 = copy 0) and divides by 3.
  std::vector<std::unique_ptr<train::trainable>> ref;
  for (int c = 0; c < 3; ++c) {
    auto m = kinds.make("mlp", 5, {{"hidden", 8}});
    REQUIRE(m);
    for (std::int64_t i = 0; i < budgets[c]; ++i)
      REQUIRE(m.value()->train_step_on(2, i * 3 + c).ok());
    ref.push_back(std::move(m.value()));
  }
  // Members in rank order: rank 0 = copy 1, rank 1 = copy 2, rank 2 = copy 0.
  std::vector<train::fork_copy_state> in_rank_order;
  for (int c : {1, 2, 0})
    in_rank_order.push_back({ref[c]->params(), *ref[c]->optimizer_state(), budgets[c]});
  const auto [mean, velocity] =
      train::fork_merge_reference(in_rank_order, train::fork_merge_rule::mean);
  // The copies really diverged before merging (else the test would prove little).
  CHECK_FALSE(same_bits(ref[0]->params(), ref[1]->params()));

  for (int c = 0; c < 3; ++c) {
    INFO("copy " << c);
    REQUIRE(slots[c]->error.empty());
    CHECK(slots[c]->steps == budgets[c]);
    CHECK(slots[c]->model->step() == 10);  // 5 + 3 + 2 steps made by the job
    CHECK(same_bits(slots[c]->model->params(), mean));
    CHECK(same_bits(*slots[c]->model->optimizer_state(), velocity));  // momentum merged too
    CHECK(slots[c]->checkpointed == (c == 0));  // copy 0 writes the merged state
  }
  // The checkpoint holds the merged model: the next round of any copy starts from it.
  auto loaded = kinds.make("mlp", 5, {{"hidden", 8}});
  REQUIRE(loaded);
  auto h = train::load_trainable_checkpoint(path, **loaded);
  REQUIRE(h);
  CHECK((*loaded)->step() == 10);
  CHECK(same_bits((*loaded)->params(), mean));
}

TEST_CASE("a forked copy without an aggregator, or whose siblings never come, fails cleanly",
          "[actors][fork]") {
  temp_dir dir("fork_fail");
  const auto kinds = train::builtin_trainables();
  const auto path = dir.file("job-9.ckpt");
  copy_slot lone;
  lone.order = forked_order(path, 0, {0, 1}, 2);
  run_copy_round(lone, kinds, 1.0, 5.0, {}, nullptr);
  CHECK(lone.error.find("no aggregator") != std::string::npos);
  CHECK_FALSE(lone.checkpointed);

  auto world = std::make_shared<comm::local_world>(2);
  comm::local_aggregator agg(world, 0);
  copy_slot waiting;
  waiting.order = forked_order(path, 0, {0, 1}, 2);
  waiting.order.aggregate_timeout = 0.2;
  run_copy_round(waiting, kinds, 1.0, 5.0, {}, &agg);
  CHECK(waiting.error.find("merging the 2 copies of job 9") != std::string::npos);
  CHECK(waiting.error.find("timed out") != std::string::npos);
  CHECK_FALSE(waiting.checkpointed);
  CHECK_FALSE(std::filesystem::exists(path));
}
