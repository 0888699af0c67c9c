// Warm leases (docs/lease-protocol.md, "Warm leases"): a program copy's process lives on across
// rounds while its order keeps it where it is, and is let go, checkpointed, when the order
// moves it. Runs run_program_round with a real lease socket and a real Python program.
#include <catch2/catch.hpp>

#include <signal.h>

#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "actors/program_round.hpp"
#include "runtime/node/program/lease_server.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;
using namespace tessera::test;

namespace {

/// A program that steps every 5 ms under a warm lease from the step in `ckpt` in its checkpoint
/// directory, says its pid once, and writes its position there (saying so) whenever
/// should_checkpoint(), and after its loop when the lease's end was not saved.
const char* program_text = R"(import os, sys, time
sys.path.insert(0, os.environ["CLIENT"])
from tessera_client import Lease
ckpt = os.path.join(os.environ["TESSERA_CHECKPOINT_DIR"], "ckpt")
lease = Lease(step=int(open(ckpt).read()) if os.path.exists(ckpt) else 0, renew=True)
print("pid", os.getpid(), flush=True)
def save():
    with open(ckpt, "w") as f:
        f.write(str(lease.position))
    print("saved", lease.position, flush=True)
for _ in lease:
    time.sleep(0.005)
    if lease.should_checkpoint():
        save()
if not lease.should_checkpoint():
    save()
total = os.path.join(os.path.dirname(ckpt), "..", "total")  # the test's total, when it says one
if os.path.exists(total) and lease.position >= int(open(total).read()):
    lease.complete(accuracy=0.5)
print("exit", os.getpid(), flush=True)
)";

/// The pids the program said at its start, in order.
std::vector<int> started_pids(const std::string& out) {
  std::vector<int> pids;
  const std::regex pid_line(R"(\] pid (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), pid_line), end; it != end; ++it)
    pids.push_back(std::stoi((*it)[1]));
  return pids;
}

struct warm_fixture {
  scratch_dir dir{"warm_lease"};
  std::unique_ptr<program::lease_server> leases;
  std::ostringstream out, err;
  program_context ctx;
  copy_slot slot;
  warm_fixture() {
    auto s = program::lease_server::start(dir.file("lease.sock"));
    REQUIRE(s);
    leases = std::move(*s);
    ctx.leases = leases.get();
    ctx.out = &out;
    ctx.err = &err;
    start_copy& o = slot.order;
    o.job = 4;
    o.kind = "program";
    o.total_steps = 1000000;
    o.checkpoint_path = dir.file("ckpt");
    o.program.command = {TESSERA_PYTHON, dir.write("prog.py", program_text)};
    o.program.env = {{"CLIENT", TESSERA_PYTHON_CLIENT}};
    o.program.grace = 5;
  }
  /// One round of `length` s from where the last one ended.
  void round(double length = 0.6) {
    slot.order.resume_step = slot.end_step;
    run_program_round(slot, ctx, length, nullptr);
    INFO(err.str());
    REQUIRE(slot.error.empty());
  }
  std::int64_t checkpoint_step() { return std::stoll(file_contents(dir.file("ckpt/ckpt"))); }
};

}  // namespace

TEST_CASE("a warm lease keeps the program's process while its order stays, and a move ends it",
          "[program][warm]") {
  warm_fixture f;
  f.round();
  CHECK_FALSE(f.slot.renewed);
  CHECK(f.slot.steps > 0);
  CHECK(f.slot.checkpointed);
  REQUIRE(f.slot.warm);  // parked on its renew, checkpoint written
  CHECK(f.checkpoint_step() == f.slot.end_step);
  const auto first_end = f.slot.end_step;

  // Unchanged orders: the same process goes on, from the step it is at.
  for (int i = 0; i < 2; ++i) {
    f.round();
    CHECK(f.slot.renewed);
    CHECK(f.slot.start_step > 0);
    CHECK(f.slot.steps > 0);
    CHECK(f.slot.startup_seconds < 0.1);
    CHECK(f.checkpoint_step() == f.slot.end_step);
    REQUIRE(f.slot.warm);
  }
  CHECK(f.slot.end_step > first_end);
  CHECK(started_pids(f.out.str()).size() == 1);

  // Other devices: a move. The parked process is told exit (it exits 0, on its own), and a
  // new one starts from the checkpoint's step.
  f.ctx.devices = {1};
  f.round();
  CHECK_FALSE(f.slot.renewed);
  const auto pids = started_pids(f.out.str());
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] != pids[1]);
  CHECK(has(f.out.str(), "exit " + std::to_string(pids[0])));
  CHECK(f.slot.start_step == f.slot.order.resume_step);

  // An order from another step (the scheduler went back to an older checkpoint): a new one.
  REQUIRE(f.slot.warm);
  f.slot.end_step -= 1;
  f.round();
  CHECK_FALSE(f.slot.renewed);
  CHECK(started_pids(f.out.str()).size() == 3);

  // Letting go of the slot's parked process: it exits 0 by itself.
  REQUIRE(f.slot.warm);
  f.slot.warm.reset();
  CHECK(has(f.out.str(), "exit " + std::to_string(started_pids(f.out.str()).back())));
}

TEST_CASE("a warm program that died while parked is replaced by a new one", "[program][warm]") {
  warm_fixture f;
  f.round();
  REQUIRE(f.slot.warm);
  const auto pids = started_pids(f.out.str());
  REQUIRE(pids.size() == 1);
  ::kill(pids[0], SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the node sees its socket close
  f.round();
  CHECK_FALSE(f.slot.renewed);
  CHECK(started_pids(f.out.str()).size() == 2);
  CHECK(f.slot.steps > 0);
}

TEST_CASE("a warm program whose renew finds its job done completes, with its accuracy",
          "[program][warm]") {
  warm_fixture f;
  f.round();  // some steps, parked
  REQUIRE(f.slot.warm);
  // The last round's budget reaches the total: the lease ends by that cap (not the job's
  // own, so the program asks to renew) and the node's answer makes it complete.
  f.slot.order.total_steps = f.slot.end_step + 30;
  f.slot.order.step_budget = 30;
  f.dir.write("total", std::to_string(f.slot.order.total_steps));
  f.round(5);
  CHECK(f.slot.renewed);
  CHECK(f.slot.finished);
  CHECK(f.slot.steps == 30);
  CHECK(f.slot.end_step == f.slot.order.total_steps);
  CHECK(f.slot.accuracy == 0.5);
  CHECK_FALSE(f.slot.warm);
}

/// The steps the program said it saved at, in order.
std::vector<std::int64_t> saved_steps(const std::string& out) {
  std::vector<std::int64_t> steps;
  const std::regex saved_line(R"(\] saved (\d+))");
  for (std::sregex_iterator it(out.begin(), out.end(), saved_line), end; it != end; ++it)
    steps.push_back(std::stoll((*it)[1]));
  return steps;
}

TEST_CASE("a warm program checkpoints at its job's cadence, and saves its latest state on a move",
          "[program][warm]") {
  warm_fixture f;
  f.slot.order.program.checkpoint_rounds = 3;
  // Rounds 1 and 2 leave the process warm with unsaved state; round 3's end saves.
  f.round();
  CHECK(f.slot.checkpointed);  // the job's step follows the process's report
  CHECK(warm_unsaved(f.slot));
  CHECK(saved_steps(f.out.str()).empty());
  f.round();
  CHECK(f.slot.renewed);
  CHECK(warm_unsaved(f.slot));
  CHECK(saved_steps(f.out.str()).empty());
  f.round();
  CHECK(f.slot.renewed);
  CHECK_FALSE(warm_unsaved(f.slot));
  REQUIRE(saved_steps(f.out.str()).size() == 1);
  CHECK(saved_steps(f.out.str()).back() == f.slot.end_step);
  CHECK(f.checkpoint_step() == f.slot.end_step);
  // Round 4 leaves it unsaved again; the order of round 5 is continued by the process.
  f.round();
  CHECK(warm_unsaved(f.slot));
  const auto at = f.slot.end_step;
  CHECK(f.checkpoint_step() < at);
  start_copy same = f.slot.order;
  same.resume_step = at;
  CHECK(warm_continues(f.slot, same, f.ctx.devices));
  CHECK_FALSE(warm_continues(f.slot, same, {1}));

  // A move (other devices): the process is told exit, saves the state it is at, and the new
  // one starts from there, with nothing redone.
  f.ctx.devices = {1};
  f.round();
  CHECK_FALSE(f.slot.renewed);
  REQUIRE(started_pids(f.out.str()).size() == 2);
  REQUIRE(saved_steps(f.out.str()).size() >= 2);
  CHECK(saved_steps(f.out.str())[1] == at);
  CHECK(f.slot.start_step == at);

  // By time: 0.6 s rounds and a 1.5 s cadence save at the lease end nearest each 1.5 s,
  // every second or third round.
  f.slot.order.program.checkpoint_rounds = 1;
  f.slot.order.program.checkpoint_seconds = 1.5;
  const auto before = saved_steps(f.out.str()).size();
  for (int i = 0; i < 6; ++i) f.round();
  const auto saves = saved_steps(f.out.str()).size() - before;
  CHECK(saves >= 2);
  CHECK(saves <= 3);
}
