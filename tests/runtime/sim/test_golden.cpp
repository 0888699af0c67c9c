// Golden test: the bundled small case in tests/data/golden/, run end to end through the file
// readers, the registry's fifo_perf policy, the mechanism and the simulator. Expected numbers
// derived by hand:
//
// Cluster: one V100 GPU, one K80 GPU; 360 s rounds. Throughputs (steps/s): alpha 4 on V100,
// 1 on K80; beta 2 on V100, 1 on K80. Jobs: 0 alpha 1440 steps at t=0; 1 beta 720 steps at
// t=0; 2 alpha 360 steps at t=400.
// fifo_perf gives each job, in arrival order, its fastest type with room.
//  Round t=0: job 0 -> V100 (4/s) runs 1440 steps in exactly 360 s, finishes at 360.
//             job 1 -> K80 (V100 taken) runs 360 of its 720 steps.
//  Round t=360: job 1 alone (job 2 arrives at 400) -> V100 at 2/s: 360 steps in 180 s,
//             finishes at 540.
//  Round t=720: job 2 -> V100 at 4/s: 360 steps in 90 s, finishes at 810.
// JCTs 360, 540, 410 -> average 436.667 s; makespan 810 s; run times 360, 540, 90, so
// waiting 0, 0, 320 -> average 106.667 s, latency ratio max 320/90; GPU-seconds
// 360 + 360 + 180 + 90 = 990 over 2 GPUs x 810 s -> utilisation 0.6111; no round leaves a
// job waiting, so fragmentation 0.
#include <catch2/catch.hpp>

#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace.hpp"

using namespace tessera;

TEST_CASE("golden: fifo_perf on the bundled small case", "[sim][golden]") {
  const std::string dir = TESSERA_TEST_DATA_DIR "/golden/";
  auto table = throughput_table::load(dir + "throughputs.json");
  REQUIRE(table);
  auto cl = load_cluster(dir + "cluster.toml");
  REQUIRE(cl);
  auto jobs = read_trace(dir + "jobs.trace", &table.value());
  REQUIRE(jobs);
  auto pol = make_policy("fifo_perf");
  REQUIRE(pol);
  auto r = simulate(cl.value(), table.value(), jobs.value(), *pol.value(), sim_config{});
  REQUIRE(r);
  REQUIRE(r->complete);
  CHECK(r->jobs[0].finish == Approx(360));
  CHECK(r->jobs[1].finish == Approx(540));
  CHECK(r->jobs[2].finish == Approx(810));
  auto m = compute_metrics(r.value());
  CHECK(m.avg_jct == Approx((360.0 + 540.0 + 410.0) / 3));
  CHECK(m.makespan == Approx(810));
  CHECK(m.avg_wait == Approx(320.0 / 3));
  CHECK(m.lr_max == Approx(320.0 / 90.0));
  CHECK(m.utilisation == Approx(990.0 / 1620.0));
  CHECK(m.fragmentation == Approx(0));
  CHECK(m.rounds == 3);
}
