// Tests of Gavel's round mechanism: server placement, priorities over rounds, and plan
// invariants on random small clusters.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "tests/support.hpp"
#include "policies/mechanism.hpp"

using namespace tessera;

namespace {

cluster two_type_cluster() {
  // type 0 "v100": servers of 4, 4, 2 GPUs; type 1 "k80": one server of 8.
  return make_cluster({{0, "a", "v100", 0, 4, 1.0},
                       {0, "b", "v100", 0, 4, 1.0},
                       {0, "c", "v100", 0, 2, 1.0},
                       {0, "d", "k80", 0, 8, 1.0}});
}

struct fixture {
  cluster cl;
  std::vector<job> specs;
  snapshot snap(double now, const round_plan* last, std::uint64_t version) const {
    snapshot s;
    s.now = now;
    s.cl = &cl;
    s.last_plan = last;
    s.job_set_version = version;
    for (const auto& j : specs) {
      job_view v;
      v.spec = &j;
      v.remaining_steps = j.total_steps;
      v.throughput.assign(cl.types.size(), 1.0);
      s.jobs.push_back(v);
    }
    return s;
  }
};

}  // namespace

TEST_CASE("placement prefers one server, best fit", "[mechanism]") {
  auto cl = two_type_cluster();
  auto out = place_on_servers(cl, {2}, {0}, {});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].size() == 1);
  CHECK(out[0][0].server == 2);  // the 2-GPU server fits exactly
  CHECK(out[0][0].gpus == 2);
}

TEST_CASE("placement spans the fewest servers when no server fits", "[mechanism]") {
  auto cl = two_type_cluster();
  auto out = place_on_servers(cl, {8}, {0}, {});
  REQUIRE(out[0].size() == 2);  // 4 + 4, not 4 + 2 + 2
  CHECK(out[0][0].gpus + out[0][1].gpus == 8);
  CHECK(out[0][0].gpus == 4);
}

TEST_CASE("lease extension keeps previous servers when free", "[mechanism]") {
  auto cl = two_type_cluster();
  // Job 0 held 2 GPUs on server "a" last round and keeps them, although best fit alone
  // would put a 2-GPU job on server "c" (exactly 2 free).
  auto out = place_on_servers(cl, {2, 2}, {0, 0}, {{{0, 2}}, {}});
  CHECK(out[0] == std::vector<server_share>{{0, 2}});
  CHECK(out[1] == std::vector<server_share>{{0, 2}});  // best fit: the 2 GPUs left on "a"
}

TEST_CASE("mechanism time-shares a GPU in proportion to the allocation", "[mechanism]") {
  fixture f;
  f.cl = make_cluster({{0, "a", "v100", 0, 1, 1.0}});
  for (int i = 0; i < 3; ++i) f.specs.push_back(test::make_job(i, "t", 1, 1e9, 0, 1));
  allocation a;
  a.x = {{0.5}, {0.25}, {0.25}};
  gavel_mechanism mech;
  mech.reset(0);
  std::map<job_id, int> rounds;
  round_plan last;
  bool have = false;
  for (int r = 0; r < 40; ++r) {
    auto s = f.snap(r * 360.0, have ? &last : nullptr, 1);
    last = mech.plan(s, a);
    last.length = 360;
    have = true;
    REQUIRE(last.assignments.size() == 1);
    ++rounds[last.assignments[0].job];
  }
  CHECK(rounds[0] == 20);
  CHECK(rounds[1] == 10);
  CHECK(rounds[2] == 10);
}

TEST_CASE("mechanism plans respect capacity on random clusters", "[mechanism][property]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    fixture f;
    std::vector<server> servers;
    const int types = 1 + static_cast<int>(rng() % 3);
    const int nservers = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < nservers; ++i)
      servers.push_back({0, "s" + std::to_string(i), "t" + std::to_string(rng() % types), 0,
                         1 + static_cast<int>(rng() % 8), 1.0});
    f.cl = make_cluster(servers);
    const int njobs = 1 + static_cast<int>(rng() % 12);
    const int scales[] = {1, 2, 4, 8};
    for (int m = 0; m < njobs; ++m)
      f.specs.push_back(test::make_job(m, "t", scales[rng() % 4], 1e6, 0, 1));
    // A random feasible allocation: scale down until capacity holds.
    allocation a;
    std::uniform_real_distribution<double> u(0, 1);
    const std::size_t k = f.cl.types.size();
    for (int m = 0; m < njobs; ++m) {
      std::vector<double> row(k);
      double sum = 0;
      for (auto& v : row) sum += (v = u(rng) < 0.3 ? 0 : u(rng));
      for (auto& v : row) v = sum > 1 ? v / sum : v;
      a.x.push_back(row);
    }
    for (std::size_t j = 0; j < k; ++j) {
      double used = 0;
      for (int m = 0; m < njobs; ++m) used += f.specs[m].scale_factor * a.x[m][j];
      if (used > f.cl.types[j].gpus)
        for (int m = 0; m < njobs; ++m) a.x[m][j] *= f.cl.types[j].gpus / used;
    }
    gavel_mechanism mech;
    mech.reset(0);
    round_plan last;
    for (int r = 0; r < 5; ++r) {
      auto s = f.snap(r * 360.0, r ? &last : nullptr, 1);
      last = mech.plan(s, a);
      last.length = 360;
      std::vector<int> used(f.cl.servers.size(), 0);
      std::set<job_id> seen;
      for (const auto& as : last.assignments) {
        REQUIRE(seen.insert(as.job).second);                 // no job twice
        REQUIRE(as.gpus() == f.specs[as.job].scale_factor);  // scale factor met
        REQUIRE(a.x[as.job][as.type] > 0);                   // only where allocated
        for (const auto& sh : as.shares) {
          REQUIRE(f.cl.servers[sh.server].type_index == as.type);  // one type per job
          used[sh.server] += sh.gpus;
        }
      }
      for (const auto& sv : f.cl.servers) REQUIRE(used[sv.id] <= sv.gpus);
    }
  }
}
