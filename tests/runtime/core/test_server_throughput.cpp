// Per-server throughput: the look-up order (server table, GPU-type table, analytic model),
// Hops' slowest-server rule for multi-server and mixed-type placements, measured updates, and
// Gavel's numbers through the simulator's executor. Expected values are derived in comments.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim_executor.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

// s0: v100, 4 GPUs, speed 1.0; s1: v100, 4 GPUs, speed 0.5; s2: k80, 4 GPUs, speed 1.0.
cluster three_servers() {
  return make_cluster({{0, "v100-a", "v100", 0, 4, 1.0},
                       {0, "v100-b", "v100", 0, 4, 0.5},
                       {0, "k80-a", "k80", 0, 4, 1.0}});
}

// v100: (A,1) 10, (A,2) 18, (A,2) unconsolidated 12, (B,1) 20, (D,1) 8.
// k80:  (A,1) 4,  (A,2) 7 (no unconsolidated entry), (B,1) 5.
throughput_table small_table() {
  throughput_table t;
  t.set_isolated("v100", {"A", 1}, 10);
  t.set_isolated("v100", {"A", 2}, 18);
  t.set_isolated("v100", {"A", 2}, 12, false);
  t.set_isolated("v100", {"B", 1}, 20);
  t.set_isolated("v100", {"D", 1}, 8);
  t.set_isolated("k80", {"A", 1}, 4);
  t.set_isolated("k80", {"A", 2}, 7);
  t.set_isolated("k80", {"B", 1}, 5);
  return t;
}

}  // namespace

TEST_CASE("server throughput: the GPU-type table times the server's speed", "[sim]") {
  const cluster cl = three_servers();
  server_throughput st(cl, small_table());
  auto r = st.rate_at(0, "A", 2, false);
  CHECK(r.steps_per_s == 18);  // table 18 x speed 1.0
  CHECK(r.source == throughput_source::type_table);
  CHECK(st.rate_at(1, "A", 2, false).steps_per_s == 9);  // 18 x 0.5
  CHECK(st.rate_at(0, "A", 2, true).steps_per_s == 12);  // the unconsolidated entry
  // k80 has no unconsolidated (A,2): Gavel's fallback to the consolidated 7.
  CHECK(st.rate_at(2, "A", 2, true).steps_per_s == 7);
}

TEST_CASE("server throughput: a placement runs at its slowest server's per-GPU rate", "[sim]") {
  const cluster cl = three_servers();
  server_throughput st(cl, small_table());
  // One GPU on s0 and one on s2 (mixed types), A at 2 GPUs spanning servers: per-GPU rates
  // 12/2 = 6 on s0 and 7/2 = 3.5 on s2; the slowest, 3.5, times 2 GPUs = 7.
  CHECK(st.rate("A", {{0, 1}, {2, 1}}) == 7);
  // Same type, two speeds: 12 x 1.0 and 12 x 0.5 -> 6 = Gavel's unconsolidated x slowest speed.
  CHECK(st.rate("A", {{0, 1}, {1, 1}}) == 6);
  // One server: the consolidated entry.
  CHECK(st.rate("A", {{1, 2}}) == 9);
  CHECK(st.rate("A", {}) == 0);
}

TEST_CASE("server throughput: the analytic model fills gaps, multi-server slower", "[sim]") {
  const cluster cl = three_servers();
  server_throughput st(cl, small_table());
  // (A,4) is in no table. Single-GPU rate on s0 is 10 steps/s, so compute takes 0.1 s per
  // step. Job family "A" is unknown: 100 MB of gradients = 0.09765625 GB. Ring all-reduce of
  // 4 GPUs in one server: 2*3/4 * 0.09765625 / 50 GB/s + 2*3 * 20 us = 0.0030496875 s;
  // t_iter = 0.1030496875 s; 4 GPUs / t_iter = 38.8162 steps/s.
  auto one = st.rate_at(0, "A", 4, false);
  CHECK(one.source == throughput_source::analytic);
  CHECK(one.steps_per_s == Approx(38.816226395640456));
  // Across servers: 1.5 * 0.09765625 / 3 GB/s + 6 * 100 us = 0.049428125 s; t_iter =
  // 0.149428125 s; 4 / t_iter = 26.7687 steps/s, below the one-server rate.
  auto many = st.rate_at(0, "A", 4, true);
  CHECK(many.source == throughput_source::analytic);
  CHECK(many.steps_per_s == Approx(26.76872242089633));
  CHECK(many.steps_per_s < one.steps_per_s);
  // (D,1) is only measured on v100. The k80 server borrows it, scaled by k80's speed relative
  // to v100: the geometric mean over the job types both list at scale 1, A 4/10 = 0.4 and
  // B 5/20 = 0.25, i.e. sqrt(0.1) = 0.3162; 8 x 0.3162 = 2.5298 steps/s.
  auto borrowed = st.rate_at(2, "D", 1, false);
  CHECK(borrowed.source == throughput_source::analytic);
  CHECK(borrowed.steps_per_s == Approx(2.5298221281347035));
  // A job type no table knows has no estimate anywhere.
  CHECK(st.rate_at(0, "C", 1, false).source == throughput_source::none);
  CHECK(st.rate("C", {{0, 1}}) == 0);
  // One GPU cannot span servers.
  CHECK(st.rate_at(0, "A", 1, true).steps_per_s == 0);
  CHECK(gradient_megabytes("ResNet-50 (batch size 64)", st.model()) == 98);
}

TEST_CASE("server throughput: measurements update the server table first", "[sim]") {
  const cluster cl = three_servers();
  server_throughput st(cl, small_table());
  const auto v0 = st.version();
  CHECK_FALSE(st.has_measurements(1));
  st.record("A", {{1, 2}}, 15);
  CHECK(st.version() != v0);
  CHECK(st.has_measurements(1));
  auto r = st.rate_at(1, "A", 2, false);
  CHECK(r.steps_per_s == 15);
  CHECK(r.source == throughput_source::server_table);
  CHECK(st.rate_at(0, "A", 2, false).steps_per_s == 18);  // other servers unchanged
  // A multi-server measurement is stored for each of its servers.
  st.record("A", {{0, 1}, {2, 1}}, 5);
  CHECK(st.rate_at(0, "A", 2, true).steps_per_s == 5);
  CHECK(st.rate_at(2, "A", 2, true).steps_per_s == 5);
  CHECK(st.rate("A", {{0, 1}, {2, 1}}) == 5);
  // Nonsense is ignored.
  const auto v1 = st.version();
  st.record("A", {{0, 1}}, -1);
  st.record("A", {{0, 1}}, std::nan(""));
  CHECK(st.version() == v1);
}

TEST_CASE("sim executor: Gavel's table numbers unchanged, mixed types accepted", "[sim]") {
  auto table = throughput_table::load_bundled();
  REQUIRE(table);
  // Two v100 servers at different speeds and one k80 server.
  const cluster cl = make_cluster(
      {{0, "a", "v100", 0, 4, 1.0}, {0, "b", "v100", 0, 4, 0.75}, {0, "c", "k80", 0, 4, 1.0}});
  sim_executor exec(cl, table.value(), 0);
  for (const auto& key : table->job_keys("v100")) {
    if (key.scale_factor > 4) continue;
    const job j = test::make_job(0, key.job_type, key.scale_factor, 1000);
    const double cons = *table->isolated("v100", key, true);
    const double uncons = *table->isolated("v100", key, false);
    // One server: consolidated x that server's speed (exactly Gavel's formula).
    CHECK(exec.rate(j, {{1, key.scale_factor}}) == cons * 0.75);
    if (key.scale_factor >= 2) {
      // Two servers of one type: unconsolidated x the slowest speed.
      const int half = key.scale_factor / 2;
      CHECK(exec.rate(j, {{0, half}, {1, key.scale_factor - half}}) == uncons * 0.75);
    }
  }
  // A mixed-type placement runs (Gavel's executor refused it) at the slowest per-GPU rate.
  const job j = test::make_job(7, "ResNet-18 (batch size 64)", 2, 1e9);
  const double v = *table->isolated("v100", {j.job_type, 2}, false);
  const double k = *table->isolated("k80", {j.job_type, 2}, false);
  CHECK(exec.rate(j, {{0, 1}, {2, 1}}) == Approx(std::min(v, k)));
  snapshot s;
  s.cl = &cl;
  job_view jv;
  jv.spec = &j;
  jv.remaining_steps = j.total_steps;
  s.jobs.push_back(jv);
  round_plan p;
  p.length = 100;
  assignment as;
  as.job = 7;
  as.shares = {{0, 1}, {2, 1}};
  p.assignments.push_back(as);
  auto ran = exec.execute(s, p);
  REQUIRE(ran);
  REQUIRE(ran->size() == 1);
  CHECK((*ran)[0].steps == Approx(std::min(v, k) * 100));
}
