// Users' own programs as jobs (kind "program", docs/lease-protocol.md) under `tessera run`:
// misbehaving programs (tests/data/programs/misbehave.py) fail their job alone, restarts are
// counted, and no process of theirs is left behind.
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/mpi/mpi_support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const std::string programs_dir = std::string(TESSERA_TEST_DATA_DIR) + "/programs";

/// A [[job]] of misbehave.py in `mode`.
std::string misbehave_job(int id, const std::string& mode, int total, int max_restarts,
                          double grace) {
  std::ostringstream s;
  s << "[[job]]\nid = " << id << "\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", "
    << "\"misbehave.py\", \"" << mode << "\", \"0.01\"]\nworkdir = \"" << programs_dir
    << "\"\nenv = { MISBEHAVE_TOTAL = \"" << total << "\" }\ntotal_steps = " << total
    << "\nstep_time = 0.01\nmax_restarts = " << max_restarts << "\ngrace_seconds = " << grace
    << "\n\n";
  return s.str();
}

const json& job_of(const json& sum, int id) {
  for (const auto& j : sum["jobs"])
    if (j["id"].get<int>() == id) return j;
  FAIL("no job " << id << " in the summary");
  static json none;
  return none;
}

}  // namespace

TEST_CASE("(t) misbehaving programs fail their own job, and leave no process behind",
          "[mpi][program]") {
  scratch_dir dir("programs");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  std::string jobs = misbehave_job(0, "ok", 60, 0, 2) + misbehave_job(1, "crash_once", 60, 2, 2) +
                     misbehave_job(2, "crash", 60, 1, 2) + misbehave_job(3, "silent", 60, 0, 1) +
                     misbehave_job(4, "never", 60, 0, 1) + misbehave_job(5, "garbage", 60, 0, 1) +
                     misbehave_job(6, "orphan", 60, 0, 1) +
                     misbehave_job(7, "hang_after_lease", 60, 0, 1) +
                     misbehave_job(8, "version", 60, 0, 1) +
                     misbehave_job(9, "oversized", 60, 0, 1);
  const auto jf = dir.write("jobs.toml", jobs);
  auto o = run_shell(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl +
                     " --jobs " + jf + " --policy fifo --round-length 0.6 --checkpoint-dir " +
                     dir.file("ckpt") + " --json " + dir.file("sum.json") + " --timeout 80");
  INFO(o.out);
  CHECK(o.code == 1);  // some jobs failed: the run says so
  const auto sum = load_json(dir.file("sum.json"));
  CHECK_FALSE(sum["ok"].get<bool>());
  CHECK(has(sum["error"].get<std::string>(), "2, 3, 4, 5, 6, 7, 8, 9"));
  // A well-behaved program finishes; its steps are the ones it reported.
  const auto& ok = job_of(sum, 0);
  CHECK(ok["finished"].get<bool>());
  CHECK(ok["steps"].get<int>() == 60);
  CHECK(ok["program_failures"].get<int>() == 0);
  CHECK(ok["accuracy"].get<double>() == 0.5);
  // Failing once is a restart from its checkpoint; it then finishes.
  const auto& once = job_of(sum, 1);
  CHECK(once["finished"].get<bool>());
  CHECK(once["program_failures"].get<int>() == 1);
  CHECK(once["steps"].get<int>() == 60);
  // Failing always: max_restarts + 1 failures, then failed with the tail of its stderr.
  const auto& crash = job_of(sum, 2);
  CHECK(crash["failed"].get<bool>());
  CHECK_FALSE(crash["finished"].get<bool>());
  CHECK(crash["program_failures"].get<int>() == 2);
  CHECK(has(crash["failure"].get<std::string>(), "exited with status 3"));
  CHECK(has(crash["failure"].get<std::string>(), "misbehave: about to fail on purpose"));
  const std::vector<std::pair<int, std::string>> reasons{
      {3, "sent nothing for"},
      {4, "did not reach its lease within"},
      {5, "broke the lease protocol"},
      {6, "exited with status 4"},
      {7, "still ran"},
      {8, "broke the lease protocol"},
      {9, "broke the lease protocol"}};
  for (const auto& [id, why] : reasons) {
    const auto& j = job_of(sum, id);
    INFO("job " << id << ": " << j["failure"].get<std::string>());
    CHECK(j["failed"].get<bool>());
    CHECK(j["program_failures"].get<int>() == 1);
    CHECK(has(j["failure"].get<std::string>(), why));
  }
  CHECK(has(job_of(sum, 8)["failure"].get<std::string>(), "99"));
  // No program, and no child a program left, outlives the run.
  CHECK(find_process("misbehave.py") == -1);
  CHECK(find_process("sleep 997") == -1);
}
