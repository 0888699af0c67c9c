// A served cluster's journal records (actors/journal_records.hpp) and their replay.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "actors/journal_records.hpp"
#include "runtime/service/journal.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;

namespace {

std::vector<run_job> sample_jobs() {
  run_job a;
  a.spec.id = 4;
  a.spec.job_type = "mlp";
  a.spec.scale_factor = 2;
  a.spec.total_steps = 400;
  a.spec.priority_weight = 2.5;
  a.spec.arrival = 33;
  a.kind = "mlp";
  a.seed = 9;
  a.step_time = 0.02;
  a.target_loss = 0.3;
  a.config = {{"lr", 0.05}};
  run_job p;
  p.spec.id = 7;
  p.spec.job_type = "program";
  p.spec.total_steps = 30;
  p.kind = "program";
  p.program.command = {"python3", "train.py", "--lr", "0.1"};
  p.program.workdir = std::filesystem::temp_directory_path().string();
  p.program.env = {{"SEED", "7"}};
  p.program.max_restarts = 1;
  p.program.grace_seconds = 12.5;
  p.merge = train::fork_merge_rule::weighted;
  return {a, p};
}

}  // namespace

TEST_CASE("journal records replay to the jobs, states, cancels and checkpoints written",
          "[journal][serve]") {
  const auto jobs = sample_jobs();
  std::vector<std::string> recs = {
      submit_record(jobs),
      state_record(4, job_state::running, 0, 0),
      checkpoint_record(4, {"c/job-4.r0.ckpt", 0, 20}),
      checkpoint_record(4, {"c/job-4.r1.ckpt", 1, 40}),
      checkpoint_record(4, {"c/job-4.r2.ckpt", 2, 60}),
      state_record(4, job_state::preempted, 60, 3),
      state_record(7, job_state::running, 0, 3),
      cancel_record(7),
  };
  auto c = replay_journal(recs);
  REQUIRE(c);
  REQUIRE(c->jobs.size() == 2);
  const auto& a = c->jobs[0];
  CHECK(a.spec.spec.id == 4);
  CHECK(a.spec.spec.scale_factor == 2);
  CHECK(a.spec.spec.total_steps == 400);
  CHECK(a.spec.spec.priority_weight == 2.5);
  CHECK(a.spec.spec.arrival == 0);  // back at once
  CHECK(a.spec.seed == 9);
  CHECK(a.spec.step_time == 0.02);
  CHECK(a.spec.target_loss == 0.3);
  CHECK(a.spec.config == jobs[0].config);
  CHECK(a.life == job_state::preempted);
  CHECK(a.step == 60);
  REQUIRE(a.checkpoints.size() == 2);  // the last two
  CHECK(a.checkpoints[0].path == "c/job-4.r1.ckpt");
  CHECK(a.checkpoints[1].round == 2);
  const auto& p = c->jobs[1];
  CHECK(p.spec.is_program());
  CHECK(p.spec.program.command == jobs[1].program.command);
  CHECK(p.spec.program.env == jobs[1].program.env);
  CHECK(p.spec.program.max_restarts == 1);
  CHECK(p.spec.merge == train::fork_merge_rule::weighted);
  CHECK(p.cancel_requested);
  CHECK(c->last_round == 3);

  // Compaction keeps exactly what the replay gives.
  auto again = replay_journal(compacted_records(*c));
  REQUIRE(again);
  REQUIRE(again->jobs.size() == 2);
  CHECK(again->jobs[0].life == a.life);
  CHECK(again->jobs[0].step == a.step);
  CHECK(again->jobs[0].checkpoints.size() == 2);
  CHECK(again->jobs[1].cancel_requested);
  CHECK(again->last_round == c->last_round);
}

TEST_CASE("replay refuses records of no known kind or of unknown jobs", "[journal][serve]") {
  auto unknown_job = replay_journal({state_record(3, job_state::running, 0, 0)});
  REQUIRE_FALSE(unknown_job);
  CHECK(unknown_job.err().message.find("record 0: job 3 was never submitted") != std::string::npos);
  auto bad_type = replay_journal({submit_record(sample_jobs()), R"({"t":"nope","id":4})"});
  REQUIRE_FALSE(bad_type);
  CHECK(bad_type.err().message.find("record 1") != std::string::npos);
  CHECK_FALSE(replay_journal({"[1,2]"}));
  CHECK_FALSE(replay_journal({"{"}));
}

TEST_CASE("a journal cut inside its last record replays every record before it",
          "[journal][serve]") {
  tessera::test::scratch_dir dir("journal_records");
  const std::string path = dir.file("journal");
  std::vector<std::string> recs = {submit_record(sample_jobs()),
                                   state_record(4, job_state::running, 0, 0),
                                   state_record(4, job_state::finished, 400, 1)};
  {
    auto j = journal::open(path);
    REQUIRE(j);
    for (const auto& r : recs) REQUIRE(j->file->append_sync(r));
  }
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 5);  // the finish record is torn
  auto j = journal::open(path);
  REQUIRE(j);
  CHECK(j->damage);
  auto c = replay_journal(j->records);
  REQUIRE(c);
  CHECK(c->jobs[0].life == job_state::running);  // never half-applied: not finished
}
