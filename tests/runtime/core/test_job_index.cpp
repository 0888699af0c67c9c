// job_index: positions by id, dense (flat table) and sparse (hash map), rebuilt in place.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <vector>

#include "runtime/core/job_index.hpp"

using namespace tessera;

namespace {

/// Checks `idx` against a std::map of the same ids, for every id in [lo, hi].
void check_against_map(const job_index& idx, const std::vector<job_id>& ids, job_id lo, job_id hi) {
  std::map<job_id, std::size_t> expect;
  for (std::size_t i = 0; i < ids.size(); ++i) expect[ids[i]] = i;
  for (job_id id = lo; id <= hi; ++id) {
    auto it = expect.find(id);
    REQUIRE(idx.find(id) == (it == expect.end() ? job_index::npos : it->second));
  }
}

}  // namespace

TEST_CASE("job_index: positions by id, dense and sparse, rebuilt in place", "[scale]") {
  std::mt19937_64 rng(16);
  job_index idx;
  for (int round = 0; round < 200; ++round) {
    // Alternate dense sets (ids within a few thousand) and sparse ones (ids 10^9 apart),
    // so rebuilding switches between the flat table and the hash map and must clear both.
    const bool sparse = round % 3 == 2;
    std::uniform_int_distribution<job_id> pick(-50, sparse ? 1'000'000'000'000LL : 3000);
    std::vector<job_id> ids(rng() % 40);
    for (auto& id : ids) id = pick(rng);
    idx.assign(ids.size(), [&ids](std::size_t i) { return ids[i]; });
    check_against_map(idx, ids, -60, 3010);
    for (job_id id : ids) REQUIRE(idx.contains(id));
  }
  const job_index empty(0, [](std::size_t) { return job_id{0}; });
  REQUIRE(empty.find(0) == job_index::npos);
}
