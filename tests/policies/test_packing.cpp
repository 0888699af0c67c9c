// Space sharing in the shared pieces: plan validation of pairs, the mechanism running a pair
// allocation, the simulator's co-located rates and GPU-second accounting.
#include <catch2/catch.hpp>

#include "policies/mechanism.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// One server of one V100; jobs "a", "b" (scale 1) and "w" (scale 2) alone at 10 steps/s;
/// "a" beside "b" at (6, 7) steps/s (only a's row has the entry); nothing for "w".
struct one_gpu {
  cluster cl = make_cluster({{0, "s0", "v100", 0, 1, 1.0}});
  throughput_table table;
  std::vector<job> jobs;
  one_gpu() {
    for (const char* t : {"a", "b"}) table.set_isolated("v100", {t, 1}, 10);
    table.set_isolated("v100", {"w", 2}, 10);
    table.set_colocated("v100", {"a", 1}, {"b", 1}, {6, 7});
    jobs = {test::make_job(0, "a", 1, 600), test::make_job(1, "b", 1, 700),
            test::make_job(2, "a", 1, 100)};
  }
};

/// A snapshot of `f`'s jobs with `rates` as the executor's model.
snapshot snap_of(const one_gpu& f, const server_throughput& rates) {
  snapshot s = test::make_snapshot(f.cl, f.jobs, {{10.0}, {10.0}, {10.0}});
  s.rates = &rates;
  return s;
}

assignment placed(job_id job, job_id partner) {
  assignment as;
  as.job = job;
  as.type = 0;
  as.shares = {{0, 1}};
  as.partner = partner;
  return as;
}

}  // namespace

TEST_CASE("packing: a pair shares one GPU, and a third job on it over-fills the server",
          "[packing]") {
  one_gpu f;
  server_throughput rates(f.cl, f.table);
  const snapshot s = snap_of(f, rates);
  round_plan p;
  p.assignments = {placed(0, 1), placed(1, 0)};
  CHECK(validate_plan(s, p, "t").ok());
  p.assignments.push_back(placed(2, -1));
  auto third = validate_plan(s, p, "t");
  REQUIRE_FALSE(third.ok());
  CHECK(third.err().message.find("over-filled") != std::string::npos);
}

TEST_CASE("packing: validation refuses broken pairs", "[packing]") {
  one_gpu f;
  server_throughput rates(f.cl, f.table);
  const snapshot s = snap_of(f, rates);
  auto refused = [&](std::vector<assignment> a, const std::string& why) {
    round_plan p;
    p.assignments = std::move(a);
    auto st = validate_plan(s, p, "t");
    INFO(why);
    REQUIRE_FALSE(st.ok());
    CHECK(st.err().message.find(why) != std::string::npos);
  };
  // Not named back.
  refused({placed(0, 1), placed(1, -1)}, "does not name it back");
  // On other shares (a second server would be needed; one share differs in GPUs).
  auto other = placed(1, 0);
  other.shares = {{0, 2}};
  refused({placed(0, 1), other}, "does not name it back");
  // Two jobs of type "a": the table has no ("a", "a") entry.
  refused({placed(0, 2), placed(2, 0)}, "no co-location throughput");
  // With itself.
  refused({placed(0, 0)}, "two distinct gang jobs");
  // Without rates nothing can be checked against the table: refused too.
  snapshot bare = s;
  bare.rates = nullptr;
  round_plan p;
  p.assignments = {placed(0, 1), placed(1, 0)};
  CHECK_FALSE(validate_plan(bare, p, "t").ok());
}

TEST_CASE("packing: co-located rates read either row and the slowest speed", "[packing]") {
  one_gpu f;
  server_throughput rates(f.cl, f.table);
  auto ab = rates.colocated_rate("a", "b", 1, {{0, 1}});
  REQUIRE(ab);
  CHECK(ab->first == 6);
  CHECK(ab->second == 7);
  auto ba = rates.colocated_rate("b", "a", 1, {{0, 1}});  // from a's row, swapped
  REQUIRE(ba);
  CHECK(ba->first == 7);
  CHECK(ba->second == 6);
  CHECK_FALSE(rates.colocated_rate("a", "a", 1, {{0, 1}}));
  CHECK_FALSE(rates.colocated_rate("a", "w", 2, {{0, 1}}));
  cluster slow = make_cluster({{0, "s0", "v100", 0, 1, 0.5}});
  server_throughput half(slow, f.table);
  CHECK(half.colocated_rate("a", "b", 1, {{0, 1}})->first == 3);
}

TEST_CASE("packing: the mechanism runs a pair allocation as one unit on one GPU",
          "[packing][mechanism]") {
  one_gpu f;
  f.jobs.pop_back();
  server_throughput rates(f.cl, f.table);
  snapshot s = test::make_snapshot(f.cl, f.jobs, {{10.0}, {10.0}});
  s.rates = &rates;
  allocation a(std::vector<std::vector<double>>{{0.0}, {0.0}});
  a.pairs.push_back({0, 1, {1.0}});
  gavel_mechanism mech;
  mech.reset(0);
  const round_plan p = mech.plan(s, a);
  REQUIRE(p.assignments.size() == 2);
  CHECK(p.assignments[0].partner == p.assignments[1].job);
  CHECK(p.assignments[1].partner == p.assignments[0].job);
  CHECK(p.assignments[0].shares == p.assignments[1].shares);
  CHECK(validate_plan(s, p, "mech").ok());
  // Without the pair only one job fits on the GPU.
  allocation alone(std::vector<std::vector<double>>{{0.5}, {0.5}});
  gavel_mechanism plain;
  plain.reset(0);
  CHECK(plain.plan(s, alone).assignments.size() == 1);
}

TEST_CASE("packing: the simulator runs a pair at its co-located rates and counts its GPU once",
          "[packing][sim]") {
  one_gpu f;
  f.jobs.pop_back();  // jobs 0 ("a", 600 steps) and 1 ("b", 700 steps)
  test::fixed_plan pol({placed(0, 1), placed(1, 0)});
  sim_config cfg;
  cfg.round_length = 60;
  auto r = simulate(f.cl, f.table, f.jobs, pol, cfg);
  REQUIRE(r);
  REQUIRE(r->complete);
  // a at 6 steps/s: 100 s; b at 7 steps/s: 100 s.
  CHECK(r->jobs[0].finish == Approx(100));
  CHECK(r->jobs[1].finish == Approx(100));
  // The one GPU was held 100 s: the pair's GPU-seconds sum to that, not twice it.
  CHECK(r->jobs[0].gpu_seconds + r->jobs[1].gpu_seconds == Approx(100));
  const auto m = compute_metrics(r.value());
  CHECK(m.utilisation == Approx(1.0));
  for (const auto& rd : r->rounds) CHECK(rd.busy_gpus == 1);
}

TEST_CASE("packing: a pair whose jobs end apart charges the GPU's held time once",
          "[packing][sim]") {
  one_gpu f;
  f.jobs = {test::make_job(0, "a", 1, 120), test::make_job(1, "b", 1, 700)};
  test::fixed_plan pol({placed(0, 1), placed(1, 0)});
  sim_config cfg;
  cfg.round_length = 1000;
  auto r = simulate(f.cl, f.table, f.jobs, pol, cfg);
  REQUIRE(r);
  // a ends at 20 s; b keeps its co-located rate for the round (as in Gavel): 100 s.
  CHECK(r->jobs[0].finish == Approx(20));
  CHECK(r->jobs[1].finish == Approx(100));
  CHECK(r->jobs[0].gpu_seconds + r->jobs[1].gpu_seconds == Approx(100));
}

TEST_CASE("packing: GPUs a pair allocation leaves free go to waiting jobs alone",
          "[packing][mechanism]") {
  one_gpu f;
  f.cl = make_cluster({{0, "s0", "v100", 0, 2, 1.0}});
  server_throughput rates(f.cl, f.table);
  snapshot s = test::make_snapshot(f.cl, f.jobs, {{10.0}, {10.0}, {10.0}});
  s.rates = &rates;
  // The pair holds one GPU; job 2 has no share but the second GPU would be idle.
  allocation a(std::vector<std::vector<double>>{{0.0}, {0.0}, {0.0}});
  a.pairs.push_back({0, 1, {1.0}});
  gavel_mechanism mech;
  mech.reset(0);
  const round_plan p = mech.plan(s, a);
  REQUIRE(p.assignments.size() == 3);
  CHECK(p.assignments[2].job == 2);
  CHECK(p.assignments[2].partner == -1);
  CHECK(validate_plan(s, p, "mech").ok());
  const auto rr = record_round(p, 2, 3);
  CHECK(rr.busy_gpus == 2);
  CHECK(rr.waiting_jobs == 0);
}
