// Hops' configuration sets are cached across rounds (policies/hops_queue.cpp): a policy that
// has planned every earlier round must plan each round exactly as a fresh one does.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "policies/hops.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// Plans with a long-lived hops, and checks each round against a fresh hops on the same
/// snapshot: the cache may change how fast a round is planned, never what it plans.
class fresh_check final : public policy {
 public:
  std::string name() const override { return "hops"; }
  result<round_plan> plan(const snapshot& s) override {
    auto kept = kept_.plan(s);
    hops fresh("hops", hops_params{});
    auto again = fresh.plan(s);
    ++rounds;
    if (!kept || !again) return kept;
    if (!same(kept.value(), again.value())) ++differ;
    for (const auto& as : kept->assignments) placed += as.gpus();
    return kept;
  }
  int rounds = 0, differ = 0;
  long placed = 0;

 private:
  static bool same(const round_plan& a, const round_plan& b) {
    if (a.assignments.size() != b.assignments.size()) return false;
    for (std::size_t i = 0; i < a.assignments.size(); ++i) {
      const auto &x = a.assignments[i], &y = b.assignments[i];
      if (x.job != y.job || x.type != y.type || x.shares.size() != y.shares.size()) return false;
      for (std::size_t k = 0; k < x.shares.size(); ++k)
        if (x.shares[k].server != y.shares[k].server || x.shares[k].gpus != y.shares[k].gpus)
          return false;
    }
    return true;
  }
  hops kept_{"hops", hops_params{}};
};

}  // namespace

TEST_CASE("hops: a long-lived policy plans every round as a fresh one", "[policies][property]") {
  std::mt19937 rng(2026);
  int rounds = 0;
  long placed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    INFO("trial " << trial);
    test::instance_limits lim;
    lim.max_jobs = 24;
    const auto in = test::random_instance(rng, lim);
    fresh_check pol;
    sim_config cfg;
    cfg.round_length = 120;
    auto r = simulate(in.cl, in.table, in.jobs, pol, cfg);
    REQUIRE(r);
    CHECK(r->complete);
    CHECK(pol.differ == 0);
    rounds += pol.rounds;
    placed += pol.placed;
  }
  // Enough rounds with jobs moving in and out for the cache to have been hit and missed.
  CHECK(rounds > 300);
  CHECK(placed > 0);
}
