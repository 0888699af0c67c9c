// A served cluster's state directory (actors/service.hpp): the API token file, and a directory
// or files another local user controls (issue 32, item 1: as root, another user's state
// directory and token were trusted and links planted in it were written through).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

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

namespace {

/// An unprivileged uid to give files away to (nobody); only root can chown.
constexpr uid_t other_uid = 65534;

}  // namespace

TEST_CASE("a state directory another user owns, others may write, or a link is refused",
          "[service][state]") {
  tessera::test::scratch_dir dir("distrust");
  const std::string open_to_all = dir.file("open");
  REQUIRE(::mkdir(open_to_all.c_str(), 0700) == 0);
  ::chmod(open_to_all.c_str(), 0777);
  auto r = prepare_state_dir(open_to_all);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("may be written by others (mode 777); chmod 700"));

  const std::string good = dir.file("good");
  REQUIRE(prepare_state_dir(good));
  const std::string link = dir.file("link");
  REQUIRE(::symlink(good.c_str(), link.c_str()) == 0);
  r = prepare_state_dir(link);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("is a symbolic link"));

  if (::geteuid() != 0) {
    WARN("not root: cannot give a directory to another user; the ownership check is untested");
    return;
  }
  const std::string theirs = dir.file("theirs");
  REQUIRE(::mkdir(theirs.c_str(), 0700) == 0);
  REQUIRE(::chown(theirs.c_str(), other_uid, other_uid) == 0);
  r = prepare_state_dir(theirs);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("is owned by uid 65534, not by this user"));
}

TEST_CASE("a token file another user owns is refused, even with mode 0600", "[service][state]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a file to another user; skipped");
    return;
  }
  tessera::test::scratch_dir dir("their_token");
  const std::string state = dir.file("state");
  REQUIRE(prepare_state_dir(state));
  REQUIRE(state_dir_token(state));
  REQUIRE(::chown((state + "/token").c_str(), other_uid, other_uid) == 0);
  auto t = state_dir_token(state);
  REQUIRE_FALSE(t);
  CHECK_THAT(t.err().message, Catch::Contains("owned by uid 65534"));
}

TEST_CASE("a state file is written beside a planted link, never through it", "[service][state]") {
  tessera::test::scratch_dir dir("planted");
  const std::string state = dir.file("state");
  REQUIRE(prepare_state_dir(state));
  const std::string victim = dir.write("victim", "keep\n");
  ::chmod(victim.c_str(), 0600);
  REQUIRE(::symlink(victim.c_str(), (state + "/address").c_str()) == 0);
  // The old fixed temporary name, planted as a link too: no longer used.
  REQUIRE(::symlink(victim.c_str(), (state + "/address.tmp").c_str()) == 0);
  REQUIRE(write_file_atomically(state + "/address", "127.0.0.1:1\n", 0644));
  CHECK(tessera::test::file_contents(victim) == "keep\n");
  struct stat st {};
  REQUIRE(::stat(victim.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::lstat((state + "/address").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(tessera::test::file_contents(state + "/address") == "127.0.0.1:1\n");
}
