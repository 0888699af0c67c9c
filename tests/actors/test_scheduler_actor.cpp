// Tests of the scheduler and node actors together in one process: every job finishes, jobs
// moved between nodes end bitwise identical to uninterrupted runs, a lost node's copies are
// replanned, a node speaking another protocol version or describing another server is
// refused, a node on real GPUs is not throttled, jobs are submitted and cancelled. The scheduler's
// timers (registration, rounds, report deadlines, heartbeats, arrivals) are tested on the virtual
// clock in test_scheduler_clock.cpp.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/core/input_limits.hpp"
#include "actor_support.hpp"
#include "runtime/core/timeline.hpp"
#include "runtime/node/train/checkpoint.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

/// Loads a job's final checkpoint (the newest its summary names) into a fresh trainable.
std::vector<float> final_params(const job_summary& j, const std::string& kind, std::uint64_t seed) {
  auto t = train::builtin_trainables().make(kind, seed);
  REQUIRE(t);
  REQUIRE_FALSE(j.checkpoint.empty());
  auto h = train::load_trainable_checkpoint(j.checkpoint, **t);
  REQUIRE(h);
  CHECK(h->job == j.id);
  return (*t)->params();
}

/// Runs `jobs` on one-GPU nodes of `speeds` with `setup` applied to each node's configuration
/// and to the scheduler's; returns the summary.
run_summary run_with_hooks(const std::string& dir, const std::vector<double>& speeds,
                           const std::vector<run_job>& jobs,
                           const std::function<void(node_config&)>& node_setup,
                           const std::function<void(scheduler_config&)>& sched_setup = {}) {
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  const cluster cl = speed_cluster(speeds);
  auto sc = make_sched_config(cl, jobs, dir);
  if (sched_setup) sched_setup(sc);
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor, sc, caf::actor_cast<caf::actor>(listener));
  for (int r = 0; r < static_cast<int>(speeds.size()); ++r) {
    auto nc = make_node_config(cl, r, kinds);
    node_setup(nc);
    sys.spawn(node_actor, nc, sched);
  }
  return await_summary(listener, 40);
}

/// Every job finished, bitwise equal to its uninterrupted training; at most two checkpoint
/// files per job and no temporary file are left in `dir`.
void check_finished_and_tidy(const run_summary& sum, const std::vector<run_job>& jobs,
                             const temp_dir& dir) {
  for (const auto& j : sum.jobs) {
    INFO("job " << j.id);
    const auto& spec = jobs[static_cast<std::size_t>(j.id)];
    CHECK(j.finished);
    CHECK(j.steps == static_cast<std::int64_t>(spec.spec.total_steps));
    CHECK(same_bits(final_params(j, spec.kind, spec.seed),
                    uninterrupted(spec.kind, spec.seed, j.steps)));
  }
  std::map<std::string, int> per_job;
  for (const auto& name : dir.entries()) {
    INFO(name);
    CHECK(name.find(".tmp.") == std::string::npos);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".ckpt") == 0)
      ++per_job[name.substr(0, name.find('.'))];
  }
  for (const auto& [job, n] : per_job) {
    INFO(job);
    CHECK(n <= 2);
  }
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
    CHECK(same_bits(final_params(j, jobs[j.id].kind, jobs[j.id].seed),
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
  for (int i = 0; i < 3; ++i)
    jobs.push_back(make_run_job(i, "softmax_regression", 80, 0.01, i + 1));
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
    CHECK(same_bits(final_params(j, "softmax_regression", j.id + 1),
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

TEST_CASE("a node on (fake) real GPUs is not throttled by its speed factor",
          "[actors][scheduler][gpu]") {
  // Declared at speed 0.1: 400 steps of 0.05 s would take 200 s throttled.
  const cluster cl = speed_cluster({0.1});
  const std::vector<run_job> jobs{make_run_job(0, "softmax_regression", 400, 0.05, 1)};
  temp_dir dir("real_gpus");
  const auto kinds = train::builtin_trainables();  // outlives the actor system
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor listener{sys};
  auto sched = sys.spawn(scheduler_actor, make_sched_config(cl, jobs, dir.str()),
                         caf::actor_cast<caf::actor>(listener));
  auto nc = make_node_config(cl, 0, kinds);
  nc.gpus.devices = {gpu::device_info{0, "Tesla V100-SXM2-16GB", 0}};
  sys.spawn(node_actor, nc, sched);
  auto sum = await_summary(listener, 10);
  INFO(sum.error);
  REQUIRE(sum.ok);
  REQUIRE(sum.jobs.size() == 1);
  CHECK(sum.jobs[0].finished);
  CHECK(sum.jobs[0].steps == 400);
  CHECK(sum.rounds <= 10);  // 0.3 s rounds
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
  run_job d;
  d.kind = "no_such_kind";
  d.spec.total_steps = 10;
  d.id_given = false;
  auto submit = [&](const run_job& j, std::string* refusal = nullptr) {
    std::int64_t id = -1;
    client->request(sched, std::chrono::seconds(5), submit_job{{j}})
        .receive([&](std::vector<std::int64_t> ids) { id = ids.at(0); },
                 [&](caf::error& e) {
                   if (refusal) *refusal = describe(sys, e);
                 });
    return id;
  };
  std::string refusal;
  CHECK(submit(d, &refusal) == -1);
  CHECK(refusal.find("unknown job kind 'no_such_kind'") != std::string::npos);
  d.kind = "mlp";
  d.seed = 5;
  CHECK(submit(d) == 1);
  d.id_given = true;  // a given id that is taken is refused
  d.spec.id = 1;
  CHECK(submit(d, &refusal) == -1);
  CHECK(refusal.find("job id 1 is taken") != std::string::npos);
  d.id_given = false;
  d.spec.total_steps = 100000;  // would take 1000 s; cancelled below
  const std::int64_t long_id = submit(d);
  REQUIRE(long_id == 2);
  // A user's id at the bound: the next automatic id is the smallest free one, not the bound
  // plus one (which no journal replay reads back).
  d.spec.total_steps = 10;
  d.id_given = true;
  d.spec.id = limits::max_job_id;
  CHECK(submit(d) == limits::max_job_id);
  d.id_given = false;
  CHECK(submit(d) == 3);
  auto cancel = [&](std::int64_t id) {
    auto out = cancel_outcome::unknown;
    client->request(sched, std::chrono::seconds(5), cancel_job{id})
        .receive([&](cancel_outcome o) { out = o; }, [](caf::error&) {});
    return out;
  };
  CHECK(cancel(long_id) == cancel_outcome::accepted);
  CHECK(cancel(77) == cancel_outcome::unknown);
  auto sum = await_summary(listener, 30);
  INFO(sum.error);
  REQUIRE(sum.ok);
  REQUIRE(sum.jobs.size() == 5);
  CHECK(sum.jobs[0].finished);
  CHECK(sum.jobs[1].finished);
  CHECK(sum.jobs[1].steps == 10);
  CHECK(sum.jobs[2].canceled);
  CHECK_FALSE(sum.jobs[2].finished);
  CHECK(sum.jobs[3].finished);
  CHECK(sum.jobs[4].finished);
}

namespace {

/// Wraps a policy and records, every round, what `snapshot::rates` says of job 0 on each
/// server (rate and tier).
class rates_recorder final : public tessera::test::observed_policy {
 public:
  using observed_policy::observed_policy;
  std::vector<std::vector<server_rate>> seen;

 private:
  void before(const snapshot& s) override {
    std::vector<server_rate> round;
    for (const auto& jv : s.jobs)
      if (jv.spec->id == 0 && s.rates)
        for (const auto& sv : s.cl->servers)
          round.push_back(s.rates->rate_at(sv.id, jv.spec->job_type, jv.spec->scale_factor, false));
    seen.push_back(round);
  }
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
  // A measurement, so not an exact figure: the node's throttle keeps a step at
  // 10 ms or more (at most about 100 steps/s), and a loaded machine (CI runs this
  // under ASan beside other tests: 64 steps/s was seen) makes it slower.
  CHECK(last[0].steps_per_s > 5);
  CHECK(last[0].steps_per_s <= Approx(100).epsilon(0.1));
  CHECK(last[0].steps_per_s != first[0].steps_per_s);
  CHECK(last[1].source == throughput_source::type_table);
}

TEST_CASE("a job whose checkpoint is corrupted falls back to the previous one, the others go on",
          "[actors][scheduler][fallback]") {
  temp_dir dir("sched_corrupt");
  std::vector<run_job> jobs;
  for (int i = 0; i < 3; ++i)
    jobs.push_back(make_run_job(i, "softmax_regression", 150, 0.01, i + 1));
  // Every round loads from disk; job 1's first checkpoint from round 2 on gets a flipped byte.
  auto flipped = std::make_shared<std::atomic<bool>>(false);
  auto sum = run_with_hooks(dir.str(), {1.0, 1.0}, jobs, [flipped](node_config& nc) {
    nc.hooks.copy.always_load = true;
    nc.hooks.copy.after_checkpoint = [flipped](const start_copy& o, std::int64_t round,
                                               const std::string& path) {
      if (o.job != 1 || round < 2 || flipped->exchange(true)) return;
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(train::checkpoint_header_size + 9));
      f.put('\x5a');
    };
  });
  INFO(sum.error);
  REQUIRE(sum.ok);
  CHECK(sum.checkpoint_fallbacks == 1);
  CHECK(sum.restarts_from_scratch == 0);
  for (const auto& j : sum.jobs) {
    INFO("job " << j.id);
    CHECK(j.checkpoint_fallbacks == (j.id == 1 ? 1 : 0));
    CHECK(j.regressions == 0);  // a fallback is counted as such, not as a regression
  }
  check_finished_and_tidy(sum, jobs, dir);
}

TEST_CASE("a checkpoint directory that takes no writes pauses the jobs until it does",
          "[actors][scheduler][pause]") {
  temp_dir dir("sched_full");
  std::vector<run_job> jobs;
  for (int i = 0; i < 3; ++i)
    jobs.push_back(make_run_job(i, "softmax_regression", 150, 0.01, i + 1));
  // Writes at the end of rounds 2-4 fail as on a full disk, and so do the scheduler's probes
  // after those rounds: the jobs wait from round 3 and resume in round 6.
  auto full = [](std::int64_t round) { return round >= 2 && round <= 4 ? ENOSPC : 0; };
  auto sum = run_with_hooks(
      dir.str(), {1.0, 1.0}, jobs,
      [&](node_config& nc) {
        nc.hooks.copy.checkpoint_errno = [&](const start_copy&, std::int64_t round) {
          return full(round);
        };
      },
      [&](scheduler_config& sc) { sc.hooks.checkpoint_probe_errno = full; });
  INFO(sum.error);
  REQUIRE(sum.ok);
  CHECK(sum.checkpoint_pauses == 1);
  int failures = 0;
  for (const auto& j : sum.jobs) {
    INFO("job " << j.id);
    CHECK(j.paused_rounds == 3);  // rounds 3, 4 and 5 planned nothing
    failures += j.checkpoint_write_failures;
    CHECK(j.checkpoint_fallbacks == 0);
  }
  CHECK(failures == 2);  // the two jobs that ran in round 2
  check_finished_and_tidy(sum, jobs, dir);
}

TEST_CASE("a packed policy pairs jobs on one GPU of a live run, and every job finishes",
          "[actors][scheduler][packing]") {
  temp_dir dir("packed");
  auto bundled = throughput_table::load_bundled();
  REQUIRE(bundled);
  auto packed = make_policy("max_min_fairness_packed");
  REQUIRE(packed);
  // Four jobs on two one-GPU nodes (a v100 and a p100), of a job type the bundled table pairs
  // with itself on a v100.
  std::vector<run_job> jobs;
  for (int i = 0; i < 4; ++i) {
    jobs.push_back(make_run_job(i, i % 2 ? "mlp" : "softmax_regression", 30, 0.01, i + 1));
    jobs.back().spec.job_type = "ResNet-18 (batch size 64)";
  }
  std::ostringstream timeline;
  const auto sum = run_with_hooks(
      dir.str(), {1.0, 1.0}, jobs, [](node_config&) {},
      [&](scheduler_config& sc) {
        sc.pol = std::shared_ptr<policy>(std::move(*packed));
        sc.colocation = std::make_shared<const throughput_table>(std::move(*bundled));
        sc.timeline = std::make_shared<timeline_recorder>(timeline, sc.cl, "run", "packed", 0.3);
      });
  INFO(sum.error);
  REQUIRE(sum.ok);
  CHECK(sum.failed_ranks.empty());
  check_finished_and_tidy(sum, jobs, dir);
  // A pair: two jobs placed on one server (of one GPU) in one round.
  int paired_rounds = 0;
  std::istringstream lines(timeline.str());
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("placements")) continue;
    std::map<std::string, int> per_server;  // server name -> jobs placed there
    for (const auto& pl : j["placements"]) ++per_server[pl["server"].get<std::string>()];
    for (const auto& [server, n] : per_server) {
      CHECK(n <= 2);
      if (n == 2) ++paired_rounds;
    }
  }
  CHECK(paired_rounds > 0);
  for (const auto& r : sum.round_records) CHECK(r.busy_gpus <= 2);
}
