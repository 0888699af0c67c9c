// Tests of the scheduler and node actors together in one process: every job finishes, jobs
// moved between nodes end bitwise identical to uninterrupted runs, a lost node's copies are
// replanned, a node speaking another protocol version or describing another server is
// refused, jobs are submitted and cancelled. The scheduler's timers (registration, rounds,
// report deadlines, heartbeats, arrivals) are tested on the virtual clock in
// test_scheduler_clock.cpp.
#include <catch2/catch.hpp>

#include <thread>

#include "actor_support.hpp"
#include "runtime/train/checkpoint.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

/// Loads job `id`'s final checkpoint from `dir` into a fresh trainable.
std::vector<float> final_params(const std::string& dir, job_id id, const std::string& kind,
                                std::uint64_t seed) {
  auto t = train::builtin_trainables().make(kind, seed);
  REQUIRE(t);
  auto h = train::load_trainable_checkpoint(dir + "/job-" + std::to_string(id) + ".ckpt", **t);
  REQUIRE(h);
  return (*t)->params();
}

}  // namespace

TEST_CASE("scheduler and nodes run every job to completion", "[actors][scheduler]") {
  temp_dir dir("complete");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0, 0.5});
  // Three jobs on two one-GPU nodes: max-min fairness rotates them, so jobs move between
  // nodes through their checkpoints.
  std::vector<run_job> jobs = {make_run_job(0, "softmax_regression", 40, 0.01, 1),
                               make_run_job(1, "mlp", 30, 0.01, 2),
                               make_run_job(2, "softmax_regression", 30, 0.01, 3)};
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor, make_sched_config(cl, jobs, dir.str()),
                         caf::actor_cast<caf::actor>(listener));
  for (int r = 0; r < 2; ++r) sys.spawn(node_actor, make_node_config(cl, r, kinds), sched);
  auto sum = await_summary(listener, 30);
  INFO(sum.error);
  REQUIRE(sum.ok);
  CHECK(sum.failed_ranks.empty());
  REQUIRE(sum.jobs.size() == 3);
  CHECK(sum.messages > 0);
  CHECK(static_cast<std::int64_t>(sum.dispatch_latency.size()) <= sum.rounds);
  int moved = 0;
  for (const auto& j : sum.jobs) {
    INFO("job " << j.id);
    CHECK(j.finished);
    CHECK(j.steps == jobs[j.id].spec.total_steps);
    CHECK(j.jct > 0);
    CHECK(j.regressions == 0);
    CHECK(j.accuracy > 0.3);
    moved += j.restarts;
    CHECK(same_bits(final_params(dir.str(), j.id, jobs[j.id].kind, jobs[j.id].seed),
                    uninterrupted(jobs[j.id].kind, jobs[j.id].seed,
                                  static_cast<std::int64_t>(jobs[j.id].spec.total_steps))));
  }
  CHECK(moved > 0);  // some job did resume on the other node
}

TEST_CASE("a lost node's copies resume elsewhere from their last checkpoint",
          "[actors][scheduler][failure]") {
  temp_dir dir("lost");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0, 1.0, 1.0});
  std::vector<run_job> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(make_run_job(i, "softmax_regression", 80, 0.01, i + 1));
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor, make_sched_config(cl, jobs, dir.str()),
                         caf::actor_cast<caf::actor>(listener));
  std::vector<caf::actor> nodes;
  for (int r = 0; r < 3; ++r)
    nodes.push_back(sys.spawn(node_actor, make_node_config(cl, r, kinds), sched));
  // Kill node 1 in the middle of round 1 (rounds are 0.3 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  caf::anon_send_exit(nodes[1], caf::exit_reason::kill);
  auto sum = await_summary(listener, 30);
  INFO(sum.error);
  REQUIRE(sum.ok);
  CHECK(sum.failed_ranks == std::vector<std::int32_t>{1});
  int lost = 0;
  for (const auto& j : sum.jobs) {
    CHECK(j.finished);
    CHECK(j.steps == 80);
    CHECK(j.lost_rounds <= 1);
    CHECK(j.regressions == 0);
    lost += j.lost_rounds;
    CHECK(same_bits(final_params(dir.str(), j.id, "softmax_regression", j.id + 1),
                    uninterrupted("softmax_regression", j.id + 1, 80)));
  }
  CHECK(lost == 1);  // exactly the copy that was running on node 1
}

TEST_CASE("a node speaking another protocol version is refused", "[actors][scheduler]") {
  temp_dir dir("version");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0, 1.0});
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor,
                         make_sched_config(cl, {make_run_job(0, "mlp", 10, 0.01, 1)}, dir.str()),
                         caf::actor_cast<caf::actor>(listener));
  auto good = sys.spawn(node_actor, make_node_config(cl, 0, kinds), sched);
  auto nc = make_node_config(cl, 1, kinds);
  nc.version = protocol_version + 1;
  auto bad = sys.spawn(node_actor, nc, sched);
  caf::scoped_actor watcher{sys};
  watcher->monitor(bad);
  std::string reason;
  watcher->receive([&](const caf::down_msg& d) { reason = describe(sys, d.reason); },
                   caf::after(std::chrono::seconds(10)) >> [] {});
  INFO(reason);
  CHECK(reason.find("refused") != std::string::npos);
  CHECK(reason.find("protocol version " + std::to_string(protocol_version + 1)) !=
        std::string::npos);
  auto sum = await_summary(listener, 10);
  CHECK_FALSE(sum.ok);
  CHECK(sum.error.find("protocol version") != std::string::npos);
}

TEST_CASE("a node describing another server is refused", "[actors][scheduler]") {
  temp_dir dir("server");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0});
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor,
                         make_sched_config(cl, {make_run_job(0, "mlp", 10, 0.01, 1)}, dir.str()),
                         caf::actor_cast<caf::actor>(listener));
  auto nc = make_node_config(cl, 0, kinds);
  nc.srv.gpus = 8;
  sys.spawn(node_actor, nc, sched);
  auto sum = await_summary(listener, 10);
  CHECK_FALSE(sum.ok);
  CHECK(sum.error.find("describes its server differently") != std::string::npos);
}

TEST_CASE("jobs can be submitted and cancelled while the run goes on", "[actors][scheduler]") {
  temp_dir dir("submit");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0});
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(
      scheduler_actor,
      make_sched_config(cl, {make_run_job(0, "softmax_regression", 60, 0.01, 1)}, dir.str()),
      caf::actor_cast<caf::actor>(listener));
  sys.spawn(node_actor, make_node_config(cl, 0, kinds), sched);
  caf::scoped_actor client{sys};
  job_desc d;
  d.kind = "no_such_kind";
  d.total_steps = 10;
  std::string refusal;
  client->request(sched, std::chrono::seconds(5), submit_job{d})
      .receive([](std::int64_t) {}, [&](caf::error& e) { refusal = describe(sys, e); });
  CHECK(refusal.find("unknown job kind 'no_such_kind'") != std::string::npos);
  d.kind = "mlp";
  d.seed = 5;
  std::int64_t id = -1;
  client->request(sched, std::chrono::seconds(5), submit_job{d})
      .receive([&](std::int64_t x) { id = x; }, [](caf::error&) {});
  CHECK(id == 1);
  d.total_steps = 100000;  // would take 1000 s; cancelled below
  std::int64_t long_id = -1;
  client->request(sched, std::chrono::seconds(5), submit_job{d})
      .receive([&](std::int64_t x) { long_id = x; }, [](caf::error&) {});
  REQUIRE(long_id == 2);
  bool cancelled = false;
  client->request(sched, std::chrono::seconds(5), cancel_job{long_id})
      .receive([&](bool b) { cancelled = b; }, [](caf::error&) {});
  CHECK(cancelled);
  auto sum = await_summary(listener, 30);
  INFO(sum.error);
  REQUIRE(sum.ok);
  REQUIRE(sum.jobs.size() == 3);
  CHECK(sum.jobs[0].finished);
  CHECK(sum.jobs[1].finished);
  CHECK(sum.jobs[1].steps == 10);
  CHECK(sum.jobs[2].canceled);
  CHECK_FALSE(sum.jobs[2].finished);
}

namespace {

/// Wraps a policy and records, every round, what `snapshot::rates` says of job 0 on each
/// server (rate and tier).
class rates_recorder final : public policy {
 public:
  explicit rates_recorder(std::unique_ptr<policy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  result<round_plan> plan(const snapshot& s) override {
    std::vector<server_rate> round;
    for (const auto& jv : s.jobs)
      if (jv.spec->id == 0 && s.rates)
        for (const auto& sv : s.cl->servers)
          round.push_back(s.rates->rate_at(sv.id, jv.spec->job_type, jv.spec->scale_factor, false));
    seen.push_back(round);
    return inner_->plan(s);
  }
  std::vector<std::vector<server_rate>> seen;

 private:
  std::unique_ptr<policy> inner_;
};

}  // namespace

TEST_CASE("policies see per-server rates, and a node's measurement replaces the estimate",
          "[actors][scheduler][run_rates]") {
  temp_dir dir("rates");
  const auto kinds = train::builtin_trainables();
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster({1.0, 0.5});
  std::vector<run_job> jobs = {make_run_job(0, "mlp", 150, 0.01, 1)};
  auto sc = make_sched_config(cl, jobs, dir.str(), "fifo_perf");
  auto inner = make_policy("fifo_perf");
  REQUIRE(inner);
  auto recorder = std::make_shared<rates_recorder>(std::move(*inner));
  sc.pol = recorder;
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor, sc, caf::actor_cast<caf::actor>(listener));
  for (int r = 0; r < 2; ++r) sys.spawn(node_actor, make_node_config(cl, r, kinds), sched);
  auto sum = await_summary(listener, 30);
  INFO(sum.error);
  REQUIRE(sum.ok);
  REQUIRE(recorder->seen.size() >= 3);
  // Round 0: the step_time model on both (1 / 0.01 s x speed).
  const auto& first = recorder->seen.front();
  REQUIRE(first.size() == 2);
  CHECK(first[0].source == throughput_source::type_table);
  CHECK(first[0].steps_per_s == Approx(100));
  CHECK(first[1].steps_per_s == Approx(50));
  // Later rounds: the node the job ran on (the fast one, rank 0) is measured.
  const auto& last = recorder->seen.back();
  REQUIRE(last.size() == 2);
  CHECK(last[0].source == throughput_source::server_table);
  CHECK(last[0].steps_per_s == Approx(100).epsilon(0.3));
  CHECK(last[0].steps_per_s != first[0].steps_per_s);
  CHECK(last[1].source == throughput_source::type_table);
}
