// A served cluster's journal as `serve` opens it (actors/cluster_journal.hpp).
#include <catch2/catch.hpp>

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
