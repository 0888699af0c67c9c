// A served cluster's state directory (actors/service.hpp): the API token file.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "actors/service.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;

TEST_CASE("the API token is made once, kept, mode 0600, and refused when others may read it",
          "[serve][token]") {
  tessera::test::scratch_dir dir("token");
  const std::string state = dir.file("state");
  REQUIRE(prepare_state_dir(state));
  struct stat st {};
  REQUIRE(::stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto first = state_dir_token(state);
  REQUIRE(first);
  CHECK(first->size() == 64);
  REQUIRE(::stat((state + "/token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = state_dir_token(state);
  REQUIRE(again);
  CHECK(*again == *first);
  ::chmod((state + "/token").c_str(), 0644);
  auto open_to_all = state_dir_token(state);
  REQUIRE_FALSE(open_to_all);
  CHECK(open_to_all.err().message.find("chmod 600") != std::string::npos);
  ::chmod((state + "/token").c_str(), 0600);
  std::ofstream(state + "/token", std::ios::trunc) << "not-a-token\n";
  CHECK_FALSE(state_dir_token(state));
}
