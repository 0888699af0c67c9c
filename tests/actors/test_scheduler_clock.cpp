// The scheduler actor's timer logic on CAF's virtual clock (caf::scheduler::test_coordinator,
// the coordinator caf/test/dsl.hpp's fixtures run on): nothing sleeps; the test advances time
// and runs the queued messages. Scripted nodes register, report (or not) and send heartbeats
// (or not), and forward every round_orders to a probe, so each test reads when rounds start.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include "actor_support.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

using beat_atom = caf::atom_constant<caf::atom("beat")>;
using report_atom = caf::atom_constant<caf::atom("report")>;

/// How a scripted node behaves.
struct script {
  bool reports = true;             ///< answers round_orders with reports and round_done at once
  bool heartbeats = true;          ///< sends a heartbeat every heartbeat interval
  secret_key key = test_secret();  ///< the secret it proves
  std::shared_ptr<int> fenced = std::make_shared<int>(0);     ///< fenced_atom received
  std::shared_ptr<int> shutdowns = std::make_shared<int>(0);  ///< shutdown_atom, 0 received
  /// Seconds between heartbeats, cycled (empty: the welcome's interval): a busy host's
  /// uneven heartbeats.
  std::vector<double> gaps;
  /// Says it keeps warm programs with unsaved state (round_done::unsaved), and answers the
  /// scheduler's settle_atom at once (`settles`) or when told (answer_atom).
  bool unsaved = false;
  bool settles = true;
  std::shared_ptr<int> settle_asks = std::make_shared<int>(0);  ///< settle_atom received
};

/// A script that reports or holds its reports back, with or without heartbeats.
script scripted(bool reports, bool heartbeats) {
  script s;
  s.reports = reports;
  s.heartbeats = heartbeats;
  return s;
}

using mute_atom = caf::atom_constant<caf::atom("mute")>;

struct scripted_state {
  std::vector<round_orders> held;  ///< orders not yet reported (script::reports false)
  std::int64_t settle_round = -1;  ///< a settle not yet answered (script::settles false)
  std::size_t beats = 0;           ///< heartbeats sent
  bool muted = false;              ///< mute_atom: no more heartbeats or reports (a stopped process)
};

/// Reports every copy of `o` as having made 5 steps (at most its total) to its job's actor,
/// copy 0 with its checkpoint and, at the total, the job's completion; then the round as done
/// to the scheduler (a node's order: reports first).
void report(caf::event_based_actor* self, const caf::actor& sched, const round_orders& o,
            bool unsaved) {
  for (const auto& c : o.copies) {
    progress_report r;
    r.round = o.round;
    r.job = c.job;
    r.copy = c.copy;
    r.step = std::min(c.total_steps, c.resume_step + 5);
    r.steps = r.step - c.resume_step;
    r.busy_seconds = o.length;
    self->send(c.job_actor, r);
    if (c.copy != 0) continue;
    self->send(c.job_actor, checkpoint_done{o.round, c.job, c.copy, r.step, c.checkpoint_path});
    if (r.step == c.total_steps) self->send(c.job_actor, job_finished{c.job, r.step, 0.1, 0.9});
  }
  self->send(sched, round_done{o.round, unsaved ? 1 : 0});
}

using answer_atom = caf::atom_constant<caf::atom("answer")>;

/// A node that registers as server `rank` of `cl` and follows `sc`; it forwards every
/// round_orders to `probe`; `report_atom` makes it report the orders it held back.
caf::behavior scripted_node(caf::stateful_actor<scripted_state>* self, cluster cl, int rank,
                            script sc, caf::actor sched, caf::actor probe) {
  const node_hello h = hello_for(cl, rank, "scripted");
  self->request(sched, caf::infinite, auth_request{test_nonce()})
      .then([=](const auth_challenge& c) {
        self->request(sched, caf::infinite, proven(h, nonce_pair{test_nonce(), c.nonce}, sc.key))
            .then([=](const node_welcome& w) {
              if (sc.heartbeats) self->send(self, beat_atom::value, w.heartbeat_interval);
            });
      });
  return {
      [=](beat_atom, double interval) {
        if (self->state.muted) return;
        self->send(sched, heartbeat{0});
        const double gap = sc.gaps.empty() ? interval : sc.gaps[self->state.beats % sc.gaps.size()];
        ++self->state.beats;
        self->delayed_send(
            self, std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(gap)),
            beat_atom::value, interval);
      },
      [=](mute_atom) { self->state.muted = true; },
      [=](const round_orders& o) {
        self->send(probe, o);
        if (sc.reports && !self->state.muted)
          report(self, sched, o, sc.unsaved);
        else
          self->state.held.push_back(o);
      },
      [=](report_atom) {
        for (const auto& o : self->state.held) report(self, sched, o, sc.unsaved);
        self->state.held.clear();
      },
      [=](settle_atom, const round_orders& o) {
        ++*sc.settle_asks;
        if (sc.settles && !self->state.muted)
          self->send(sched, settled_atom::value, o.round);
        else
          self->state.settle_round = o.round;
      },
      [=](answer_atom) { self->send(sched, settled_atom::value, self->state.settle_round); },
      [=](shutdown_atom, std::int32_t code) {
        if (code == 0) ++*sc.shutdowns;
        self->quit();
      },
      [=](fenced_atom, const std::string&) { ++*sc.fenced; },
      [=](leave_atom) { self->send(sched, leave_atom::value); },  // asked by the test
  };
}

/// A scheduler on the virtual clock with scripted nodes, a listener and a probe.
struct virtual_run : virtual_system {
  caf::scoped_actor listener{sys};
  caf::scoped_actor probe{sys};
  caf::actor sched;
  std::vector<caf::actor> nodes;
  cluster cl;

  virtual_run(std::vector<double> speeds, std::vector<run_job> jobs, bool serve = false,
              int min_nodes = 0)
      : cl(speed_cluster(speeds)) {
    auto sc = make_sched_config(cl, std::move(jobs), "/nonexistent");
    sc.serve = serve;
    sc.min_nodes = min_nodes;
    sc.round_length = 1;
    sc.register_timeout = 5;
    sc.heartbeat_interval = 0.5;
    sc.liveness = liveness_for(2);
    sc.report_grace = 4;
    sc.max_seconds = 1000;
    sched = sys.spawn(scheduler_actor, std::move(sc), caf::actor_cast<caf::actor>(listener));
  }
  ~virtual_run() {
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    for (const auto& n : nodes) caf::anon_send_exit(n, caf::exit_reason::kill);
    coord.run();
  }
  caf::actor node(int rank, script sc = {}) {
    nodes.push_back(
        sys.spawn(scripted_node, cl, rank, sc, sched, caf::actor_cast<caf::actor>(probe)));
    return nodes.back();
  }
  /// Advances the virtual clock by `s` seconds in 10 ms ticks, running the messages due at
  /// each tick (a periodic timer re-armed by a message fires once per period, as in real time).
  void advance(double s) {
    const auto tick = std::chrono::milliseconds(10);
    coord.run();
    for (auto left = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
         left.count() > 0; left -= tick) {
      coord.advance_time(std::min<caf::timespan>(tick, left));
      coord.run();
    }
  }
  /// Rounds the probe has seen ordered since the last call (their numbers).
  std::vector<std::int64_t> rounds_ordered() {
    std::vector<std::int64_t> seen;
    bool more = true;
    while (more)
      probe->receive([&](const round_orders& o) { seen.push_back(o.round); },
                     caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return seen;
  }
  /// The scheduler's answer to a client's message (sent from the listener, which gets the
  /// reply as a message once the queue has run).
  template <class Reply, class... Ts>
  std::optional<Reply> ask(Ts&&... xs) {
    listener->send(sched, std::forward<Ts>(xs)...);
    coord.run();
    std::optional<Reply> out;
    listener->receive([&](Reply& r) { out = std::move(r); },
                      caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }
  /// The status of job `id` (it must exist).
  job_status job(std::int64_t id) {
    auto v = ask<std::vector<job_status>>(jobs_atom::value, id, true);
    REQUIRE(v);
    REQUIRE(v->size() == 1);
    return v->front();
  }
  /// The summary, if the run has ended.
  std::optional<run_summary> summary() {
    std::optional<run_summary> s;
    listener->receive([&](run_summary& x) { s = std::move(x); },
                      caf::after(std::chrono::seconds(0)) >> [] {});
    return s;
  }
};

/// Registers node 0 (reports at once) and node 1 (holds its reports back until told), runs
/// round 0's dispatch and returns node 1.
caf::actor start_with_silent_node(virtual_run& run) {
  run.node(0);
  auto slow = run.node(1, scripted(false, true));
  run.advance(0);
  CHECK(run.rounds_ordered().size() == 2);
  return slow;
}

/// Registers node 0 under `holder`, made to say it keeps unsaved programs and to answer a
/// settle only when told (answer_atom), and node 1 under `plain`; runs round 0 (nothing to
/// settle yet) to its end, where node 0 is asked to settle. Returns node 0.
caf::actor start_with_unsaved_node(virtual_run& run, script& holder, script& plain) {
  holder.unsaved = true;
  holder.settles = false;
  auto n0 = run.node(0, holder);
  run.node(1, plain);
  run.advance(0);
  CHECK(run.rounds_ordered().size() == 2);
  run.advance(1.0);
  CHECK(*holder.settle_asks == 1);
  return n0;
}

std::vector<run_job> long_jobs(int n) {
  std::vector<run_job> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(make_run_job(i, "mlp", 1000000, 0.01, i + 1));
  return jobs;
}

}  // namespace

TEST_CASE("registering: the run ends when no node makes progress within the registration time-out",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(1));
  run.node(0);
  run.advance(4.9);
  CHECK_FALSE(run.summary());
  CHECK(run.rounds_ordered().empty());  // no round before every node registered
  run.advance(0.2);
  auto s = run.summary();
  REQUIRE(s);
  CHECK_FALSE(s->ok);
  CHECK_THAT(s->error, Catch::StartsWith("1 of 2 nodes registered (none for the last 5 s); "
                                         "missing ranks: 1. Wait longer with --connect-timeout"));
  CHECK_THAT(s->error, Catch::Contains("--min-nodes N"));
}

TEST_CASE("registering: the wait counts from the last node that made progress",
          "[actors][scheduler][clock]") {
  // Three nodes 4 s apart: 8 s in all, over the 5 s time-out, but never 5 s without progress.
  virtual_run run({1.0, 1.0, 1.0}, long_jobs(3));
  run.node(0);
  run.advance(4);
  run.node(1);
  run.advance(4);
  CHECK_FALSE(run.summary());
  run.node(2);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0, 0, 0});
  run.advance(6);
  CHECK_FALSE(run.summary());
}

TEST_CASE(
    "registering: with --min-nodes the run starts with the nodes present, the rest join later",
    "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0, 1.0}, long_jobs(3), false, 2);
  run.node(0);
  run.node(1);
  run.advance(4.9);
  CHECK(run.rounds_ordered().empty());
  run.advance(0.2);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0, 0});  // two nodes of three
  CHECK_FALSE(run.summary());
  run.node(2);  // the late one joins: work from the next round
  run.advance(1.0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 1, 1});
}

TEST_CASE("registering: --min-nodes above the nodes present still ends the run",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0, 1.0}, long_jobs(3), false, 3);
  run.node(0);
  run.node(1);
  run.advance(5.1);
  auto s = run.summary();
  REQUIRE(s);
  CHECK_FALSE(s->ok);
  CHECK_THAT(s->error, Catch::StartsWith("2 of 3 nodes registered"));
}

TEST_CASE(
    "running: a round starts when the last node registers and the next one when its "
    "time is up",
    "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);
  run.node(1);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0, 0});  // both nodes get round 0
  run.advance(0.9);
  CHECK(run.rounds_ordered().empty());  // reported, but the round's time is not up
  run.advance(0.2);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 1});
  run.advance(1.0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{2, 2});
  CHECK_FALSE(run.summary());
}

TEST_CASE("draining: past its time a round waits for the last report, then moves on at once",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  auto slow = start_with_silent_node(run);
  run.advance(2.5);  // past the round's length, within its deadline
  CHECK(run.rounds_ordered().empty());
  caf::anon_send(slow, report_atom::value);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 1});
  CHECK_FALSE(run.summary());
}

TEST_CASE(
    "draining: a node that misses the report deadline but heartbeats gets two more graces, "
    "then is lost and the round moves on",
    "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  start_with_silent_node(run);
  run.advance(4.9);  // round length 1 + grace 4: not yet
  CHECK(run.rounds_ordered().empty());
  run.advance(8.0);  // it heartbeats: slow, not dead; two graces of 4 s
  CHECK(run.rounds_ordered().empty());
  run.advance(0.2);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1});  // only node 0 is left
  CHECK_FALSE(run.summary());
}

TEST_CASE("draining: a late report within the extra grace keeps the node",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  auto slow = start_with_silent_node(run);
  run.advance(7);  // past the deadline (5 s), within the first extra grace
  CHECK(run.rounds_ordered().empty());
  caf::anon_send(slow, report_atom::value);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 1});
  CHECK_FALSE(run.summary());
}

TEST_CASE("settling: a round's orders wait until a node holding unsaved programs lets go",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  script holder, plain;
  auto n0 = start_with_unsaved_node(run, holder, plain);
  CHECK(run.rounds_ordered().empty());  // round 1 waits for node 0
  run.advance(5);
  CHECK(run.rounds_ordered().empty());
  caf::anon_send(n0, answer_atom::value);
  run.advance(0);
  CHECK(run.rounds_ordered().size() == 2);  // then both nodes get round 1
  CHECK(*plain.settle_asks == 0);           // a node whose programs are saved is not asked
}

TEST_CASE("settling: a node that does not answer is waited for only its grace",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  script holder, plain;
  start_with_unsaved_node(run, holder, plain);
  run.advance(30);  // 30 s (no program's grace is longer) + the report grace of 4 s
  CHECK(run.rounds_ordered().empty());
  run.advance(4.5);
  CHECK(run.rounds_ordered().size() == 2);
}

TEST_CASE("heartbeats: a node silent past the heartbeat time-out is lost",
          "[actors][scheduler][clock]") {
  virtual_run run({1.0}, long_jobs(1));
  run.node(0, scripted(false, false));  // no heartbeat and no report: nothing is heard
  run.advance(0);
  run.rounds_ordered();
  run.advance(1.9);
  CHECK_FALSE(run.summary());
  run.advance(0.7);  // past 2 s of silence, at the next heartbeat scan
  auto s = run.summary();
  REQUIRE(s);
  CHECK_FALSE(s->ok);
  CHECK(s->error == "every node was lost");
  CHECK(s->failed_ranks == std::vector<std::int32_t>{0});
}

TEST_CASE("heartbeats: a node whose heartbeats come unevenly gets a longer bound than a steady one",
          "[actors][scheduler][clock][liveness]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);  // steady: every 0.5 s
  script busy;
  busy.gaps = {0.1, 0.1, 1.9};  // a busy host: mean 0.7 s, sd 1.04 s: bound about 6.5 s
  auto node1 = run.node(1, busy);
  run.advance(30);                           // 40 gaps learnt
  CHECK(run.rounds_ordered().size() == 62);  // rounds 0-30 on both nodes
  caf::anon_send(node1, mute_atom::value);   // stopped (at most 1.9 s after its last beat)
  run.advance(4.5);                          // past the 2 s floor, within its own bound
  auto nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 2);
  CHECK(nodes->at(1).state == "alive");
  run.advance(5);  // past any bound its gaps give
  nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  CHECK_FALSE(nodes->at(1).state == "alive");
  CHECK(nodes->at(0).state == "alive");
  CHECK_FALSE(run.summary());
}

TEST_CASE("heartbeats: a steady node silent past the floor is lost at once",
          "[actors][scheduler][clock][liveness]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);
  auto node1 = run.node(1);
  run.advance(30);
  run.rounds_ordered();
  caf::anon_send(node1, mute_atom::value);
  run.advance(1.5);  // its last beat at most 0.5 s before: silent under 2 s
  auto nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  CHECK(nodes->at(1).state == "alive");
  run.advance(1.5);  // silent 2.5 s at least: past the 2 s floor its steady gaps give
  nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  CHECK_FALSE(nodes->at(1).state == "alive");
}

TEST_CASE("heartbeats: a scheduler that could not run does not blame its nodes",
          "[actors][scheduler][clock][liveness]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);
  run.node(1);
  run.advance(3);
  run.rounds_ordered();
  // Six seconds in which no actor runs (the scheduler's process starved or stopped): its
  // heartbeat scan then runs 5.5 s late, before the nodes' heartbeats of that time are read.
  run.coord.advance_time(std::chrono::seconds(6));
  run.coord.run();
  run.advance(1);
  auto nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  CHECK(nodes->at(0).state == "alive");
  CHECK(nodes->at(1).state == "alive");
  CHECK_FALSE(run.summary());
}

TEST_CASE("idle: with no active job the scheduler waits for the next arrival",
          "[actors][scheduler][clock]") {
  auto jobs = long_jobs(1);
  jobs[0].spec.arrival = 10;
  virtual_run run({1.0}, jobs);
  run.node(0);
  run.advance(0);
  CHECK(run.rounds_ordered().empty());
  run.advance(9.9);
  CHECK(run.rounds_ordered().empty());
  run.advance(0.2);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0});
}

TEST_CASE("idle: a job submitted to an idle scheduler starts a round without waiting",
          "[actors][scheduler][clock]") {
  auto jobs = long_jobs(1);
  jobs[0].spec.arrival = 100;
  virtual_run run({1.0}, jobs);
  run.node(0);
  run.advance(1);
  CHECK(run.rounds_ordered().empty());
  run_job d;
  d.kind = "mlp";
  d.spec.total_steps = 50;
  d.step_time = 0.01;
  d.id_given = false;
  // From an actor of the scheduler's process: anonymous submissions are refused.
  run.listener->send(run.sched, submit_job{{d}});
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0});
}

TEST_CASE("job actors: a node's reports reach its jobs ahead of the next round's view request",
          "[actors][scheduler][clock][job]") {
  // Job 0 needs 12 steps, 5 a round: its node reports it finished in round 2, then the
  // round done. The view request of round 3 finds it finished, so no round 3 is planned.
  virtual_run run({1.0}, {make_run_job(0, "mlp", 12, 0.01, 1)});
  run.node(0);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0});
  run.advance(3.05);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 2});
  auto s = run.summary();
  REQUIRE(s);
  CHECK(s->ok);
  CHECK(s->rounds == 3);
  REQUIRE(s->jobs.size() == 1);
  CHECK(s->jobs[0].finished);
  CHECK(s->jobs[0].steps == 12);
  CHECK(s->jobs[0].rounds == 3);
  CHECK(s->jobs[0].busy_gpu_seconds == std::vector<double>{3.0});
}

// ---- trust: registration, attribution, fencing, joins and drains ------------------------------

namespace {

/// An actor that is not a registered node: it sends the scheduler what a node would.
caf::behavior rogue(caf::event_based_actor* self, caf::actor sched, node_hello h) {
  self->request(sched, caf::infinite, h).then([](const node_welcome&) {}, [](const caf::error&) {});
  self->send(sched, heartbeat{0});
  self->send(sched, round_done{0});
  progress_report r;
  r.round = 0;
  r.job = 0;
  r.step = 1000000;
  r.steps = 1000000;
  self->send(sched, r);
  self->send(sched, job_finished{0, 1000000, 0.0, 1.0, false});
  return {[](const caf::message&) {}};
}

}  // namespace

TEST_CASE("trust: registrations without the secret are refused, the run goes on",
          "[actors][scheduler][clock][trust]") {
  virtual_run run({1.0, 1.0}, long_jobs(1));
  // One rogue claims rank 1 with no exchange at all, one proves the wrong secret.
  run.nodes.push_back(run.sys.spawn(rogue, run.sched, hello_for(run.cl, 1, "rogue")));
  script wrong;
  wrong.key = secret_key(secret_bytes, 0x11);
  run.node(1, wrong);
  run.advance(0);
  CHECK(run.rounds_ordered().empty());  // rank 1 is still missing
  run.node(0);
  run.node(1);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0, 0});
  CHECK_FALSE(run.summary());
}

TEST_CASE("trust: progress or completion from an actor that is not a live node is dropped",
          "[actors][scheduler][clock][trust]") {
  virtual_run run({1.0}, long_jobs(1));
  run.node(0);
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0});
  // Claims job 0 finished and round 0 reported: none of it counts.
  run.nodes.push_back(run.sys.spawn(rogue, run.sched, hello_for(run.cl, 0, "rogue")));
  run.advance(3);
  CHECK_FALSE(run.summary());  // job 0 (10^6 steps) is not finished
  CHECK(run.rounds_ordered().size() == 3);
}

TEST_CASE("trust: a second claim on a live rank is refused without ending the run",
          "[actors][scheduler][clock][trust]") {
  virtual_run run({1.0}, long_jobs(1));
  run.node(0);
  run.advance(0);
  run.rounds_ordered();
  run.node(0);  // proves the secret, but rank 0 is live
  run.advance(2);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1, 2});
  CHECK_FALSE(run.summary());
}

TEST_CASE("trust: a node declared lost is fenced, and may join again from the next round",
          "[actors][scheduler][clock][trust]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);
  script silent = scripted(false, false);
  auto lost = run.node(1, silent);
  run.advance(0);
  CHECK(run.rounds_ordered().size() == 2);
  run.advance(2.6);  // silent past the heartbeat time-out: lost
  CHECK(*silent.fenced >= 1);
  run.rounds_ordered();
  // Its late report of round 0 is refused (and it is reminded that it was fenced).
  const int before = *silent.fenced;
  caf::anon_send(lost, report_atom::value);
  run.advance(0);
  CHECK(*silent.fenced > before);
  run.advance(1);
  CHECK(run.rounds_ordered().size() == 1);  // one node per round now
  // A new process for rank 1 registers: it gets work from the next round.
  run.node(1);
  run.advance(1);
  const auto next = run.rounds_ordered();
  CHECK(next.size() == 2);
  CHECK_FALSE(run.summary());
}

TEST_CASE("trust: a node asked to leave finishes its round, is shut down, gets no more work",
          "[actors][scheduler][clock][trust]") {
  virtual_run run({1.0, 1.0}, long_jobs(2));
  run.node(0);
  script leaving;
  auto node1 = run.node(1, leaving);
  run.advance(0);
  CHECK(run.rounds_ordered().size() == 2);
  caf::anon_send(node1, leave_atom::value);
  run.advance(0);
  CHECK(*leaving.shutdowns == 1);  // it had reported round 0: it goes at once
  run.advance(1);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{1});
  CHECK_FALSE(run.summary());
}

// ---- a served cluster (tessera serve): stays up, answers clients, stops on request ----------

TEST_CASE(
    "serve: the cluster waits for submissions, runs them, cancels at the round "
    "boundary and stops on request",
    "[actors][scheduler][clock][serve]") {
  virtual_run run({1.0, 1.0}, {}, true);
  std::vector<caf::actor> held = {run.node(0, scripted(false, true)),
                                  run.node(1, scripted(false, true))};
  auto release = [&] {
    for (const auto& n : held) run.listener->send(n, report_atom::value);
    run.advance(0);
  };
  run.advance(3);
  CHECK_FALSE(run.summary());  // no job: a served cluster stays up
  CHECK(run.rounds_ordered().empty());
  auto c = run.ask<cluster_status>(cluster_atom::value);
  REQUIRE(c);
  CHECK(c->nodes_by_state["alive"] == 2);
  CHECK(c->jobs.empty());

  run_job j = make_run_job(0, "mlp", 1000000, 0.01, 1);
  j.id_given = false;
  auto ids = run.ask<std::vector<std::int64_t>>(submit_job{{j, j}});
  REQUIRE(ids);
  CHECK(*ids == std::vector<std::int64_t>{0, 1});
  run.advance(0);
  CHECK(run.rounds_ordered() == std::vector<std::int64_t>{0, 0});
  auto first = run.job(0);
  CHECK(first.state == "running");
  REQUIRE(first.placements.size() == 1);
  CHECK(first.placements[0].round == 0);
  auto nodes = run.ask<std::vector<node_status>>(nodes_atom::value);
  REQUIRE(nodes);
  REQUIRE(nodes->size() == 2);
  CHECK((*nodes)[0].state == "alive");
  CHECK((*nodes)[0].assignment.size() + (*nodes)[1].assignment.size() == 2);

  // A running job's cancel waits for the round boundary; then it is cancelled for good.
  CHECK(run.ask<cancel_outcome>(cancel_job{0}) == cancel_outcome::accepted);
  CHECK(run.job(0).state == "cancelling");
  release();
  run.advance(1.1);
  CHECK(run.job(0).state == "cancelled");
  const auto second = run.job(1);
  CHECK(second.state == "running");
  CHECK(second.copies == 1);
  REQUIRE(second.placements.size() == 2);  // rounds 0 and 1, from the scheduler's assignments
  CHECK(second.placements[1].round == 1);
  CHECK(run.ask<cancel_outcome>(cancel_job{0}) == cancel_outcome::ended);
  CHECK(run.ask<cancel_outcome>(cancel_job{9}) == cancel_outcome::unknown);
  auto rounds = run.ask<std::vector<round_status>>(rounds_atom::value, std::int32_t{10});
  REQUIRE(rounds);
  REQUIRE(rounds->size() == 2);
  CHECK(rounds->front().assignments.size() == 2);  // round 0: both jobs
  CHECK(rounds->back().assignments.size() == 1);   // round 1: the job left
  run.rounds_ordered();

  // A stop ends the cluster after the round in flight, as a success.
  CHECK(run.ask<bool>(stop_atom::value) == true);
  CHECK_FALSE(run.summary());  // round 1 is in flight
  release();
  run.advance(1.1);
  auto s = run.summary();
  REQUIRE(s);
  CHECK(s->ok);
  REQUIRE(s->jobs.size() == 2);
  CHECK(s->jobs[0].state == "cancelled");
  CHECK(s->jobs[1].state == "running");
}

TEST_CASE("serve: a stop with no round in flight ends the cluster at once",
          "[actors][scheduler][clock][serve]") {
  virtual_run run({1.0}, {}, true);
  run.node(0);
  run.advance(1);
  CHECK(run.ask<bool>(stop_atom::value) == true);
  run.advance(0);
  auto s = run.summary();
  REQUIRE(s);
  CHECK(s->ok);
}
