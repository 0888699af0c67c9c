// place_on_servers keeps each type's servers in an ordered index (O(log servers) a job); these
// tests check it against a plain scan of every server, the rule the mechanism documents, on
// random small clusters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "policies/mechanism.hpp"

using namespace tessera;

namespace {

/// The documented placement by scanning every server for every job: lease extension, else
/// best fit on one server (fewest free GPUs, lowest id), else the fewest servers (most free
/// first, lowest id among equals), else unplaced; largest jobs first, stable.
std::vector<std::vector<server_share>> scan_placement(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<std::vector<server_share>>& previous) {
  std::vector<int> free_gpus(cl.servers.size());
  for (const auto& sv : cl.servers) free_gpus[sv.id] = sv.gpus;
  std::vector<std::vector<server_share>> out(scale.size());
  std::vector<std::size_t> order(scale.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t l, std::size_t r) { return scale[l] > scale[r]; });
  for (std::size_t i : order) {
    const auto& prev = i < previous.size() ? previous[i] : std::vector<server_share>{};
    int total = 0;
    bool fits = !prev.empty();
    for (const auto& sh : prev) {
      total += sh.gpus;
      fits = fits && sh.server >= 0 && sh.server < static_cast<int>(cl.servers.size()) &&
             cl.servers[sh.server].type_index == types[i] && free_gpus[sh.server] >= sh.gpus;
    }
    if (fits && total == scale[i]) {
      for (const auto& sh : prev) free_gpus[sh.server] -= sh.gpus;
      out[i] = prev;
      continue;
    }
    int best = -1;
    for (const auto& sv : cl.servers)
      if (sv.type_index == types[i] && free_gpus[sv.id] >= scale[i] &&
          (best < 0 || free_gpus[sv.id] < free_gpus[best]))
        best = sv.id;
    if (best >= 0) {
      free_gpus[best] -= scale[i];
      out[i] = {{best, scale[i]}};
      continue;
    }
    std::vector<int> servers;
    for (const auto& sv : cl.servers)
      if (sv.type_index == types[i] && free_gpus[sv.id] > 0) servers.push_back(sv.id);
    std::stable_sort(servers.begin(), servers.end(),
                     [&](int l, int r) { return free_gpus[l] > free_gpus[r]; });
    int need = scale[i];
    std::vector<server_share> shares;
    for (int sv : servers) {
      if (need == 0) break;
      const int take = std::min(need, free_gpus[sv]);
      shares.push_back({sv, take});
      need -= take;
    }
    if (need > 0) continue;
    for (const auto& sh : shares) free_gpus[sh.server] -= sh.gpus;
    out[i] = std::move(shares);
  }
  return out;
}

/// A random cluster of 1-3 types on 1-12 servers of 1-8 GPUs, the types interleaved.
cluster random_cluster(std::mt19937& rng) {
  const char* names[] = {"v100", "p100", "k80"};
  const int ntypes = 1 + static_cast<int>(rng() % 3);
  std::vector<server> servers;
  const int n = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < n; ++i)
    servers.push_back({0, "s" + std::to_string(i), names[rng() % ntypes], 0,
                       1 + static_cast<int>(rng() % 8), 1.0});
  return make_cluster(servers);
}

/// Random previous shares for a job: none, its own type's servers, or nonsense (another
/// type, an unknown server, a wrong total).
std::vector<server_share> random_previous(const cluster& cl, std::mt19937& rng) {
  std::vector<server_share> prev;
  const int parts = static_cast<int>(rng() % 3);
  for (int p = 0; p < parts; ++p)
    prev.push_back(
        {static_cast<int>(rng() % (cl.servers.size() + 1)), 1 + static_cast<int>(rng() % 4)});
  return prev;
}

}  // namespace

TEST_CASE("indexed placement equals a scan of every server on random clusters",
          "[mechanism][scale]") {
  std::mt19937 rng(16);
  int placed = 0, unplaced = 0, kept = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const cluster cl = random_cluster(rng);
    const std::size_t n = rng() % 16;
    std::vector<int> scale(n), types(n);
    std::vector<std::vector<server_share>> previous(n);
    const int sizes[] = {1, 2, 3, 4, 8};
    for (std::size_t i = 0; i < n; ++i) {
      scale[i] = sizes[rng() % 5];
      types[i] = static_cast<int>(rng() % cl.types.size());
      previous[i] = random_previous(cl, rng);
    }
    const auto want = scan_placement(cl, scale, types, previous);
    const auto got = place_on_servers(cl, scale, types, previous);
    REQUIRE(got == want);
    for (std::size_t i = 0; i < n; ++i) {
      if (want[i].empty())
        ++unplaced;
      else
        ++placed;
      if (!want[i].empty() && want[i] == previous[i]) ++kept;
    }
  }
  // The random inputs reach every branch: placed, unplaced, and kept leases.
  CHECK(placed > 1000);
  CHECK(unplaced > 100);
  CHECK(kept > 10);
}
