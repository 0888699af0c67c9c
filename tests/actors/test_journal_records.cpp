// A served cluster's journal records (actors/journal_records.hpp) and their replay.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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
  p.program.checkpoint_every.seconds = 600;
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
  CHECK(a.spec.spec.arrival == 33);  // in cluster time, which a resume goes on counting
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
  CHECK(p.spec.program.grace_seconds == 12.5);
  CHECK(p.spec.program.checkpoint_every.seconds == 600);
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

namespace {

job_history finished_history() {
  job_history h;
  h.first_start = 12.5;
  h.finish = 80.25;
  h.steps = 400;
  h.run_time = 60;
  h.gpu_seconds = 120;
  h.loss = 0.125;
  h.accuracy = 0.9375;
  h.restarts = 2;
  h.lost_rounds = 1;
  h.rounds = 30;
  h.max_copies = 2;
  h.program_failures = 1;
  h.reached_target = true;
  return h;
}

void check_same(const job_history& a, const job_history& b) {
  CHECK(a.first_start == b.first_start);
  CHECK(a.finish == b.finish);
  CHECK(a.steps == b.steps);
  CHECK(a.run_time == b.run_time);
  CHECK(a.gpu_seconds == b.gpu_seconds);
  CHECK(a.loss == b.loss);
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.restarts == b.restarts);
  CHECK(a.lost_rounds == b.lost_rounds);
  CHECK(a.rounds == b.rounds);
  CHECK(a.max_copies == b.max_copies);
  CHECK(a.program_failures == b.program_failures);
  CHECK(a.reached_target == b.reached_target);
  CHECK(a.failure == b.failure);
}

}  // namespace

TEST_CASE("an ended job comes back with what it ended with, through a compaction too",
          "[journal][serve][resume]") {
  // Before: a resumed cluster showed a finished job with JCT -1, loss 0 and no restarts.
  const auto h = finished_history();
  std::vector<std::string> recs = {submit_record(sample_jobs()),
                                   state_record(4, job_state::running, 0, 0, 20.0),
                                   state_record(4, job_state::finished, 400, 7, 80.25, &h),
                                   checkpoint_record(7, {"", 8, 12}, 91.5)};
  auto c = replay_journal(recs);
  REQUIRE(c);
  CHECK(c->clock == 91.5);  // the newest "at": the resumed clock goes on from it
  REQUIRE(c->jobs[0].ended);
  check_same(*c->jobs[0].ended, h);
  CHECK_FALSE(c->jobs[1].ended);
  auto again = replay_journal(compacted_records(*c));
  REQUIRE(again);
  CHECK(again->clock == 91.5);
  CHECK(again->jobs[0].life == job_state::finished);
  CHECK(again->jobs[0].spec.spec.arrival == 33);
  REQUIRE(again->jobs[0].ended);
  check_same(*again->jobs[0].ended, h);
}

TEST_CASE("an ended job's later state records do not bring it back", "[journal][serve][resume]") {
  const auto h = finished_history();
  auto c = replay_journal({submit_record(sample_jobs()),
                           state_record(4, job_state::finished, 400, 7, 80, &h),
                           state_record(4, job_state::running, 400, 8, 81)});
  REQUIRE(c);
  CHECK(c->jobs[0].life == job_state::finished);
}

TEST_CASE(
    "replay does not look for an ended program's workdir, and an open one without it fails alone",
    "[journal][serve][resume]") {
  // Before: `serve --resume` exited 1 for every job once one finished job's workdir was gone.
  tessera::test::scratch_dir dir("journal_workdir");
  auto jobs = sample_jobs();
  const std::string gone = dir.file("gone");
  std::filesystem::create_directories(gone);
  jobs[1].program.workdir = gone;
  run_job open_program = jobs[1];
  open_program.spec.id = 8;
  jobs.push_back(open_program);
  const auto h = finished_history();
  const std::vector<std::string> recs = {submit_record(jobs),
                                         state_record(7, job_state::finished, 30, 2, 10, &h)};
  std::filesystem::remove(gone);
  auto c = replay_journal(recs);
  REQUIRE(c);
  REQUIRE(c->jobs.size() == 3);
  CHECK(c->jobs[0].life == job_state::queued);    // not a program: untouched
  CHECK(c->jobs[1].life == job_state::finished);  // ended: its workdir is not asked for
  CHECK(c->jobs[1].ended->loss == h.loss);
  CHECK(c->jobs[2].life == job_state::failed);  // open: cannot run without it
  REQUIRE(c->jobs[2].ended);
  CHECK_THAT(c->jobs[2].ended->failure,
             Catch::Contains(gone) && Catch::Contains("no longer exists"));
  REQUIRE(c->failed_at_replay.size() == 1);
  CHECK_THAT(c->failed_at_replay[0], Catch::StartsWith("job 8: "));
}

TEST_CASE("a submitted job that no longer reads back comes back failed, the others as they were",
          "[journal][serve][resume]") {
  // An earlier version gave job 2^53 + 1 automatically; today's reader refuses that id. Before:
  // the whole journal was refused, so `serve --resume` exited 1 for every job.
  auto rec = nlohmann::json::parse(submit_record(sample_jobs()));
  auto bad = rec["jobs"]["job"][0];
  bad["id"] = (std::int64_t{1} << 53) + 1;
  rec["jobs"]["job"].push_back(bad);
  auto c = replay_journal({rec.dump(), state_record(4, job_state::running, 0, 1, 5)});
  REQUIRE(c);
  REQUIRE(c->jobs.size() == 3);
  CHECK(c->jobs[0].life == job_state::running);
  CHECK(c->jobs[1].spec.is_program());
  const auto& b = c->jobs[2];
  CHECK(b.spec.spec.id == (std::int64_t{1} << 53) + 1);
  CHECK(b.life == job_state::failed);
  REQUIRE(b.ended);
  CHECK_THAT(b.ended->failure, Catch::Contains("no longer reads back") && Catch::Contains("id"));
  REQUIRE(c->failed_at_replay.size() == 1);
  // Compacted, it keeps its record as written and fails again with the same reason.
  auto again = replay_journal(compacted_records(*c));
  REQUIRE(again);
  REQUIRE(again->jobs.size() == 3);
  CHECK(again->jobs[2].life == job_state::failed);
  CHECK(again->jobs[2].ended->failure == b.ended->failure);
}
