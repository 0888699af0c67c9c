// Tests of the message protocol (actors/protocol.hpp): every message survives serialisation
// as a registered type, and errors carry their text.
#include <catch2/catch.hpp>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actor_support.hpp"
#include "actors/record_json.hpp"

using namespace tessera::actors;
using tessera::actors::test::test_config;

namespace {

/// Serialises `x` inside a caf::message (which needs the type registered by name) and reads
/// it back.
template <class T>
T round_trip(caf::actor_system& sys, const T& x) {
  auto msg = caf::make_message(x);
  std::vector<char> buf;
  caf::binary_serializer out{sys, buf};
  REQUIRE_FALSE(out(msg));
  caf::message back;
  caf::binary_deserializer in{sys, buf};
  REQUIRE_FALSE(in(back));
  REQUIRE(back.match_elements<T>());
  return back.get_as<T>(0);
}

}  // namespace

TEST_CASE("every protocol message is registered and round-trips", "[actors][protocol]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  for (const char* name :
       {"tessera::auth_request", "tessera::auth_challenge", "tessera::node_hello",
        "tessera::node_welcome", "tessera::heartbeat", "tessera::start_copy",
        "tessera::round_orders", "tessera::stop_copy", "tessera::copy_started",
        "tessera::progress_report", "tessera::checkpoint_done", "tessera::job_finished",
        "tessera::round_done", "tessera::job_summary", "tessera::run_summary"}) {
    INFO(name);
    CHECK(sys.types().make_value(name) != nullptr);
  }

  node_hello h{protocol_version, 2, "slow", "k80", 4, 0.25, "host-a", 4242, {1, 2, 3}};
  auto h2 = round_trip(sys, h);
  CHECK(h2.version == protocol_version);
  CHECK(h2.rank == 2);
  CHECK(h2.name == "slow");
  CHECK(h2.gpu_type == "k80");
  CHECK(h2.gpus == 4);
  CHECK(h2.speed == 0.25);
  CHECK(h2.host == "host-a");
  CHECK(h2.pid == 4242);
  CHECK(h2.proof == std::vector<std::uint8_t>{1, 2, 3});
  CHECK(round_trip(sys, auth_request{{9, 8}}).nonce == std::vector<std::uint8_t>{9, 8});
  const auto ch = round_trip(sys, auth_challenge{{1}, {2, 3}});
  CHECK(ch.nonce == std::vector<std::uint8_t>{1});
  CHECK(ch.proof == std::vector<std::uint8_t>{2, 3});

  start_copy c;
  c.job = 7;
  c.copy = 1;
  c.kind = "mlp";
  c.seed = 99;
  c.config = {{"lr", 0.05}, {"hidden", 16}};
  c.scale = 2;
  c.gpus = 2;
  c.total_steps = 300;
  c.resume_step = 120;
  c.step_budget = 10;
  c.step_time = 0.01;
  c.checkpoint_path = "/tmp/x/job-7.r5.ckpt";
  c.resume_path = "/tmp/x/job-7.r4.ckpt";
  c.fallback_path = "/tmp/x/job-7.r2.ckpt";
  c.fallback_step = 80;
  c.epoch = 1234567;
  c.fence_path = "/tmp/x/job-7.fence";
  c.partner = 12;
  c.speed_share = 0.625;
  round_orders o{5, 0.5, {c, c}};
  auto o2 = round_trip(sys, o);
  CHECK(o2.round == 5);
  CHECK(o2.length == 0.5);
  REQUIRE(o2.copies.size() == 2);
  const auto& c2 = o2.copies[1];
  CHECK(c2.job == 7);
  CHECK(c2.copy == 1);
  CHECK(c2.kind == "mlp");
  CHECK(c2.seed == 99);
  CHECK(c2.config == c.config);
  CHECK(c2.scale == 2);
  CHECK(c2.total_steps == 300);
  CHECK(c2.resume_step == 120);
  CHECK(c2.step_budget == 10);
  CHECK(c2.step_time == 0.01);
  CHECK(c2.checkpoint_path == c.checkpoint_path);
  CHECK(c2.resume_path == c.resume_path);
  CHECK(c2.fallback_path == c.fallback_path);
  CHECK(c2.fallback_step == 80);
  CHECK(c2.epoch == 1234567);
  CHECK(c2.fence_path == c.fence_path);
  CHECK(c2.partner == 12);
  CHECK(c2.speed_share == 0.625);

  progress_report p;
  p.round = 3;
  p.job = 7;
  p.step = 42;
  p.steps = 12;
  p.busy_seconds = 0.49;
  p.throughput = 24.5;
  p.loss = 0.7;
  p.error = "boom";
  p.checkpoint_error = "/ck: No space left on device";
  auto p2 = round_trip(sys, p);
  CHECK(p2.step == 42);
  CHECK(p2.steps == 12);
  CHECK(p2.throughput == 24.5);
  CHECK(p2.error == "boom");
  CHECK(p2.checkpoint_error == p.checkpoint_error);

  CHECK(round_trip(sys, heartbeat{17}).seq == 17);
  CHECK(round_trip(sys, stop_copy{1, 2, 0}).job == 2);
  const auto started = round_trip(sys, copy_started{2, 3, 0, 44, 3, {"a", "b"}, "bad"});
  CHECK(started.step == 44);
  CHECK(started.source == static_cast<std::int32_t>(state_source::fallback));
  CHECK(started.bad_files == std::vector<std::string>{"a", "b"});
  CHECK(started.why == "bad");
  CHECK(round_trip(sys, checkpoint_done{2, 3, 0, 44, "p"}).path == "p");
  CHECK(round_trip(sys, job_finished{3, 50, 0.1, 0.9}).accuracy == 0.9);
  CHECK(round_trip(sys, round_done{9}).round == 9);
  CHECK(round_trip(sys, node_welcome{2, 0.5, 0.1}).round_length == 0.5);

  run_summary s;
  s.ok = true;
  s.rounds = 4;
  job_summary js;
  js.id = 3;
  js.busy_gpu_seconds = {1.0, 2.0};
  js.regressions = 0;
  js.lost_rounds = 1;
  js.job_type = "mlp";
  js.scale = 4;
  js.total_steps = 90;
  js.first_start = 1.5;
  js.run_time = 7.25;
  js.checkpoint_fallbacks = 2;
  js.restarts_from_scratch = 1;
  js.checkpoint_write_failures = 3;
  js.paused_rounds = 4;
  js.checkpoint = "/ck/job-3.r9.ckpt";
  s.jobs = {js};
  s.checkpoint_fallbacks = 2;
  s.restarts_from_scratch = 1;
  s.checkpoint_pauses = 5;
  s.failed_ranks = {2};
  s.dispatch_latency = {0.001};
  s.round_records = {tessera::round_record{2.0, 3, 1, 4, 2}};
  s.dropped = 11;
  s.refused = 2;
  s.joins = 1;
  auto s2 = round_trip(sys, s);
  CHECK(s2.dropped == 11);
  CHECK(s2.refused == 2);
  CHECK(s2.joins == 1);
  CHECK(s2.ok);
  REQUIRE(s2.jobs.size() == 1);
  CHECK(s2.jobs[0].busy_gpu_seconds == js.busy_gpu_seconds);
  CHECK(s2.jobs[0].lost_rounds == 1);
  CHECK(s2.jobs[0].job_type == "mlp");
  CHECK(s2.jobs[0].scale == 4);
  CHECK(s2.jobs[0].total_steps == 90);
  CHECK(s2.jobs[0].first_start == 1.5);
  CHECK(s2.jobs[0].run_time == 7.25);
  CHECK(s2.jobs[0].checkpoint_fallbacks == 2);
  CHECK(s2.jobs[0].restarts_from_scratch == 1);
  CHECK(s2.jobs[0].checkpoint_write_failures == 3);
  CHECK(s2.jobs[0].paused_rounds == 4);
  CHECK(s2.jobs[0].checkpoint == js.checkpoint);
  CHECK(s2.checkpoint_fallbacks == 2);
  CHECK(s2.restarts_from_scratch == 1);
  CHECK(s2.checkpoint_pauses == 5);
  CHECK(s2.failed_ranks == std::vector<std::int32_t>{2});
  REQUIRE(s2.round_records.size() == 1);
  CHECK(s2.round_records[0].start == 2.0);
  CHECK(s2.round_records[0].busy_gpus == 3);
  CHECK(s2.round_records[0].idle_gpus == 1);
  CHECK(s2.round_records[0].active_jobs == 4);
  CHECK(s2.round_records[0].waiting_jobs == 2);
}

TEST_CASE("run errors carry their message", "[actors][protocol]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  auto e = make_run_error(run_errc::protocol_mismatch, "speaks version 9");
  CHECK(e.category() == run_error_category);
  CHECK(e.code() == static_cast<std::uint8_t>(run_errc::protocol_mismatch));
  CHECK(describe(sys, e) == "speaks version 9");
  CHECK(sys.render(e).find("speaks version 9") != std::string::npos);
}

TEST_CASE("a job summary's JSON and its serialisation walk one field list", "[protocol]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  // Every field set to a value unlike its default, so a field the walk missed would show.
  job_summary js;
  std::size_t fields = 0;
  fields_of(js, [&](const char* type, auto... fs) {
    CHECK(std::string(type) == "job_summary");
    fields = sizeof...(fs);
  });
  js.id = 7;
  js.kind = "mlp";
  js.state = "finished";
  js.failure = "none";
  js.loss = 0.25;
  js.jct = 12.5;
  js.planned_gpu_seconds = {1.0, 2.0};
  js.startup_seconds = 0.75;
  js.reached_target = true;
  const auto j = json_of_fields<nlohmann::json>(js);
  CHECK(j.size() == fields);  // one key per field: no two fields share a name
  CHECK(j["id"] == 7);
  CHECK(j["kind"] == "mlp");
  CHECK(j["jct"] == 12.5);
  CHECK(j["planned_gpu_seconds"] == nlohmann::json::array({1.0, 2.0}));
  CHECK(j["startup_seconds"] == 0.75);
  CHECK(j["reached_target"] == true);
  // What crosses the wire is what the JSON shows.
  CHECK(json_of_fields<nlohmann::json>(round_trip(sys, js)) == j);
}
