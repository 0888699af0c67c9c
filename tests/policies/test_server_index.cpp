// Server classes and free-GPU buckets (policies/server_index.hpp): on random small clusters,
// the classes separate exactly the servers some value vector tells apart, and the buckets
// answer "lowest id of class c with f free GPUs, not skipped" as a scan of all servers does.
#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <set>
#include <vector>

#include "policies/server_index.hpp"

using namespace tessera;

TEST_CASE("server classes split exactly the servers a value vector tells apart",
          "[server_index][property]") {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<int> key(n);
    for (auto& k : key) k = std::uniform_int_distribution<int>(0, 2)(rng);
    server_classes cls(key);
    std::vector<std::vector<double>> seen;
    for (int round = 0; round < 3; ++round) {
      std::vector<double> a(n), b(n);
      for (int u = 0; u < n; ++u) {
        a[u] = std::uniform_int_distribution<int>(0, 3)(rng) * 0.5;
        b[u] = round == 1 ? std::numeric_limits<double>::infinity()
                          : std::uniform_int_distribution<int>(0, 1)(rng);
      }
      const auto before = cls.version();
      const bool split = cls.refine(a, b);
      CHECK(split == (cls.version() != before));
      seen.push_back(a);
      seen.push_back(b);
    }
    for (int u = 0; u < n; ++u)
      for (int v = 0; v < n; ++v) {
        bool same = key[u] == key[v];
        for (const auto& vec : seen) same = same && vec[u] == vec[v];
        REQUIRE((cls.of(u) == cls.of(v)) == same);
      }
    for (int c = 0; c < cls.count(); ++c) {
      REQUIRE(cls.of(cls.first(c)) == c);
      for (int u = 0; u < cls.first(c); ++u) REQUIRE(cls.of(u) != c);
    }
  }
}

TEST_CASE("refining with values the classes already share changes nothing", "[server_index]") {
  server_classes cls(std::vector<int>{0, 0, 1, 1});
  const auto v = cls.version();
  CHECK_FALSE(cls.refine({2, 2, 3, 3}, {1, 1, 1, 1}));
  CHECK(cls.version() == v);
  CHECK(cls.count() == 2);
  CHECK(cls.refine({2, 5, 3, 3}, {1, 1, 1, 1}));
  CHECK(cls.count() == 3);
  CHECK(cls.of(0) != cls.of(1));
}

TEST_CASE("free buckets answer as a scan of every server does", "[server_index][property]") {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = std::uniform_int_distribution<int>(1, 30)(rng);
    std::vector<int> key(n), free(n);
    for (int u = 0; u < n; ++u) {
      key[u] = std::uniform_int_distribution<int>(0, 3)(rng);
      free[u] = std::uniform_int_distribution<int>(0, 8)(rng);
    }
    const server_classes cls(key);
    free_buckets b(cls, free);
    std::set<int> skipped;
    for (int step = 0; step < 40; ++step) {
      const int u = std::uniform_int_distribution<int>(0, n - 1)(rng);
      if (free[u] > 0) {  // take some of u's GPUs, as a placement does
        const int g = std::uniform_int_distribution<int>(1, free[u])(rng);
        b.update(u, cls.of(u), free[u], free[u] - g);
        free[u] -= g;
      }
      if (step % 7 == 0) skipped.insert(u);
      for (int c = 0; c < cls.count(); ++c)
        for (int f = 1; f <= 8; ++f) {
          int scan = -1;
          for (int v = 0; v < n && scan < 0; ++v)
            if (cls.of(v) == c && free[v] == f && skipped.count(v) == 0) scan = v;
          REQUIRE(b.first(c, f, [&](int v) { return skipped.count(v) > 0; }) == scan);
        }
    }
  }
}
