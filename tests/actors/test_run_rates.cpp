// actors/run_rates: the live run's per-server throughput model and its measurements.
#include <catch2/catch.hpp>

#include "actors/run_rates.hpp"

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

TEST_CASE("run_rates: co-location entries from the source table's ratios", "[run_rates][packing]") {
  const cluster cl = three_nodes();
  auto source = std::make_shared<throughput_table>();
  const job_key ra{"ResNet-18", 1}, lm{"LM", 1}, tr{"Transformer", 1};
  for (const char* g : {"v100", "p100", "k80"}) {
    source->set_isolated(g, ra, 10.0);
    source->set_isolated(g, lm, 4.0);
    source->set_isolated(g, tr, 2.0);
  }
  // ResNet-18 beside LM on v100 only, in ResNet-18's row; LM's own row is missing.
  source->set_colocated("v100", ra, lm, {6.0, 1.0});
  run_rates rates(cl, source);
  auto a = rj(0, "ResNet-18", 1, 0.02);   // solo 50 steps/s
  auto b = rj(1, "LM", 1, 0.1);           // solo 10 steps/s
  auto c = rj(2, "Transformer", 1, 0.1);  // no pair in the source
  auto d = rj(3, "ResNet-18", 1, 0.04);   // another step time: its own key, same source row
  rates.add(a);
  rates.add(b);
  rates.add(c);
  rates.add(d);
  const auto& live = rates.for_live(cl, {0, 1, 2});
  const auto ab = live.colocated_rate("ResNet-18", "LM", 1, {{0, 1}});
  REQUIRE(ab);
  CHECK(ab->first == Approx(50 * 0.6));    // 6 / 10 of its solo rate
  CHECK(ab->second == Approx(10 * 0.25));  // 1 / 4 of its solo rate, from the other row
  const auto ba = live.colocated_rate("LM", "ResNet-18", 1, {{0, 1}});
  REQUIRE(ba);
  CHECK(ba->first == Approx(ab->second));
  const auto db = live.colocated_rate(d.spec.job_type, "LM", 1, {{0, 1}});
  REQUIRE(db);
  CHECK(db->first == Approx(25 * 0.6));
  CHECK_FALSE(live.colocated_rate("ResNet-18", "LM", 1, {{1, 1}}));  // p100: not listed
  CHECK_FALSE(live.colocated_rate("ResNet-18", "Transformer", 1, {{0, 1}}));
  run_rates plain(cl);  // no source: no pairs
  auto a2 = rj(0, "ResNet-18", 1, 0.02);
  auto b2 = rj(1, "LM", 1, 0.1);
  plain.add(a2);
  plain.add(b2);
  CHECK_FALSE(plain.for_live(cl, {0, 1, 2}).colocated_rate("ResNet-18", "LM", 1, {{0, 1}}));
}

TEST_CASE("run_rates: the bundled table pairs its own job types", "[run_rates][packing]") {
  const cluster cl = three_nodes();
  auto bundled = throughput_table::load_bundled();
  REQUIRE(bundled);
  const std::string r18 = "ResNet-18 (batch size 64)", r50 = "ResNet-50 (batch size 64)";
  auto source = std::make_shared<const throughput_table>(std::move(*bundled));
  run_rates rates(cl, source);
  auto a = rj(0, r18, 1, 0.02);
  auto b = rj(1, r50, 1, 0.05);
  rates.add(a);
  rates.add(b);
  const auto& live = rates.for_live(cl, {0, 1, 2});
  const auto pair = live.colocated_rate(r18, r50, 1, {{2, 1}});  // k80, speed 0.25
  const auto solo = source->isolated("k80", {r18, 1});
  const auto src = source->colocated("k80", {r18, 1}, {r50, 1});
  REQUIRE(pair);
  REQUIRE(solo);
  REQUIRE(src);
  CHECK(pair->first == Approx(50 * 0.25 * src->first / *solo));
}
