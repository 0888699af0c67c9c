// runtime/run_rates: the live run's per-server throughput model and its measurements.
#include <catch2/catch.hpp>

#include "runtime/run_rates.hpp"

using namespace tessera;

namespace {

run_job rj(job_id id, const std::string& type, int k, double step_time,
           std::vector<int> acceptable = {}) {
  run_job j;
  j.spec.id = id;
  j.spec.job_type = type;
  j.spec.scale_factor = k;
  j.spec.total_steps = 100;
  j.spec.acceptable_gpus = std::move(acceptable);
  j.kind = type;
  j.step_time = step_time;
  return j;
}

cluster three_nodes() {
  return make_cluster({{0, "fast", "v100", 0, 1, 1.0},
                       {0, "half", "p100", 0, 1, 0.5},
                       {0, "quarter", "k80", 0, 1, 0.25}});
}

}  // namespace

TEST_CASE("run_rates: step_time model per server, scaled by speed", "[run_rates]") {
  const cluster cl = three_nodes();
  run_rates rates(cl);
  auto a = rj(0, "mlp", 1, 0.02);
  auto b = rj(1, "mlp", 4, 0.05, {2, 4});
  rates.add(a);
  rates.add(b);
  const auto& live = rates.for_live(cl, {0, 1, 2});
  // 1 / step_time at speed 1, times the speed factor.
  CHECK(live.rate_at(0, "mlp", 1, false).steps_per_s == Approx(50));
  CHECK(live.rate_at(2, "mlp", 1, false).steps_per_s == Approx(12.5));
  CHECK(live.rate_at(1, "mlp", 1, false).source == throughput_source::type_table);
  // b shares a's job type with another step time: it gets its own key.
  REQUIRE(b.spec.job_type == "mlp @0.05s");
  const auto& t = b.spec.job_type;
  // K = 4 on 2 GPUs (an acceptable count): two task-times per step.
  CHECK(live.rate_at(0, t, 2, false).steps_per_s == Approx(1 / (2 * 0.05)));
  CHECK(live.rate_at(0, t, 4, false).steps_per_s == Approx(20));
  CHECK(live.rate_at(1, t, 4, true).steps_per_s == Approx(10));  // spanning: same model
  CHECK(live.rate_at(0, t, 4, false).source == throughput_source::type_table);
}

TEST_CASE("run_rates: two step times of one job type get distinct keys", "[run_rates]") {
  const cluster cl = three_nodes();
  run_rates rates(cl);
  auto a = rj(0, "mlp", 1, 0.02);
  auto b = rj(1, "mlp", 1, 0.03);
  auto c = rj(2, "mlp", 1, 0.02);
  rates.add(a);
  rates.add(b);
  rates.add(c);
  CHECK(a.spec.job_type == "mlp");
  CHECK(b.spec.job_type == "mlp @0.03s");
  CHECK(c.spec.job_type == "mlp");
  const auto& live = rates.for_live(cl, {0, 1, 2});
  CHECK(live.rate_at(0, b.spec.job_type, 1, false).steps_per_s == Approx(1 / 0.03));
}

TEST_CASE("run_rates: a measurement replaces the estimate on its node, also after nodes are lost",
          "[run_rates]") {
  const cluster cl = three_nodes();
  run_rates rates(cl);
  auto a = rj(0, "mlp", 4, 0.05);
  rates.add(a);
  rates.for_live(cl, {0, 1, 2});
  // Rank 2 measured 3 steps/s running all 4 tasks on its 1 GPU (4 task-times per step):
  // the gang-equivalent rate is 12 steps/s.
  rates.record(2, "mlp", 4, 4, 3.0);
  const auto& now = rates.for_live(cl, {0, 1, 2});
  CHECK(now.rate_at(2, "mlp", 4, false).steps_per_s == Approx(12));
  CHECK(now.rate_at(2, "mlp", 4, false).source == throughput_source::server_table);
  CHECK(now.rate_at(0, "mlp", 4, false).source == throughput_source::type_table);
  const auto v = now.version();
  rates.record(2, "mlp", 4, 4, 0.0);  // ignored
  CHECK(rates.for_live(cl, {0, 1, 2}).version() == v);
  // Rank 1 is lost: the live cluster is ranks 0 and 2; rank 2 is now server 1 and keeps its
  // measurement.
  const cluster live2 = make_cluster({cl.servers[0], cl.servers[2]});
  const auto& after = rates.for_live(live2, {0, 2});
  CHECK(after.rate_at(1, "mlp", 4, false).steps_per_s == Approx(12));
  CHECK(after.rate_at(0, "mlp", 4, false).source == throughput_source::type_table);
  CHECK(after.version() != v);  // a new model: caches keyed by version start over
}
