// A served cluster's journal as `serve` opens it (actors/cluster_journal.hpp).
#include <catch2/catch.hpp>

#include <fstream>

#include "actors/cluster_journal.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;

TEST_CASE("cluster journal: --resume with no journal is an error naming the path",
          "[journal][service]") {
  tessera::test::scratch_dir dir("resume_none");
  const std::string path = dir.file("journal");
  auto r = open_cluster_journal(path, true);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::invalid_input);
  CHECK_THAT(r.err().message, Catch::StartsWith("--resume: " + path + " does not exist"));
  CHECK_THAT(r.err().message, Catch::Contains("drop --resume"));
  // Without --resume the journal is made.
  auto fresh = open_cluster_journal(path, false);
  REQUIRE(fresh);
  CHECK(fresh->restored.jobs.empty());
}

TEST_CASE(
    "cluster journal: a damaged last record is refused naming --repair-journal, which "
    "drops it",
    "[journal][service][repair]") {
  tessera::test::scratch_dir dir("resume_damaged");
  const std::string path = dir.file("journal");
  run_job a;
  a.spec.id = 1;
  a.spec.job_type = "mlp";
  a.spec.total_steps = 40;
  a.kind = "mlp";
  run_job b = a;
  b.spec.id = 2;
  {
    auto j = journal::open(path);
    REQUIRE(j);
    REQUIRE(j->file->append_sync(submit_record({a})));
    REQUIRE(j->file->append_sync(submit_record({b})));
  }
  auto bytes = tessera::test::file_contents(path);
  bytes[bytes.size() - 10] = static_cast<char>(bytes[bytes.size() - 10] ^ 0x08);  // bit rot
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto refused = open_cluster_journal(path, true);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.err().message, Catch::Contains("not torn") &&
                                        Catch::Contains("serve --resume --repair-journal drops"));
  auto repaired = open_cluster_journal(path, true, true);
  REQUIRE(repaired);
  REQUIRE(repaired->restored.jobs.size() == 1);  // job 2's record is dropped, as asked
  CHECK(repaired->restored.jobs[0].spec.spec.id == 1);
}
