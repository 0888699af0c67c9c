// runtime/node/train/fork_merge: the round-end merge of forked copies, through the local aggregator
// backend (threads), against the one-process reference and against hand-derived cases.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include "runtime/node/comm/local_aggregator.hpp"
#include "runtime/node/train/fork_merge.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::train;
using tessera::test::make_trainable;
using tessera::test::same_bits;

namespace {

/// Runs one forked round: copy c (on rank c) makes steps[c] steps from `start`, then all merge
/// under `rule`. Returns the copies after the merge and, in `reference`, the one-process merge
/// of their pre-merge states.
std::vector<std::unique_ptr<trainable>> forked_round(
    const trainable& start, const std::vector<std::int64_t>& steps, fork_merge_rule rule,
    std::pair<std::vector<float>, std::vector<float>>& reference) {
  const int n = static_cast<int>(steps.size());
  std::vector<std::unique_ptr<trainable>> copies;
  std::vector<fork_copy_state> before;
  for (int c = 0; c < n; ++c) {
    copies.push_back(start.clone());
    for (std::int64_t i = 0; i < steps[c]; ++i)
      REQUIRE(copies[c]->train_step_on(2, start.step() + i * n + c).ok());
    before.push_back(
        {copies[c]->params(),
         copies[c]->optimizer_state() ? *copies[c]->optimizer_state() : std::vector<float>{},
         steps[c]});
  }
  reference = fork_merge_reference(before, rule);
  auto world = std::make_shared<comm::local_world>(n);
  comm::group members;
  for (int c = 0; c < n; ++c) members.push_back(c);
  std::vector<status> results(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int c = 0; c < n; ++c)
    threads.emplace_back([&, c] {
      comm::local_aggregator agg(world, c);
      results[c] = fork_merge(*copies[c], {start.step(), steps[c]}, rule, agg, members, {});
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) REQUIRE(r.ok());
  return copies;
}

}  // namespace

TEST_CASE("fork merge: every copy ends with the reference merge, bit for bit", "[train][fork]") {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 12; ++trial) {
    const auto rule = trial % 2 ? fork_merge_rule::weighted : fork_merge_rule::mean;
    const int n = 2 + static_cast<int>(rng() % 3);
    std::vector<std::int64_t> steps;
    std::int64_t total = 0;
    for (int c = 0; c < n; ++c) {
      steps.push_back(static_cast<std::int64_t>(rng() % 6));
      total += steps.back();
    }
    auto start =
        make_trainable(trial % 3 ? "mlp" : "softmax_regression", 10 + trial, {{"train_size", 64}});
    for (int i = 0; i < 3; ++i) REQUIRE(start->train_step(2).ok());  // non-zero momentum
    INFO("trial " << trial << ", rule " << to_string(rule) << ", " << n << " copies");
    std::pair<std::vector<float>, std::vector<float>> ref;
    auto copies = forked_round(*start, steps, rule, ref);
    for (int c = 0; c < n; ++c) {
      INFO("copy " << c);
      CHECK(same_bits(copies[c]->params(), ref.first));
      CHECK(same_bits(*copies[c]->optimizer_state(), ref.second));
      CHECK(copies[c]->step() == start->step() + total);  // the job made every copy's steps
    }
  }
}

TEST_CASE("fork merge: the rules on hand-checked cases", "[train][fork]") {
  // Two copies, parameters {1, 3} and {3, 7}, momentum {0, 2} and {4, 6}.
  std::vector<fork_copy_state> two{{{1, 3}, {0, 2}, 1}, {{3, 7}, {4, 6}, 3}};
  SECTION("mean: plain average of parameters and state") {
    const auto [p, s] = fork_merge_reference(two, fork_merge_rule::mean);
    CHECK(p == std::vector<float>{2, 5});
    CHECK(s == std::vector<float>{2, 4});
  }
  SECTION("weighted: by steps, 1/4 and 3/4") {
    const auto [p, s] = fork_merge_reference(two, fork_merge_rule::weighted);
    CHECK(p == std::vector<float>{2.5f, 6});  // 1/4 + 9/4, 3/4 + 21/4
    CHECK(s == std::vector<float>{3, 5});     // 0 + 3, 1/2 + 9/2
  }
  SECTION("weighted: a copy without steps has no say") {
    two[0].steps = 0;
    const auto [p, s] = fork_merge_reference(two, fork_merge_rule::weighted);
    CHECK(p == two[1].params);
    CHECK(s == two[1].optimizer);
  }
  SECTION("no copy moved: the start state stays") {
    two[0].steps = 0;
    two[1].steps = 0;
    two[1].params = two[0].params;  // (they all still hold the start state)
    const auto [p, s] = fork_merge_reference(two, fork_merge_rule::mean);
    CHECK(p == two[0].params);
  }
}

TEST_CASE("fork merge: identical copies merge to themselves, a lone member is a no-op",
          "[train][fork]") {
  auto start = make_trainable("mlp", 3, {{"train_size", 64}});
  REQUIRE(start->train_step(1).ok());
  // Zero steps everywhere: nothing moves, the step counter stays.
  std::pair<std::vector<float>, std::vector<float>> ref;
  auto copies = forked_round(*start, {0, 0, 0}, fork_merge_rule::mean, ref);
  for (const auto& c : copies) {
    CHECK(same_bits(c->params(), start->params()));
    CHECK(c->step() == start->step());
  }
  // One member: merging with nobody leaves the copy as it trained (weighted weight 1).
  auto world = std::make_shared<comm::local_world>(1);
  comm::local_aggregator agg(world, 0);
  auto lone = start->clone();
  REQUIRE(lone->train_step(1).ok());
  const auto trained = lone->params();
  REQUIRE(fork_merge(*lone, {start->step(), 1}, fork_merge_rule::weighted, agg, {0}, {}).ok());
  CHECK(same_bits(lone->params(), trained));
  CHECK(lone->step() == start->step() + 1);
}

TEST_CASE("fork merge: rule names", "[train][fork]") {
  CHECK(parse_fork_merge_rule("mean") == fork_merge_rule::mean);
  CHECK(parse_fork_merge_rule("weighted") == fork_merge_rule::weighted);
  CHECK_FALSE(parse_fork_merge_rule("sum"));
  CHECK_FALSE(parse_fork_merge_rule(""));
  for (auto r : {fork_merge_rule::mean, fork_merge_rule::weighted})
    CHECK(fork_merge_rule_names().find(to_string(r)) != std::string::npos);
}
