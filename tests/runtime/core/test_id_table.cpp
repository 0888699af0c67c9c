// id_table (runtime/core/id_table.hpp) against std::map over random operations: ids in the
// flat range, past it and negative; inserts, finds, removals by predicate, and visits.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "runtime/core/id_table.hpp"

using namespace tessera;

TEST_CASE("id_table: the same contents as a map over random operations", "[id_table]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const job_id limit = 1 + static_cast<job_id>(rng() % 40);
    id_table<int> t(limit);
    std::map<job_id, int> ref;
    auto draw = [&] {
      const int kind = static_cast<int>(rng() % 10);
      if (kind == 0) return -1 - static_cast<job_id>(rng() % 5);              // negative
      if (kind == 1) return limit + static_cast<job_id>(rng() % 20);          // past the flat range
      return static_cast<job_id>(rng() % static_cast<std::uint64_t>(limit));  // flat
    };
    for (int op = 0; op < 300; ++op) {
      const job_id id = draw();
      switch (rng() % 4) {
        case 0: {  // insert or update
          const int v = static_cast<int>(rng() % 1000);
          t[id] = v;
          ref[id] = v;
          break;
        }
        case 1: {  // find
          const int* got = t.find(id);
          auto it = ref.find(id);
          REQUIRE((got != nullptr) == (it != ref.end()));
          if (got) CHECK(*got == it->second);
          break;
        }
        case 2: {  // remove the odd values
          t.erase_if([](job_id, int v) { return v % 2 == 1; });
          for (auto it = ref.begin(); it != ref.end();)
            it = it->second % 2 ? ref.erase(it) : std::next(it);
          break;
        }
        default: {  // a default-constructed entry
          if (!ref.count(id)) {
            CHECK(t[id] == 0);
            ref[id] = 0;
          }
        }
      }
      REQUIRE(t.size() == ref.size());
    }
    std::map<job_id, int> seen;
    t.for_each([&](job_id id, int& v) {
      CHECK(seen.emplace(id, v).second);  // each id once
    });
    CHECK(seen == ref);
  }
}
