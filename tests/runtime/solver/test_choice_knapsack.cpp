// The multiple-choice knapsack solver (runtime/solver/choice_knapsack.hpp): a hand-worked
// instance, its tie rule, infeasible and too-large instances, and random instances against
// enumeration of every choice and against CBC on the same program.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/solver/choice_knapsack.hpp"
#include "runtime/solver/milp.hpp"

using namespace tessera;

namespace {

/// Cost of `pick` and whether it is feasible (capacities kept, forced items placed).
std::pair<std::int64_t, bool> evaluate(const std::vector<int>& cap,
                                       const std::vector<choice_item>& items,
                                       const std::vector<int>& pick) {
  std::vector<int> used(cap.size(), 0);
  std::int64_t cost = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (pick[i] < 0) {
      if (items[i].forced) return {0, false};
      continue;
    }
    const choice_option& o = items[i].options[static_cast<std::size_t>(pick[i])];
    used[static_cast<std::size_t>(o.resource)] += o.weight;
    cost += o.cost;
  }
  for (std::size_t r = 0; r < cap.size(); ++r)
    if (used[r] > cap[r]) return {0, false};
  return {cost, true};
}

/// The least cost over every choice, by enumeration; false when nothing is feasible.
std::pair<std::int64_t, bool> brute_force(const std::vector<int>& cap,
                                          const std::vector<choice_item>& items) {
  std::vector<int> pick(items.size(), -1);
  std::int64_t best = 0;
  bool found = false;
  while (true) {
    const auto [cost, ok] = evaluate(cap, items, pick);
    if (ok && (!found || cost < best)) best = cost, found = true;
    std::size_t i = 0;  // next choice vector, as an odometer over -1..options-1
    while (i < items.size() && ++pick[i] == static_cast<int>(items[i].options.size()))
      pick[i++] = -1;
    if (i == items.size()) return {best, found};
  }
}

/// The same program solved by CBC to a gap of 0 (choice_knapsack_milp).
double cbc_optimum(const std::vector<int>& cap, const std::vector<choice_item>& items) {
  milp_settings set;
  set.relative_gap = 0;
  auto sol = solve_milp(choice_knapsack_milp(cap, items), set);
  REQUIRE(sol);
  REQUIRE(sol->outcome == milp_outcome::optimal);
  return sol->objective;
}

}  // namespace

TEST_CASE("choice knapsack: a hand-worked instance", "[solver][knapsack]") {
  // Two resources of 4 and 2 units. Item 0 (weight 3): -5 on r0 or -4 on r1 (does not fit:
  // 3 > 2). Item 1 (weight 2): -3 on r0, -2 on r1. Item 2 (weight 1): -2 on r0. Best: item 0
  // on r0 (-5), item 1 on r1 (-2), item 2 on r0 (-2): -9, using 4 of r0 and 2 of r1.
  const std::vector<int> cap = {4, 2};
  const std::vector<choice_item> items = {
      {{{0, 3, -5}, {1, 3, -4}}, false}, {{{0, 2, -3}, {1, 2, -2}}, false}, {{{0, 1, -2}}, false}};
  const auto sol = solve_choice_knapsack(cap, items);
  REQUIRE(sol.outcome == choice_outcome::optimal);
  CHECK(sol.cost == -9);
  CHECK(sol.pick == std::vector<int>{0, 1, 0});
  CHECK(choice_states(cap) == 15);
}

TEST_CASE("choice knapsack: ties go to earlier items, then to earlier options",
          "[solver][knapsack]") {
  // Three equal items, room for two: items 0 and 1 are placed. Item 2's two options cost the
  // same when alone: it takes the first.
  const std::vector<choice_item> equal(3, choice_item{{{0, 1, -1}}, false});
  auto sol = solve_choice_knapsack({2}, equal);
  REQUIRE(sol.outcome == choice_outcome::optimal);
  CHECK(sol.pick == std::vector<int>{0, 0, -1});
  sol = solve_choice_knapsack({1, 1}, {{{{1, 1, -1}, {0, 1, -1}}, false}});
  CHECK(sol.pick == std::vector<int>{0});
  // A forced item is placed even at a loss, ahead of a cheaper free one.
  sol = solve_choice_knapsack({1}, {{{{0, 1, 5}}, false}, {{{0, 1, 5}}, true}});
  REQUIRE(sol.outcome == choice_outcome::optimal);
  CHECK(sol.pick == std::vector<int>{-1, 0});
  CHECK(sol.cost == 5);
}

TEST_CASE("choice knapsack: infeasible forced items, and instances above the cell limit",
          "[solver][knapsack]") {
  auto sol = solve_choice_knapsack({2}, {{{{0, 2, 0}}, true}, {{{0, 1, 0}}, true}});
  CHECK(sol.outcome == choice_outcome::infeasible);
  sol = solve_choice_knapsack({1}, {{{}, true}});  // forced with no option
  CHECK(sol.outcome == choice_outcome::infeasible);
  // 3 items x 2^20 states is above a limit of 2^21 cells.
  sol = solve_choice_knapsack({1023, 1023}, std::vector<choice_item>(3), std::int64_t{1} << 21);
  CHECK(sol.outcome == choice_outcome::too_large);
  CHECK(choice_states({1023, 1023}) == std::int64_t{1} << 20);
  CHECK(choice_states({-5, 3}) == 4);
}

TEST_CASE("choice knapsack: random instances match enumeration and CBC",
          "[solver][knapsack][property]") {
  std::mt19937 rng(3407);
  int forced_seen = 0, infeasible_seen = 0;
  for (int trial = 0; trial < 300; ++trial) {
    INFO("trial " << trial);
    const int resources = 1 + static_cast<int>(rng() % 3);
    std::vector<int> cap;
    for (int r = 0; r < resources; ++r) cap.push_back(static_cast<int>(rng() % 7));
    std::vector<choice_item> items(1 + rng() % 6);
    for (auto& it : items) {
      const int options = static_cast<int>(rng() % 4);
      for (int k = 0; k < options; ++k)
        it.options.push_back({static_cast<int>(rng() % static_cast<unsigned>(resources)),
                              1 + static_cast<int>(rng() % 4),
                              static_cast<std::int64_t>(rng() % 21) - 15});  // ties likely
      it.forced = !it.options.empty() && rng() % 6 == 0;
      forced_seen += it.forced;
    }
    const auto [best, feasible] = brute_force(cap, items);
    const auto sol = solve_choice_knapsack(cap, items);
    if (!feasible) {
      CHECK(sol.outcome == choice_outcome::infeasible);
      ++infeasible_seen;
      continue;
    }
    REQUIRE(sol.outcome == choice_outcome::optimal);
    CHECK(sol.cost == best);
    const auto [cost, ok] = evaluate(cap, items, sol.pick);
    CHECK(ok);
    CHECK(cost == best);
    if (trial % 3 == 0) CHECK(cbc_optimum(cap, items) == Approx(static_cast<double>(best)));
  }
  CHECK(forced_seen > 0);
  CHECK(infeasible_seen > 0);
}
