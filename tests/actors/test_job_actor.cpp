// Tests of the job actor (actors/job_actor.hpp) on CAF's test coordinator: its life through
// its assignments and its nodes' reports, refused transitions (a finish of a cancelled job, an
// assignment of an ended one), reports refused from senders its assignment does not list or
// for rounds it does not run in, the view / assignment round trip, a lost node, and (with the
// scheduler) that a round's reports reach the job before the next round's view request.
#include <catch2/catch.hpp>

#include <filesystem>

#include <caf/all.hpp>

#include "actor_support.hpp"
#include "actors/job_actor.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::actors::test;

namespace {

/// What the job told its scheduler.
struct heard {
  std::vector<job_snapshot> pushes;
  std::vector<rate_sample> rates;
  std::vector<std::string> write_failures;
};

/// Job 3 (`steps` steps, kind mlp) in its actor; scoped actors play its scheduler, two nodes
/// (ranks 0 and 1) and a stranger.
struct job_fixture : virtual_system {
  caf::scoped_actor sched{sys};
  caf::scoped_actor node0{sys};
  caf::scoped_actor node1{sys};
  caf::scoped_actor stranger{sys};
  temp_dir dir{"job_actor"};
  caf::actor job;

  explicit job_fixture(std::int64_t steps = 100) {
    job_config jc;
    jc.spec = make_run_job(3, "mlp", steps, 0.01, 1);
    jc.rank_types = {"v100", "k80"};
    jc.round_length = 1;
    jc.checkpoint_dir = dir.str();
    jc.epoch_base = 10;
    job = sys.spawn(job_actor, jc, caf::actor_cast<caf::actor>(sched));
    coord.run();
  }
  ~job_fixture() {
    caf::anon_send_exit(job, caf::exit_reason::kill);
    coord.run();
  }
  /// The piece of copy `copy` on `rank` (node0 or node1), alone on its node.
  copy_piece piece(int copy, int rank) {
    return copy_piece{copy, rank,  1,
                      true, false, caf::actor_cast<caf::actor>(rank == 0 ? node0 : node1)};
  }
  /// Sends the job its assignment for `round` (placed on `pieces`, left out when none).
  void assign(std::int64_t round, std::vector<copy_piece> pieces, bool paused = false) {
    job_assignment a;
    a.round = round;
    a.start = static_cast<double>(round);
    a.pieces = std::move(pieces);
    for (const auto& pc : a.pieces) a.planned[pc.rank] += pc.gpus * 1.0;
    a.type = a.pieces.empty() ? -1 : 0;
    a.live_generation = 7;
    a.paused = paused;
    sched->send(job, std::move(a));
    coord.run();
  }
  /// The job's answer to a view request (the round boundary): a message naming the round
  /// start it answers; pushes sent before it stay for drain().
  job_snapshot view() {
    const std::uint64_t start = ++starts;
    sched->send(job, view_atom::value, start);
    coord.run();
    std::optional<job_snapshot> out;
    sched->receive(
        [&](view_atom, std::uint64_t answered, job_snapshot& s) {
          CHECK(answered == start);
          out = std::move(s);
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
    REQUIRE(out);
    return *out;
  }
  std::uint64_t starts = 0;  ///< round starts asked so far
  /// The job's answer to a summary request.
  job_final final_state(bool at_boundary = false) {
    sched->send(job, summary_atom::value, at_boundary, std::uint64_t{5});
    coord.run();
    std::optional<job_final> out;
    sched->receive(
        [&](summary_atom, std::uint64_t index, job_final& f) {
          CHECK(index == 5);
          out = std::move(f);
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
    REQUIRE(out);
    return *out;
  }
  /// A client's cancel (from an actor of this process).
  cancel_outcome cancel() {
    auto rh = stranger->request(job, caf::infinite, cancel_job{3});
    coord.run();
    std::optional<cancel_outcome> out;
    rh.receive([&](cancel_outcome o) { out = o; }, [](caf::error&) {});
    REQUIRE(out);
    return *out;
  }
  /// Sends `x` to the job from `from` and runs it.
  template <class T>
  void report(caf::scoped_actor& from, T x) {
    from->send(job, std::move(x));
    coord.run();
  }
  /// What the job told its scheduler since the last call.
  heard drain() {
    heard h;
    bool more = true;
    while (more)
      sched->receive([&](job_snapshot& s) { h.pushes.push_back(std::move(s)); },
                     [&](rate_sample& r) { h.rates.push_back(std::move(r)); },
                     [&](write_failed_atom, std::int64_t, std::string& why) {
                       h.write_failures.push_back(std::move(why));
                     },
                     caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return h;
  }
};

progress_report progress(std::int64_t round, int copy, std::int64_t step, double rate = 0) {
  progress_report r;
  r.round = round;
  r.job = 3;
  r.copy = copy;
  r.step = step;
  r.steps = 5;
  r.busy_seconds = 1;
  r.throughput = rate;
  r.loss = 0.5;
  return r;
}

}  // namespace

TEST_CASE(
    "job actor: its life follows its assignments and reports, and an ended job refuses "
    "further transitions",
    "[actors][job]") {
  job_fixture f(20);
  CHECK(f.view().life == job_state::queued);
  f.assign(0, {});  // left out: still queued, nothing pushed
  CHECK(f.drain().pushes.empty());
  CHECK(f.view().life == job_state::queued);

  f.assign(1, {f.piece(0, 0)});
  auto h = f.drain();
  REQUIRE(h.pushes.size() == 1);
  CHECK(h.pushes[0].life == job_state::running);
  CHECK(h.pushes[0].status.state == "running");
  CHECK(h.pushes[0].status.copies == 1);
  f.assign(2, {f.piece(0, 0)});  // placed again: nothing changed that the scheduler does not know
  CHECK(f.drain().pushes.empty());

  f.report(f.node0, copy_started{2, 3, 0, 0, 0, {}, ""});
  f.report(f.node0, progress(2, 0, 20, 40));
  f.report(f.node0, checkpoint_done{2, 3, 0, 20, f.dir.str() + "/job-3.r2.ckpt"});
  f.report(f.node0, job_finished{3, 20, 0.25, 0.9, false});
  h = f.drain();
  REQUIRE(h.rates.size() == 1);  // a copy alone on its node: its rate is the node's
  CHECK(h.rates[0].rank == 0);
  CHECK(h.rates[0].steps_per_s == 40);
  REQUIRE(h.pushes.size() == 1);
  CHECK(h.pushes[0].life == job_state::finished);

  auto v = f.view();
  CHECK(v.life == job_state::finished);
  CHECK(v.step == 20);
  CHECK(v.measured.at("v100") == 40);
  // Ended: a new placement, a second finish and a cancel are refused.
  f.assign(3, {f.piece(0, 1)});
  f.report(f.node1, job_finished{3, 20, 0.1, 0.95, false});
  CHECK(f.cancel() == cancel_outcome::ended);
  const auto fin = f.final_state();
  CHECK(fin.summary.state == "finished");
  CHECK(fin.summary.finished);
  CHECK(fin.summary.rounds == 2);
  CHECK(fin.summary.accuracy == 0.9);
  CHECK(fin.summary.final_rank == 0);
  CHECK(fin.dropped == 1);  // node 1's finish: not a node of the job's round
}

TEST_CASE(
    "job actor: a cancel waits for the round boundary, and a finish of a cancelled job is "
    "refused",
    "[actors][job]") {
  job_fixture f(20);
  f.assign(0, {f.piece(0, 0)});
  CHECK(f.cancel() == cancel_outcome::accepted);
  auto h = f.drain();
  REQUIRE(h.pushes.size() == 2);  // placed, then cancelling
  CHECK(h.pushes.back().status.state == "cancelling");
  CHECK(h.pushes.back().life == job_state::running);
  f.report(f.node0, progress(0, 0, 5));
  f.report(f.node0, checkpoint_done{0, 3, 0, 5, f.dir.str() + "/job-3.r0.ckpt"});
  auto v = f.view();  // the boundary: the cancel takes effect, the checkpoint is kept
  CHECK(v.life == job_state::cancelled);
  CHECK(v.status.state == "cancelled");
  CHECK(v.step == 5);
  CHECK(v.status.summary.checkpoint == f.dir.str() + "/job-3.r0.ckpt");

  // A job whose round has reported is cancelled at once; its node's late finish is refused.
  job_fixture g(20);
  g.assign(0, {g.piece(0, 0)});
  g.report(g.node0, progress(0, 0, 20));
  CHECK(g.cancel() == cancel_outcome::accepted);
  g.report(g.node0, job_finished{3, 20, 0.1, 0.9, false});
  const auto fin = g.final_state();
  CHECK(fin.summary.state == "cancelled");
  CHECK(fin.summary.canceled);
  CHECK_FALSE(fin.summary.finished);
  CHECK(fin.summary.finish == -1);
}

TEST_CASE(
    "job actor: reports from actors its assignment does not list, for rounds it does not "
    "run in, or for another job are dropped and counted",
    "[actors][job][trust]") {
  job_fixture f;
  f.assign(0, {f.piece(0, 0)});
  f.drain();
  f.report(f.stranger, progress(0, 0, 100));                 // not a node of the round
  f.report(f.node1, job_finished{3, 100, 0.0, 1.0, false});  // a node, but not of this job
  f.report(f.node0, progress(4, 0, 100));                    // another round
  auto other = progress(0, 0, 100);
  other.job = 4;
  f.report(f.node0, other);  // another job
  // Only the scheduler may close a round or assign one.
  f.report(f.stranger, job_assignment{});
  auto v = f.view();
  CHECK(v.life == job_state::running);
  CHECK(v.gpu_seconds == 0);
  CHECK(f.drain().pushes.empty());

  f.assign(1, {});  // left out: not running in round 1
  f.report(f.node0, progress(1, 0, 100));
  f.report(f.node0, copy_started{1, 3, 0, 0, 0, {}, ""});
  const auto fin = f.final_state();
  CHECK(fin.summary.state == "preempted");
  CHECK(fin.summary.busy_gpu_seconds == std::vector<double>{0, 0});
  CHECK(fin.dropped == 7);
}

TEST_CASE(
    "job actor: the view carries what planning and dispatch need, and the assignment is "
    "booked",
    "[actors][job]") {
  job_fixture f;
  auto v = f.view();
  CHECK(v.id == 3);
  CHECK(v.book.epoch() == 10);
  CHECK(v.status.summary.total_steps == 100);
  f.assign(0, {f.piece(0, 0)});
  f.report(f.node0, copy_started{0, 3, 0, 0, 0, {}, ""});
  f.report(f.node0, progress(0, 0, 30, 25));
  f.report(f.node0, checkpoint_done{0, 3, 0, 30, f.dir.str() + "/job-3.r0.ckpt"});
  v = f.view();
  CHECK(v.step == 30);
  CHECK(v.run_time == 1);
  CHECK(v.gpu_seconds == 1);
  CHECK(v.last_type == 0);
  CHECK(v.live_generation == 7);
  REQUIRE(v.book.resume());
  CHECK(v.book.resume()->path == f.dir.str() + "/job-3.r0.ckpt");
  CHECK(v.measured.at("v100") == 25);
  CHECK(v.status.steps_per_second == 25);

  // Moved to rank 1: a restart; paused rounds and planned time are counted.
  f.assign(1, {f.piece(0, 1)});
  f.report(f.node1, progress(1, 0, 60, 10));
  f.report(f.node1, checkpoint_done{1, 3, 0, 60, f.dir.str() + "/job-3.r1.ckpt"});
  v = f.view();
  REQUIRE(v.book.fallback());
  CHECK(v.book.fallback()->path == f.dir.str() + "/job-3.r0.ckpt");
  f.assign(2, {}, true);
  const auto fin = f.final_state();
  CHECK(fin.summary.restarts == 1);
  CHECK(fin.summary.rounds == 2);
  CHECK(fin.summary.paused_rounds == 1);
  CHECK(fin.summary.planned_gpu_seconds == std::vector<double>{1, 1});
  CHECK(fin.summary.busy_gpu_seconds == std::vector<double>{1, 1});
  CHECK(fin.summary.first_start == 0);
  CHECK(fin.summary.state == "preempted");
  CHECK(v.last_type == 0);
  CHECK(f.view().last_type == -1);  // left out of round 2
}

TEST_CASE("job actor: a lost node loses the round, fences the job and is heard no more",
          "[actors][job][trust]") {
  job_fixture f;
  auto spread = f.piece(0, 0);
  spread.spread = true;
  auto part = f.piece(0, 1);
  part.spread = true;
  part.leader = false;
  f.assign(0, {spread, part});
  f.drain();
  f.report(f.node0, progress(0, 0, 10));
  f.sched->send(f.job, node_lost_atom::value, std::int64_t{0}, std::int32_t{1});
  f.coord.run();
  auto h = f.drain();
  REQUIRE(h.pushes.size() == 1);
  CHECK(h.pushes[0].status.summary.lost_rounds == 1);
  CHECK(h.pushes[0].sync_epoch == 1);
  CHECK(h.pushes[0].book.epoch() == 11);
  CHECK(std::filesystem::exists(f.dir.str() + "/job-3.fence"));
  f.report(f.node1, progress(0, 0, 10));  // the lost node's late report
  f.report(f.node1, checkpoint_done{0, 3, 0, 10, f.dir.str() + "/job-3.r0.ckpt"});
  const auto v = f.view();
  CHECK(v.step == 0);  // the round's progress is lost
  CHECK(f.final_state().dropped == 2);
}

TEST_CASE("job actor: a failed checkpoint write and a failed copy are told to the scheduler",
          "[actors][job]") {
  job_fixture f;
  f.assign(0, {f.piece(0, 0), f.piece(1, 1)});
  f.drain();
  auto r = progress(0, 0, 10);
  r.checkpoint_error = "job-3.r0.ckpt: No space left on device";
  f.report(f.node0, r);
  auto h = f.drain();
  REQUIRE(h.write_failures.size() == 1);
  CHECK(h.write_failures[0] == r.checkpoint_error);
  auto bad = progress(0, 1, 10);
  bad.error = "unknown kind";
  f.report(f.node1, bad);
  h = f.drain();
  REQUIRE(h.pushes.size() == 1);
  CHECK(h.pushes[0].life == job_state::failed);
  CHECK(h.pushes[0].status.summary.failure == "on node rank 1: unknown kind");
  // Its other copy is stopped on its node.
  std::optional<stop_copy> stopped;
  f.node0->receive([&](const stop_copy& s) { stopped = s; },
                   caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(stopped);
  CHECK(stopped->job == 3);
  CHECK(f.final_state().summary.checkpoint_write_failures == 1);
}
