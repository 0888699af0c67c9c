// Tests of the scheduler's checkpoint bookkeeping (actors/checkpoints.cpp): file names, the
// per-job book (the last two confirmed files, resume and fallback, epochs), the stray files
// of a directory, the directory's health; a property test on random confirms and failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <set>

#include "actors/checkpoints.hpp"
#include "runtime/node/train/checkpoint.hpp"
#include "tests/support.hpp"

using namespace tessera::actors;
using tessera::test::scratch_dir;

namespace {

checkpoint_file file(std::int64_t round, std::int64_t step) {
  return {checkpoint_file_path("/ck", 1, round), round, step};
}

}  // namespace

TEST_CASE("checkpoint and fence files are named by job and round", "[actors][checkpoints]") {
  CHECK(checkpoint_file_path("/ck", 7, 12) == "/ck/job-7.r12.ckpt");
  CHECK(checkpoint_file_path("rel", 0, 0) == "rel/job-0.r0.ckpt");
  CHECK(fence_file_path("/ck", 7) == "/ck/job-7.fence");
}

TEST_CASE("a book keeps the last two confirmed checkpoints", "[actors][checkpoints]") {
  checkpoint_book b(100);
  CHECK(b.resume() == nullptr);
  CHECK(b.fallback() == nullptr);
  CHECK(b.step() == 0);
  CHECK(b.epoch() == 100);

  CHECK(b.confirm(file(0, 10)).empty());
  REQUIRE(b.resume());
  CHECK(b.resume()->round == 0);
  CHECK(b.fallback() == nullptr);
  CHECK(b.confirm(file(2, 30)).empty());
  CHECK(b.resume()->round == 2);
  CHECK(b.fallback()->round == 0);
  CHECK(b.step() == 30);
  // A third: the oldest is no longer kept and is returned for removal.
  CHECK(b.confirm(file(3, 40)) == std::vector<std::string>{"/ck/job-1.r0.ckpt"});
  CHECK(b.resume()->step == 40);
  CHECK(b.fallback()->step == 30);
  CHECK_FALSE(b.keeps("/ck/job-1.r0.ckpt"));
  // Late or repeated reports change nothing.
  CHECK(b.confirm(file(1, 20)).empty());
  CHECK(b.confirm(file(3, 40)).empty());
  CHECK(b.resume()->round == 3);
  CHECK(b.fallback()->round == 2);
}

TEST_CASE("a file found bad is forgotten once, the fallback becomes the resume",
          "[actors][checkpoints]") {
  checkpoint_book b;
  b.confirm(file(4, 40));
  b.confirm(file(5, 50));
  CHECK(b.forget("/ck/job-1.r5.ckpt"));
  CHECK_FALSE(b.forget("/ck/job-1.r5.ckpt"));  // a second part reporting it counts nothing
  CHECK_FALSE(b.forget("/ck/job-1.r9.ckpt"));
  REQUIRE(b.resume());
  CHECK(b.resume()->round == 4);
  CHECK(b.fallback() == nullptr);
  CHECK(b.forget("/ck/job-1.r4.ckpt"));
  CHECK(b.resume() == nullptr);
  CHECK(b.step() == 0);  // nothing good left: from scratch
  // Progress goes on from there: a new round's file is kept.
  CHECK(b.confirm(file(7, 20)).empty());
  CHECK(b.resume()->step == 20);
}

TEST_CASE("fencing gives the job's writers a newer epoch", "[actors][checkpoints]") {
  checkpoint_book b(1000);
  CHECK(b.fence() == 1001);
  CHECK(b.epoch() == 1001);
  CHECK(b.fence() == 1002);
}

TEST_CASE("stray files of the run's jobs are found, other files are left alone",
          "[actors][checkpoints]") {
  checkpoint_book one;
  one.confirm({checkpoint_file_path("/ck", 1, 3), 3, 30});
  one.confirm({checkpoint_file_path("/ck", 1, 4), 4, 40});
  checkpoint_book two;  // nothing confirmed: every checkpoint of job 2 is stray
  const std::map<std::int64_t, const checkpoint_book*> books = {{1, &one}, {2, &two}};
  const std::vector<std::string> names = {
      "job-1.r2.ckpt",          // no longer kept
      "job-1.r3.ckpt",          // kept
      "job-1.r4.ckpt",          // kept
      "job-1.r5.ckpt",          // never confirmed (a lost writer, a failed round)
      ".job-1.r6.ckpt.tmp.a1",  // an interrupted write
      ".job-1.fence.tmp.b2",    // an interrupted fence write
      "job-1.fence",            // the fence itself
      "job-2.r0.ckpt",          // unconfirmed
      "job-3.r1.ckpt",          // not a job of this run
      ".job-3.r1.ckpt.tmp.c3",  // nor this
      "job-1.ckpt",             // another naming: not ours
      "job-1x.r1.ckpt",
      "job-1.rx.ckpt",
      "job-.r1.ckpt",
      "notes.txt",
      ".probe.d4",
  };
  auto strays = stray_files("/ck", names, books);
  std::sort(strays.begin(), strays.end());
  CHECK(strays == std::vector<std::string>{"/ck/.job-1.fence.tmp.b2", "/ck/.job-1.r6.ckpt.tmp.a1",
                                           "/ck/job-1.r2.ckpt", "/ck/job-1.r5.ckpt",
                                           "/ck/job-2.r0.ckpt"});
}

TEST_CASE("listing and removing files in a directory", "[actors][checkpoints]") {
  scratch_dir dir("ckpt_remove");
  std::ofstream(dir.file("a")) << "x";
  std::ofstream(dir.file(".b")) << "y";
  auto names = list_directory(dir.str());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{".b", "a"});
  CHECK(list_directory(dir.file("absent")).empty());
  CHECK(remove_files({dir.file("a"), dir.file("gone")}).empty());  // gone already: fine
  CHECK(dir.entries() == std::vector<std::string>{".b"});
  const auto failed = remove_files({dir.str()});  // a directory cannot be unlinked
  CHECK(failed.rfind(dir.str() + ": ", 0) == 0);
}

TEST_CASE("the directory's health pauses on the first failure and resumes once",
          "[actors][checkpoints]") {
  checkpoint_dir_health h;
  CHECK_FALSE(h.paused());
  CHECK_FALSE(h.recovered());
  CHECK(h.failed("/ck: No space left on device"));
  CHECK_FALSE(h.failed("/ck: still full"));  // logged once: the first failure's text stays
  CHECK(h.paused());
  CHECK(h.reason() == "/ck: No space left on device");
  CHECK(h.recovered());
  CHECK_FALSE(h.recovered());
  CHECK(h.failed("/ck: Read-only file system"));
  CHECK(h.pauses() == 2);
}

TEST_CASE(
    "property: a book resumes from the newest good confirmed file, falls back to the "
    "next, keeps at most two",
    "[actors][checkpoints][property]") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 300; ++trial) {
    checkpoint_book b;
    std::set<std::string> confirmed, forgotten, removed;
    std::map<std::string, std::int64_t> round_of;
    std::int64_t round = 0;
    for (int op = 0; op < 40; ++op) {
      const unsigned pick = rng() % 10;
      if (pick < 5) {  // a round's checkpoint is confirmed
        round += 1 + static_cast<std::int64_t>(rng() % 3);
        const auto f = file(round, round * 10);
        confirmed.insert(f.path);
        round_of[f.path] = round;
        for (const auto& p : b.confirm(f)) {
          CHECK(confirmed.count(p));
          removed.insert(p);
        }
      } else if (pick < 7) {  // a late or repeated report (not newer than the newest kept)
        if (!b.resume()) continue;
        const auto before = *b.resume();
        const auto late = before.round - static_cast<std::int64_t>(rng() % 3);
        CHECK(b.confirm(file(std::max<std::int64_t>(0, late), 0)).empty());
        CHECK(b.resume()->path == before.path);
        CHECK(b.resume()->step == before.step);
      } else {  // a node finds some file bad (kept or not)
        const auto p =
            file(static_cast<std::int64_t>(rng() % static_cast<unsigned>(round + 1)), 0).path;
        const bool was_kept = b.keeps(p);
        CHECK(b.forget(p) == was_kept);
        forgotten.insert(p);
      }
      // The good files on disk: confirmed, not removed by the book, not found bad.
      std::vector<std::int64_t> good;
      for (const auto& p : confirmed)
        if (!removed.count(p) && !forgotten.count(p)) good.push_back(round_of[p]);
      std::sort(good.rbegin(), good.rend());
      INFO("trial " << trial << " op " << op);
      CHECK(good.size() <= 2);  // at most two kept
      if (good.empty()) {
        CHECK(b.resume() == nullptr);
        CHECK(b.step() == 0);
        continue;
      }
      REQUIRE(b.resume());
      CHECK(confirmed.count(b.resume()->path));
      CHECK_FALSE(forgotten.count(b.resume()->path));
      CHECK(b.resume()->round == good[0]);  // never an older file than a good one
      if (good.size() > 1) {
        REQUIRE(b.fallback());
        CHECK(b.fallback()->round == good[1]);
        CHECK(b.fallback()->round < b.resume()->round);
      } else {
        CHECK(b.fallback() == nullptr);
      }
    }
  }
}

TEST_CASE("a copy's fallback or restart forgets and removes the bad files, counted once",
          "[actors][checkpoints]") {
  scratch_dir dir("ckpt_start");
  job_checkpoints jc;
  const auto r1 = checkpoint_file_path(dir.str(), 3, 1), r2 = checkpoint_file_path(dir.str(), 3, 2);
  for (const auto& p : {r1, r2}) std::ofstream(p) << "state";
  jc.book.confirm({r1, 1, 10});
  jc.book.confirm({r2, 2, 20});
  std::ostringstream log;
  CHECK_FALSE(note_start(jc, 3, state_source::resume, {}, "", log));
  CHECK_FALSE(note_start(jc, 3, state_source::memory, {}, "", log));
  CHECK(log.str().empty());

  CHECK(note_start(jc, 3, state_source::fallback, {r2}, r2 + ": payload checksum mismatch", log));
  CHECK(jc.fallbacks == 1);
  CHECK(jc.book.resume()->path == r1);
  CHECK_FALSE(std::filesystem::exists(r2));
  CHECK(log.str() == "tessera: job 3: " + r2 +
                         ": payload checksum mismatch; resumed from its "
                         "previous checkpoint " +
                         r1 + " at step 10\n");
  // Another part of the same copy reporting the same file: the job went back, counted once.
  CHECK(note_start(jc, 3, state_source::fallback, {r2}, "again", log));
  CHECK(jc.fallbacks == 1);

  CHECK(note_start(jc, 3, state_source::scratch, {r1}, r1 + ": truncated", log));
  CHECK(jc.restarts_from_scratch == 1);
  CHECK(jc.book.resume() == nullptr);
  CHECK(dir.entries().empty());
  CHECK(log.str().find("no usable checkpoint is left, it restarts from step 0") !=
        std::string::npos);
}

TEST_CASE("confirming a third checkpoint removes the oldest file", "[actors][checkpoints]") {
  scratch_dir dir("ckpt_confirm");
  job_checkpoints jc;
  std::ostringstream log;
  for (std::int64_t r = 0; r < 3; ++r) {
    const auto p = checkpoint_file_path(dir.str(), 1, r);
    std::ofstream(p) << "state";
    note_confirmed(jc, 1, {p, r, 10 * r}, log);
  }
  CHECK(dir.entries() == std::vector<std::string>{"job-1.r1.ckpt", "job-1.r2.ckpt"});
  CHECK(log.str().empty());
}

TEST_CASE("a failed write pauses the directory, logged once, and a lost writer is fenced",
          "[actors][checkpoints]") {
  scratch_dir dir("ckpt_events");
  job_checkpoints a, b;
  run_checkpoints rc;
  rc.dir = dir.str();
  std::ostringstream log;
  note_write_failure(a, rc, 0, dir.str() + "/job-0.r4.ckpt: cannot write: No space left on device",
                     log);
  note_write_failure(b, rc, 1, dir.str() + "/job-1.r4.ckpt: cannot write: No space left on device",
                     log);
  CHECK(a.write_failures == 1);
  CHECK(b.write_failures == 1);
  CHECK(rc.health.paused());
  CHECK(log.str() == "tessera: checkpoint directory " + dir.str() +
                         " does not take writes (job 0: " + dir.str() +
                         "/job-0.r4.ckpt: cannot write: No space left on device); every "
                         "job waits until it does, probed each round\n");

  checkpoint_book fenced(50);
  job_checkpoints jc{fenced};
  fence_job(jc, rc, 2, log);
  CHECK(jc.book.epoch() == 51);
  auto epoch = tessera::train::read_fence(fence_file_path(dir.str(), 2));
  REQUIRE(epoch);
  CHECK(*epoch == 51);
  run_checkpoints gone;
  gone.dir = dir.file("absent");
  std::ostringstream gone_log;
  fence_job(jc, gone, 2, gone_log);
  CHECK(gone_log.str().find("cannot fence its lost writer") != std::string::npos);
}

TEST_CASE("before a round: the paused directory is probed, strays are removed",
          "[actors][checkpoints]") {
  scratch_dir dir("ckpt_round");
  checkpoint_book one;
  const auto kept = checkpoint_file_path(dir.str(), 1, 3);
  one.confirm({kept, 3, 30});
  for (const auto& n : {"job-1.r3.ckpt", "job-1.r4.ckpt", ".job-1.r5.ckpt.tmp.x", "other"})
    std::ofstream(dir.file(n)) << "x";
  const std::map<std::int64_t, const checkpoint_book*> books = {{1, &one}};
  run_checkpoints rc;
  rc.dir = dir.str();
  bool full = true;
  rc.probe_errno = [&](std::int64_t round) { return full && round < 9 ? ENOSPC : 0; };
  std::ostringstream log;
  CHECK_FALSE(before_round(rc, 5, books, log));  // healthy: no probe, strays removed
  CHECK(dir.entries() == std::vector<std::string>{"job-1.r3.ckpt", "other"});

  rc.health.failed("full");
  CHECK(before_round(rc, 6, books, log));  // the probe fails: the jobs still wait
  CHECK(log.str().empty());
  full = false;
  CHECK_FALSE(before_round(rc, 7, books, log));
  CHECK(log.str() ==
        "tessera: checkpoint directory " + dir.str() + " takes writes again; the jobs resume\n");
  CHECK(dir.entries() == std::vector<std::string>{"job-1.r3.ckpt", "other"});  // no probe file left
}
