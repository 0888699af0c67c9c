// A user's program process: its environment, its output, its exit, its whole process group.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "runtime/node/program/process.hpp"

using namespace tessera::program;

namespace {

/// Polls until the process exits (at most `limit_s`), collecting its output.
void run_out(child_process& p, std::ostringstream& out, std::ostringstream& err,
             double limit_s = 10) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (p.poll(20, out, err) && std::chrono::steady_clock::now() < until) {
  }
}

process_spec shell(const std::string& script) {
  process_spec s;
  s.argv = {"/bin/sh", "-c", script};
  return s;
}

}  // namespace

TEST_CASE("a program's output is forwarded line by line with its prefix", "[program][process]") {
  auto spec = shell("echo one; echo two >&2; printf 'no newline'; exit 3");
  spec.prefix = "[job 7] ";
  auto p = child_process::start(spec);
  REQUIRE(p);
  std::ostringstream out, err;
  run_out(*p, out, err);
  REQUIRE(p->exited());
  CHECK_FALSE(p->succeeded());
  CHECK(p->describe_exit() == "exited with status 3");
  CHECK(out.str() == "[job 7] one\n[job 7] no newline\n");
  CHECK(err.str() == "[job 7] two\n");
  CHECK(p->stderr_tail() == "two\n");
}

TEST_CASE("a program runs in its directory with its environment", "[program][process]") {
  auto spec = shell("echo \"$TESSERA_TEST_VAR\"; pwd");
  spec.env["TESSERA_TEST_VAR"] = "a value with spaces";
  spec.workdir = std::filesystem::temp_directory_path().string();
  auto p = child_process::start(spec);
  REQUIRE(p);
  std::ostringstream out, err;
  run_out(*p, out, err);
  CHECK(p->succeeded());
  CHECK(out.str() ==
        "a value with spaces\n" + std::filesystem::canonical(spec.workdir).string() + "\n");
}

TEST_CASE("a program that cannot be started is an error naming it", "[program][process]") {
  process_spec spec;
  spec.argv = {"tessera-no-such-program-xyz", "--flag"};
  auto p = child_process::start(spec);
  REQUIRE_FALSE(p);
  CHECK(p.err().message.find("tessera-no-such-program-xyz") != std::string::npos);
  CHECK(p.err().message.find("No such file") != std::string::npos);
  spec = shell("true");
  spec.workdir = "/no/such/dir/for/tessera";
  auto q = child_process::start(spec);
  REQUIRE_FALSE(q);
  CHECK(q.err().message.find("/no/such/dir/for/tessera") != std::string::npos);
}

TEST_CASE("killing a program's group leaves none of its processes", "[program][process]") {
  // The program forks two children of its own that would outlive it.
  auto p = child_process::start(shell("sleep 300 & sleep 300 & echo started; wait"));
  REQUIRE(p);
  std::ostringstream out, err;
  while (out.str().empty()) p->poll(20, out, err);
  CHECK(p->group_alive());
  p->signal_group(SIGTERM);
  run_out(*p, out, err);
  CHECK(p->describe_exit().find("signal 15") != std::string::npos);
  // Reaping the leader is not enough: the children must be gone too.
  for (int i = 0; i < 100 && p->group_alive(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(p->group_alive());
}

TEST_CASE("destroying a running program kills its group", "[program][process]") {
  pid_t pid = -1;
  {
    auto p = child_process::start(shell("sleep 300 & exec sleep 300"));
    REQUIRE(p);
    pid = p->pid();
    CHECK(::kill(-pid, 0) == 0);
  }
  for (int i = 0; i < 100 && ::kill(-pid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(::kill(-pid, 0) != 0);
}

TEST_CASE("what a program started in a session of its own ends with it", "[program][process]") {
  // Before: a child that called setsid (its own group and session) outlived every group kill.
  pid_t escaped = -1;
  {
    auto p = child_process::start(shell("setsid sh -c 'echo $$; exec sleep 301' & wait"));
    REQUIRE(p);
    std::ostringstream out, err;
    while (out.str().empty()) p->poll(20, out, err);
    escaped = std::stoi(out.str());
    REQUIRE(::getpgid(escaped) == escaped);  // a group (and session) of its own
    CHECK(::kill(escaped, 0) == 0);
    std::ostringstream drained_out, drained_err;
    p->kill_and_reap(drained_out, drained_err);
  }
  // It is killed; whoever reaps it (init, or a subreaper), it is gone or a zombie.
  auto alive = [&] {
    std::ifstream stat("/proc/" + std::to_string(escaped) + "/stat");
    std::string pid, comm, state;
    return stat >> pid >> comm >> state && state != "Z";
  };
  for (int i = 0; i < 100 && alive(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(alive());
}

TEST_CASE("a program's stderr tail is bounded and ends with its last lines", "[program][process]") {
  auto spec = shell(
      "i=0; while [ $i -lt 2000 ]; do echo \"line $i of the error output\" >&2; "
      "i=$((i+1)); done; exit 1");
  spec.tail_bytes = 256;
  auto p = child_process::start(spec);
  REQUIRE(p);
  std::ostringstream out, err;
  run_out(*p, out, err);
  const auto tail = p->stderr_tail();
  CHECK(tail.size() <= 256);
  CHECK(tail.rfind("line 1999 of the error output\n") == tail.size() - 30);
  CHECK(tail.rfind("line ", 0) == 0);   // whole lines
  CHECK(err.str().size() > 2000 * 20);  // everything was forwarded
}

TEST_CASE("a killed program says which signal", "[program][process]") {
  auto p = child_process::start(shell("kill -9 $$"));
  REQUIRE(p);
  std::ostringstream out, err;
  run_out(*p, out, err);
  CHECK(p->describe_exit().rfind("was killed by signal 9", 0) == 0);
}

TEST_CASE("a program inherits no descriptor of the node but its standard streams",
          "[program][process]") {
  // A descriptor the node opened without O_CLOEXEC (as CAF's and Asio's sockets are).
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int leaked = ::fcntl(devnull, F_DUPFD, 77);
  ::close(devnull);
  REQUIRE(leaked >= 77);
  REQUIRE((::fcntl(leaked, F_GETFD) & FD_CLOEXEC) == 0);
  const std::string fd = std::to_string(leaked);
  auto p = child_process::start(
      shell("if [ -e /proc/$$/fd/" + fd + " ]; then echo open; else echo closed; fi"));
  REQUIRE(p);
  std::ostringstream out, err;
  run_out(*p, out, err);
  ::close(leaked);
  CHECK(out.str() == "closed\n");
}
