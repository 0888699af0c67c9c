// Space sharing in the actor runtime's plain parts: a pair's two copies get the same device
// indices on their node (no index held by more than two copies, and only by a named pair),
// and the layout carries each copy's partner.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <vector>

#include "runtime/node/gpu/devices.hpp"
#include "actors/task_layout.hpp"

using namespace tessera;

namespace {

using lists = std::vector<std::vector<int>>;

}  // namespace

TEST_CASE("assign_devices: a pair's copies share their indices, counted once", "[packing][gpu]") {
  // Copies 0 and 2 are a pair of 2 GPUs each, copy 1 is alone: 4 GPUs in all.
  auto d = gpu::assign_devices({2, 2, 2}, {2, -1, 0}, 4);
  REQUIRE(d);
  CHECK(*d == lists{{0, 1}, {2, 3}, {0, 1}});
  // Without the pairing the same round asks for 6 of 4.
  CHECK_FALSE(gpu::assign_devices({2, 2, 2}, 4));
  // A partner that does not name it back, names itself, is out of range or wants another
  // count is refused: a third copy cannot join a pair's GPUs.
  CHECK_FALSE(gpu::assign_devices({1, 1, 1}, {1, 0, 0}, 4));
  CHECK_FALSE(gpu::assign_devices({1, 1}, {0, -1}, 4));
  CHECK_FALSE(gpu::assign_devices({1, 1}, {5, -1}, 4));
  CHECK_FALSE(gpu::assign_devices({1, 2}, {1, 0}, 4));
  CHECK_FALSE(gpu::assign_devices({1}, {-1, -1}, 4));
}

TEST_CASE("assign_devices: property over random paired rounds", "[packing][gpu]") {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 300; ++trial) {
    const int gpus = 1 + static_cast<int>(rng() % 8);
    const int n = static_cast<int>(rng() % 6);
    std::vector<std::int32_t> want;
    std::vector<int> partner(static_cast<std::size_t>(n), -1);
    for (int i = 0; i < n; ++i) want.push_back(1 + static_cast<int>(rng() % 3));
    for (int i = 0; i + 1 < n; i += 2)
      if (rng() % 2) {
        partner[static_cast<std::size_t>(i)] = i + 1;
        partner[static_cast<std::size_t>(i) + 1] = i;
        want[static_cast<std::size_t>(i) + 1] = want[static_cast<std::size_t>(i)];
      }
    int total = 0;
    for (int i = 0; i < n; ++i)
      if (partner[static_cast<std::size_t>(i)] < i) total += want[static_cast<std::size_t>(i)];
    const auto d = gpu::assign_devices(want, partner, gpus);
    INFO("trial " << trial << ": " << n << " copies, " << total << " of " << gpus);
    REQUIRE(static_cast<bool>(d) == (total <= gpus));
    if (!d) continue;
    std::map<int, std::vector<int>> holders;  // index -> copies holding it
    for (int i = 0; i < n; ++i) {
      const auto& mine = (*d)[static_cast<std::size_t>(i)];
      CHECK(static_cast<int>(mine.size()) == want[static_cast<std::size_t>(i)]);
      for (const int x : mine) {
        CHECK(x >= 0);
        CHECK(x < gpus);
        holders[x].push_back(i);
      }
    }
    for (const auto& [index, who] : holders) {
      REQUIRE(who.size() <= 2);
      if (who.size() == 2) CHECK(partner[static_cast<std::size_t>(who[0])] == who[1]);
    }
  }
}

TEST_CASE("layout_copies: each copy of a pair names its partner, same server", "[packing]") {
  round_plan p;
  assignment a{3, 0, 0, {{1, 1}}, 0, -1, 7};
  assignment b{7, 0, 0, {{1, 1}}, 0, -1, 3};
  assignment c{9, 0, 0, {{0, 1}}, 0, -1, -1};
  p.assignments = {a, b, c};
  const auto l = layout_copies(p, [](job_id) { return 1; });
  REQUIRE(l.size() == 3);
  CHECK(l[0].partner == 7);
  CHECK(l[1].partner == 3);
  CHECK(l[2].partner == -1);
  REQUIRE(l[0].parts.size() == 1);
  REQUIRE(l[1].parts.size() == 1);
  CHECK(l[0].parts[0].server == l[1].parts[0].server);
}
