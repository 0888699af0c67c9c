// The header-only C++ lease client (clients/cpp/tessera_client.hpp) against the fake node
// (tests/clients/fake_node.py, started as a python3 process), and its JSON and shared-memory
// pieces alone.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "clients/cpp/tessera_client.hpp"
#include "tests/support.hpp"

namespace {

using nlohmann::json;
using tessera::test::scratch_dir;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// A fake node process serving `script` (fake_node.py's script, JSON) on a socket in a scratch
/// directory; sets TESSERA_LEASE and TESSERA_LEASE_TOKEN for the client while it lives.
class fake_node {
 public:
  explicit fake_node(const json& script) : dir_("lease_client") {
    socket_ = dir_.file("lease.sock");
    log_ = dir_.file("node.log");
    int out[2];
    REQUIRE(::pipe(out) == 0);
    std::string text = script.dump();
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execl(TESSERA_PYTHON, TESSERA_PYTHON, TESSERA_FAKE_NODE, socket_.c_str(), text.c_str(),
              log_.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string said;
    char c;
    while (said.find('\n') == std::string::npos && ::read(out[0], &c, 1) == 1) said += c;
    ::close(out[0]);
    REQUIRE(said == "ready\n");
    ::setenv("TESSERA_LEASE", socket_.c_str(), 1);
    ::setenv("TESSERA_LEASE_TOKEN", std::string(64, '0').c_str(), 1);
  }
  ~fake_node() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unsetenv("TESSERA_LEASE");
    ::unsetenv("TESSERA_LEASE_TOKEN");
  }
  fake_node(const fake_node&) = delete;
  fake_node& operator=(const fake_node&) = delete;

  /// Waits for the node to end (its connection closed) and returns the messages it received,
  /// those of `op` only when given.
  std::vector<json> messages(const std::string& op = "") {
    auto start = clock_type::now();
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      REQUIRE(seconds_since(start) < 10);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    std::vector<json> out;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) {
      json m = json::parse(line).at("msg");
      if (op.empty() || m.at("op") == op) out.push_back(m);
    }
    return out;
  }

 private:
  scratch_dir dir_;
  std::string socket_, log_;
  pid_t pid_ = -1;
};

float f32(double x) { return static_cast<float>(x); }

}  // namespace

TEST_CASE("C++ client: the steps cap ends the loop and flags the last step", "[clients]") {
  fake_node node(
      json{{"terms", {{"steps", 5}, {"step", 40}, {"job", 3}, {"copy", 1}, {"copies", 2}}}});
  std::vector<bool> flags;
  {
    tessera_client::lease lease(12);
    CHECK(lease.job() == 3);
    CHECK(lease.copy() == 1);
    CHECK(lease.copies() == 2);
    CHECK(lease.step() == 12);  // the program's own checkpoint wins
    CHECK_FALSE(lease.standalone());
    while (lease.next()) flags.push_back(lease.should_checkpoint());
    CHECK(lease.expired());
    CHECK(lease.steps_made() == 5);
  }
  CHECK(flags == std::vector<bool>{false, false, false, false, true});
  auto hello = node.messages("hello").at(0);
  CHECK(hello.at("pid") == ::getpid());
  CHECK(hello.at("step") == 12);
  auto reports = node.messages("report");
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back() == json({{"v", 2}, {"op", "report"}, {"steps", 5}, {"final", true}}));
}

TEST_CASE("C++ client: replies split across writes, average exact for float32", "[clients]") {
  std::mt19937 gen(5);
  std::vector<std::vector<float>> buffers(3);
  for (std::size_t k = 0; k < 700; ++k) {
    std::uint32_t bits = gen();
    float f;
    std::memcpy(&f, &bits, 4);
    if (f == f) buffers[k % 3].push_back(f);  // any float32 but NaN
  }
  buffers.emplace_back();  // an empty buffer travels too
  auto sent = buffers;
  fake_node node(json{{"terms", {{"steps", 4}}}, {"split", 4}, {"merged_step", 9}});
  tessera_client::lease lease;
  int steps = 0;
  while (lease.next()) ++steps;
  CHECK(steps == 4);
  auto result = lease.average(buffers);
  lease.complete(0.5, 0.75);
  CHECK(result.copies == 1);
  CHECK(result.step == 9);
  for (std::size_t b = 0; b < buffers.size(); ++b)
    CHECK(tessera::test::same_bits(buffers[b], sent[b]));
  auto complete = node.messages("complete").at(0);
  CHECK(complete.at("steps") == 4);
  CHECK(complete.at("loss") == 0.5);
  CHECK(complete.at("accuracy") == 0.75);
}

TEST_CASE("C++ client: the mean with another copy", "[clients]") {
  std::vector<float> other = {2.5f, 4.0f, -1.25f, 3e-3f, 1.0f};
  fake_node node(json{{"terms", {{"steps", 1}, {"copies", 2}}}, {"others", {other}}});
  std::vector<std::vector<float>> mine = {{1.5f, -2.0f, 3.25f}, {1e-3f, 0.1f}};
  auto flat_mine = std::vector<float>{1.5f, -2.0f, 3.25f, 1e-3f, 0.1f};
  tessera_client::lease lease;
  auto result = lease.average(mine);
  lease.complete();
  CHECK(result.copies == 2);
  std::vector<float> expected;
  for (std::size_t k = 0; k < other.size(); ++k)
    expected.push_back(f32((double(flat_mine[k]) + double(other[k])) / 2));
  CHECK(tessera::test::same_bits(mine[0], {expected[0], expected[1], expected[2]}));
  CHECK(tessera::test::same_bits(mine[1], {expected[3], expected[4]}));
  CHECK(node.messages("average").at(0).at("sizes") == json({3, 2}));
}

TEST_CASE("C++ client: a shortened lease ends the loop at the reply", "[clients]") {
  fake_node node(json{{"terms", {{"steps", 100}}}, {"stop_after_steps", 2}});
  tessera_client::lease lease;
  std::vector<bool> flags;
  while (lease.next()) {  // a step longer than the report interval: a report after each
    std::this_thread::sleep_for(std::chrono::milliseconds(210));
    flags.push_back(lease.should_checkpoint());
  }
  CHECK(lease.expired());
  CHECK(flags == std::vector<bool>{false, false});
  lease.close();
  CHECK(node.messages("report").back() ==
        json({{"v", 2}, {"op", "report"}, {"steps", 2}, {"final", true}}));
}

TEST_CASE("C++ client: pacing by speed", "[clients]") {
  auto run = [](double speed) {
    fake_node node(json{{"terms", {{"steps", 10}, {"speed", speed}}}});
    tessera_client::lease lease;
    auto start = clock_type::now();
    while (lease.next()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    double took = seconds_since(start);
    lease.close();
    node.messages();
    return took;
  };
  double full = run(1.0), half = run(0.5);
  CHECK(half >= 2 * 10 * 0.02);  // every step slept as long again
  CHECK(full < 10 * 0.02 * 2);
  CHECK(half / full > 1.5);
}

TEST_CASE("C++ client: the deadline ends the loop by the measured step time", "[clients]") {
  fake_node node(json{{"terms", {{"seconds", 0.6}}}});
  tessera_client::lease lease;
  auto start = clock_type::now();
  std::vector<bool> flags;
  while (lease.next()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flags.push_back(lease.should_checkpoint());
  }
  double took = seconds_since(start);
  CHECK(lease.expired());
  REQUIRE(flags.size() >= 6);  // ~11 steps fit; a loaded host makes fewer
  CHECK(flags.back());
  CHECK(std::count(flags.begin(), flags.end(), true) == 1);
  CHECK(took < 0.6 + 0.15);
}

TEST_CASE("C++ client: an error reply throws with the node's message", "[clients]") {
  fake_node node(
      json{{"error_on", "hello"}, {"error_message", "bad \"token\" \u00e9\n\U0001F600"}});
  try {
    tessera_client::lease lease;
    FAIL("no exception");
  } catch (const tessera_client::lease_error& e) {
    CHECK(std::string(e.what()) == "the node refused 'hello': bad \"token\" \u00e9\n\U0001F600");
  }
}

TEST_CASE("C++ client: an exit reply ends the loop as an expiry", "[clients]") {
  fake_node node(json{{"terms", {{"steps", 10}}}, {"exit_on", "report"}});
  tessera_client::lease lease;
  int steps = 0;
  while (lease.next()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(210));
    ++steps;
  }
  CHECK(steps == 1);
  CHECK(lease.expired());
  std::vector<std::vector<float>> b = {{1.5f}};
  auto r = lease.average(b);  // no copies to average with: the program's own values
  CHECK(b == std::vector<std::vector<float>>{{1.5f}});
  CHECK(r.step == 1);
  CHECK(r.copies == 1);
  lease.complete();                    // nothing to tell a node that said exit
  CHECK(node.messages().size() == 2);  // hello, report
}

TEST_CASE("C++ client: after close() the lease is over, not standalone", "[clients]") {
  fake_node node(json{{"terms", {{"steps", 100}}}});
  tessera_client::lease lease;
  for (int k = 0; k < 3; ++k) REQUIRE(lease.next());
  lease.close();  // reports the 3 steps, the one in progress included
  CHECK_FALSE(lease.standalone());
  CHECK_FALSE(lease.next());
  std::vector<std::vector<float>> b = {{1.0f}};
  CHECK_THROWS_AS(lease.average(b), tessera_client::lease_error);
  CHECK_THROWS_AS(lease.complete(), tessera_client::lease_error);
  CHECK(node.messages("report").back() ==
        json({{"v", 2}, {"op", "report"}, {"steps", 3}, {"final", true}}));
}

TEST_CASE("C++ client: agree makes every process of a copy stop together", "[clients]") {
  fake_node node(json{{"terms", {{"steps", 100}}}});
  int calls = 0;
  tessera_client::lease lease(std::nullopt, [&](std::array<int, 2> f) {
    ++calls;  // another process says "last" at its third step
    return std::array<int, 2>{f[0], calls == 3 ? 1 : f[1]};
  });
  std::vector<bool> flags;
  while (lease.next()) flags.push_back(lease.should_checkpoint());
  CHECK(flags == std::vector<bool>{false, false, true});
  CHECK(calls == 4);
}

TEST_CASE("C++ client: without TESSERA_LEASE everything passes through", "[clients]") {
  ::unsetenv("TESSERA_LEASE");
  tessera_client::lease lease(5);
  CHECK(lease.standalone());
  int steps = 0;
  while (steps < 1000 && lease.next()) {
    CHECK_FALSE(lease.should_checkpoint());
    ++steps;
  }
  CHECK(steps == 1000);
  CHECK(lease.steps_made() == 1000);  // the last step, left by the loop's own condition
  CHECK_FALSE(lease.expired());
  std::vector<std::vector<float>> b = {{1.0f, 2.0f}};
  auto r = lease.average(b);
  CHECK(b == std::vector<std::vector<float>>{{1.0f, 2.0f}});
  CHECK(r.step == 5 + 1000);
  CHECK(r.copies == 1);
  lease.report(1.0);
  lease.complete(1.0);
  CHECK(lease.writer());
}

TEST_CASE("C++ client: the JSON reader refuses what is not valid, the shared buffer is sealed",
          "[clients]") {
  using tessera_client::detail::json_reader;
  auto v = json_reader(R"({"a":[1,-2.5e3,{"b":null}],"s":"x\u0041\t","t":true,"f":false})").parse();
  REQUIRE(v.get("a"));
  CHECK(v.get("a")->items.at(1).num == -2500);
  CHECK(v.get("s")->str == "xA\t");
  CHECK(v.get("t")->b);
  CHECK_FALSE(v.get("f")->b);
  for (const char* bad : {"{", "{\"a\":}", "{\"a\":1,}", "[1 2]", "{\"a\":01x}", "\"\x01\"", "{} x",
                          "{\"a\":\"\\q\"}", "nul"})
    CHECK_THROWS_AS(json_reader(bad).parse(), tessera_client::lease_error);
  // average's buffers go in a sealed memfd: its seals are what the node checks.
  tessera_client::detail::shared_floats shared(3);
  shared.data()[2] = 3.5f;
  const int seals = ::fcntl(shared.fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK(::ftruncate(shared.fd(), 0) != 0);  // sealed: cannot be cut short under the node
  CHECK(shared.data()[2] == 3.5f);
}
