// The lease server (runtime/node/program/lease_server.hpp) over a real Unix socket, driven by a
// plain blocking client: a whole lease's life, framing (lines split across writes, several in
// one write, lines over the cap), every protocol error closing only its own connection, the
// connection limit, and the server's own life (socket mode, stale files, shutdown with work
// in flight). Averages go as a program sends them in protocol version 2: the line together
// with a sealed memfd (sendmsg, SCM_RIGHTS) that the executor reads and writes in place, and
// the descriptors the node refuses. The slot's rules are also checked on their own, without a
// socket.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/node/program/lease_server.hpp"
#include "runtime/node/program/process.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::program;
using namespace tessera::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

/// A program's end of the lease socket: blocking writes, reads with a timeout.
class client {
 public:
  explicit client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  }
  ~client() { close(); }
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Writes all of `s` (false when the node closed the connection).
  bool send(std::string_view s) {
    while (!s.empty()) {
      const auto n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }
  bool send_line(const std::string& s) { return send(s + "\n"); }

  /// Writes `s` + '\n' as a program sends an average: `fds` travel with its first bytes in the
  /// same sendmsg (SCM_RIGHTS); whatever that call did not take goes as plain writes. False
  /// when the node closed the connection.
  bool send_line_with_fds(const std::string& s, const std::vector<int>& fds) {
    const std::string text = s + "\n";
    iovec iov{const_cast<char*>(text.data()), text.size()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(h), fds.data(), sizeof(int) * fds.size());
    const auto n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n <= 0) return false;
    return send(std::string_view(text).substr(static_cast<std::size_t>(n)));
  }
  bool send_line_with_fd(const std::string& s, int fd) { return send_line_with_fds(s, {fd}); }

  /// The next line (without '\n'); none when the node closed first or nothing came in time.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 5s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto nl = buf_.find('\n', pos_); nl != buf_.npos) {
        std::string out = buf_.substr(pos_, nl - pos_);
        pos_ = nl + 1;
        return out;
      }
      if (!fill(until)) return std::nullopt;
    }
  }

  /// The next line as JSON (the test fails when none comes).
  json reply(std::chrono::milliseconds timeout = 5s) {
    auto l = line(timeout);
    REQUIRE(l);
    const json j = json::parse(*l, nullptr, false);
    INFO(*l);
    REQUIRE(j.is_object());
    return j;
  }

  /// True when the node closes the connection within `timeout` (lines before that are dropped).
  bool closed_by_node(std::chrono::milliseconds timeout = 5s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (fill(until)) {
    }
    return eof_;
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  /// Reads what is there, waiting until `until`; false at the end of the stream or the time.
  bool fill(std::chrono::steady_clock::time_point until) {
    if (eof_) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[65536];
    const auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      eof_ = true;  // end of stream, or reset: the node closed it either way
      return false;
    }
    buf_.erase(0, pos_);  // what was handed out already
    pos_ = 0;
    buf_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
  std::size_t pos_ = 0;  ///< where the next line starts in buf_
  bool eof_ = false;
};

/// A program's shared buffer, made as a program makes it: a memfd of `n` float32 values sealed
/// against shrinking and growing (make_sealed_memfd), mapped read-write on the program's side.
/// Sending its descriptor gives the node a copy; the program keeps its own and its mapping.
class program_buffer {
 public:
  explicit program_buffer(std::size_t n) : n_(n) {
    fd_ = make_sealed_memfd(n);
    INFO("make_sealed_memfd: " << std::strerror(errno));
    REQUIRE(fd_ >= 0);
    if (n > 0) {
      void* p = ::mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
      REQUIRE(p != MAP_FAILED);
      data_ = static_cast<float*>(p);
      // A program writes every value before it sends the buffer (the node refuses a sparse
      // one): zeros until a test fills its own.
      std::fill(data_, data_ + n, 0.0f);
    }
  }
  ~program_buffer() {
    if (data_) ::munmap(data_, n_ * sizeof(float));
    ::close(fd_);
  }
  program_buffer(const program_buffer&) = delete;
  program_buffer& operator=(const program_buffer&) = delete;

  int fd() const { return fd_; }
  float* data() { return data_; }
  std::size_t size() const { return n_; }
  /// Writes `v` at the start of the buffer.
  void fill(const std::vector<float>& v) {
    REQUIRE(v.size() <= n_);
    if (!v.empty()) std::memcpy(data_, v.data(), v.size() * sizeof(float));
  }
  /// The buffer's values as the program sees them now.
  std::vector<float> values() const { return std::vector<float>(data_, data_ + n_); }

 private:
  int fd_ = -1;
  float* data_ = nullptr;
  std::size_t n_ = 0;
};

/// The first `n` values of a buffer the node mapped (what the executor reads).
std::vector<float> values_of(const shared_floats& s, std::size_t n) {
  REQUIRE(s.size() >= n);
  return std::vector<float>(s.data(), s.data() + n);
}

/// An average request line for `sizes` (its values go in shared memory).
std::string average_line(const std::vector<std::size_t>& sizes) {
  return R"({"v":2,"op":"average","sizes":)" + json(sizes).dump() + "}";
}

/// A fresh directory with a running server in it.
struct served {
  explicit served(lease_server_options opt = {}) : dir("lease") {
    auto s = lease_server::start(dir.file("lease.sock"), opt);
    INFO((s ? std::string() : s.err().message));
    REQUIRE(s);
    server = std::move(s).value();
  }
  scratch_dir dir;
  std::unique_ptr<lease_server> server;
};

/// A token of 64 hex digits, different for each `n`.
std::string token(int n) {
  std::string t = std::to_string(n);
  return std::string(64 - t.size(), 'a') + t;
}

std::string hello_line(const std::string& tok, int pid = 4242) {
  return R"({"v":2,"op":"hello","token":")" + tok + R"(","pid":)" + std::to_string(pid) + "}";
}

std::string report_line(std::int64_t steps) {
  return R"({"v":2,"op":"report","steps":)" + std::to_string(steps) + "}";
}

/// Job 7, copy 1 of 3, at step 100, 50 steps, no time cap, speed 0.5, the writer.
lease_terms some_terms() { return lease_terms{7, 1, 3, 100, 50, -1, 0.5, true}; }

/// A slot registered under token(n).
std::shared_ptr<lease_slot> registered(lease_server& s, int n,
                                       std::optional<lease_clock::time_point> deadline = {}) {
  auto slot = std::make_shared<lease_slot>(some_terms(), deadline);
  s.add(token(n), slot);
  return slot;
}

/// Waits until `done()` holds (polling); false when `timeout` passes first.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout = 5s) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// Marks a line that goes with a fresh sealed memfd of no values (an average as a program sends
/// it), for expect_refused.
const std::string with_memfd = "WITH_MEMFD ";

/// Sends `lines` on a connection, expects an error reply holding `why` and then the close.
void expect_refused(client& c, const std::vector<std::string>& lines, const std::string& why) {
  for (const auto& l : lines) {
    if (l.rfind(with_memfd, 0) == 0) {
      program_buffer none(0);
      c.send_line_with_fd(l.substr(with_memfd.size()), none.fd());
    } else {
      c.send_line(l);
    }
  }
  json j;
  do {
    j = c.reply();
  } while (j.at("op") != "error");
  INFO(j.dump());
  CHECK(has(j.at("message").get<std::string>(), why));
  CHECK(c.closed_by_node());
}

}  // namespace

TEST_CASE("lease server: a lease's whole life over the socket", "[lease][server]") {
  served s;
  auto slot = registered(*s.server, 1, lease_clock::now() + 10s);
  client c(s.server->path());

  REQUIRE(c.send_line(R"({"v":2,"op":"hello","token":")" + token(1) + R"(","pid":99,"step":80})"));
  json lease = c.reply();
  CHECK(lease.at("op") == "lease");
  CHECK(lease.at("job") == 7);
  CHECK(lease.at("copy") == 1);
  CHECK(lease.at("copies") == 3);
  CHECK(lease.at("step") == 100);
  CHECK(lease.at("steps") == 50);
  CHECK(lease.at("speed") == 0.5);
  CHECK(lease.at("writer") == true);
  const double first = lease.at("seconds");
  CHECK(first > 8.0);  // the hello came within 2 s of the slot (a loaded host is slow)
  CHECK(first <= 10.0);
  auto v = slot->view();
  CHECK(v.said_hello);
  CHECK(v.pid == 99);
  CHECK(v.own_step == 80);

  // The lease's time counts down; a report updates what the executor sees.
  std::this_thread::sleep_for(300ms);
  REQUIRE(c.send_line(R"({"v":2,"op":"report","steps":5,"loss":0.5})"));
  lease = c.reply();
  CHECK(lease.at("seconds").get<double>() <= first - 0.3);
  CHECK(lease.at("steps") == 50);
  v = slot->view();
  CHECK(v.steps == 5);
  CHECK(v.loss == 0.5);
  CHECK(v.messages == 2);
  CHECK(v.last_contact > v.hello_at);
  CHECK_FALSE(v.final_report);

  // stop(): the next lease grants no more steps than made and no time.
  slot->stop();
  REQUIRE(c.send_line(R"({"v":2,"op":"report","steps":8,"final":true})"));
  lease = c.reply();
  CHECK(lease.at("steps") == 8);
  CHECK(lease.at("seconds") == 0.0);
  CHECK(slot->view().final_report);
  CHECK(slot->terms_now().steps == 8);

  // average: the values go in a sealed memfd sent with the line; no reply until the executor
  // answers; the executor reads the program's values and writes the mean in place, bit for bit.
  program_buffer buf(5);
  const std::vector<float> mine = {1.5f, -0.0f, 3.25f, 1e-42f, 7.0f};
  buf.fill(mine);
  REQUIRE(c.send_line_with_fd(average_line({2, 3}), buf.fd()));
  CHECK_FALSE(c.line(300ms));
  REQUIRE(eventually([&] { return slot->view().average_waiting; }));
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  REQUIRE(slot->take_average(sizes, shared));
  CHECK(sizes == std::vector<std::size_t>{2, 3});
  REQUIRE(shared);
  CHECK(shared->size() == 5);
  CHECK(same_bits(values_of(*shared, 5), mine));
  CHECK_FALSE(slot->take_average(sizes, shared));  // taken once
  const std::vector<float> mean = {0.25f, std::nanf("7"), -1e30f, 5e-45f, 2.0f};
  std::memcpy(shared->data(), mean.data(), mean.size() * sizeof(float));
  slot->answer_average({2, 3}, 3, 321);
  json avg = c.reply();
  CHECK(avg.at("v") == 2);
  CHECK(avg.at("op") == "averaged");
  CHECK(avg.at("copies") == 3);
  CHECK(avg.at("step") == 321);
  CHECK(avg.at("sizes") == json::array({2, 3}));
  CHECK_FALSE(avg.contains("data"));
  CHECK(same_bits(buf.values(), mean));  // the mean is in the program's own mapping
  CHECK_FALSE(slot->view().average_waiting);
  shared.reset();  // the node lets go of its mapping; the program's stays
  CHECK(same_bits(buf.values(), mean));

  // complete -> exit; the program's close is a close without a protocol error.
  REQUIRE(c.send_line(R"({"v":2,"op":"complete","steps":9,"accuracy":0.9})"));
  CHECK(c.reply().at("op") == "exit");
  v = slot->view();
  CHECK(v.complete);
  CHECK(v.accuracy == 0.9);
  CHECK(v.steps == 9);
  c.close();
  REQUIRE(eventually([&] { return slot->view().closed; }));
  CHECK(slot->view().protocol_error.empty());
  CHECK(s.server->accepted() == 1);
}

TEST_CASE("lease server: lines split across writes and several lines in one write",
          "[lease][server]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  const std::string hello = hello_line(token(1)) + "\n";
  // The hello in three pieces with pauses, the '\n' alone in the last one.
  REQUIRE(c.send(hello.substr(0, 10)));
  std::this_thread::sleep_for(50ms);
  REQUIRE(c.send(hello.substr(10, hello.size() - 11)));
  CHECK_FALSE(c.line(100ms));  // nothing is answered before the line ends
  REQUIRE(c.send("\n"));
  CHECK(c.reply().at("op") == "lease");

  // Three reports in one write, and the start of a fourth that ends in a later write.
  REQUIRE(c.send(report_line(1) + "\n" + report_line(2) + "\n" + report_line(3) + "\n" +
                 R"({"v":2,"op":"rep)"));
  for (int i = 0; i < 3; ++i) CHECK(c.reply().at("op") == "lease");
  CHECK_FALSE(c.line(100ms));
  REQUIRE(eventually([&] { return slot->view().steps == 3; }));
  REQUIRE(c.send(R"(ort","steps":4})"
                 "\n"));
  CHECK(c.reply().at("op") == "lease");
  CHECK(slot->view().steps == 4);
  CHECK(slot->view().messages == 5);

  // One byte at a time.
  for (const char ch : report_line(6) + "\n") REQUIRE(c.send(std::string(1, ch)));
  CHECK(c.reply().at("op") == "lease");
  CHECK(slot->view().steps == 6);
}

TEST_CASE("lease server: a line over the cap closes its connection only", "[lease][server]") {
  lease_server_options opt;
  opt.max_line = 1024;
  served s(opt);
  auto big = registered(*s.server, 1);
  auto other = registered(*s.server, 2);
  client c(s.server->path()), d(s.server->path());
  REQUIRE(c.send_line(hello_line(token(1))));
  REQUIRE(d.send_line(hello_line(token(2))));
  CHECK(c.reply().at("op") == "lease");
  CHECK(d.reply().at("op") == "lease");

  // A line of exactly the cap passes (spaces are JSON whitespace).
  std::string exact = report_line(1);
  exact.insert(exact.size() - 1, 1024 - exact.size(), ' ');
  REQUIRE(exact.size() == 1024);
  REQUIRE(c.send_line(exact));
  CHECK(c.reply().at("op") == "lease");

  // One byte more, never ended: the error comes without waiting for the end of the line.
  REQUIRE(c.send(std::string(1025, ' ')));
  json e = c.reply();
  CHECK(e.at("op") == "error");
  CHECK(has(e.at("message").get<std::string>(), "a line longer than 1024 bytes"));
  CHECK(c.closed_by_node());
  REQUIRE(eventually([&] { return big->view().closed; }));
  CHECK(has(big->view().protocol_error, "a line longer than 1024 bytes"));

  // The other program goes on, and new connections are served.
  REQUIRE(d.send_line(report_line(3)));
  CHECK(d.reply().at("op") == "lease");
  CHECK(other->view().steps == 3);
  CHECK_FALSE(other->view().closed);
  registered(*s.server, 3);
  client f(s.server->path());
  REQUIRE(f.send_line(hello_line(token(3))));
  CHECK(f.reply().at("op") == "lease");
}

TEST_CASE("lease server: a long line split in many writes is held to the cap", "[lease][server]") {
  lease_server_options opt;
  opt.max_line = 100000;
  served s(opt);
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  REQUIRE(c.send_line(hello_line(token(1))));
  CHECK(c.reply().at("op") == "lease");
  // 50 writes of 4 KiB: the error comes once 100000 bytes are passed, while more is sent.
  bool refused = false;
  for (int i = 0; i < 50 && !refused; ++i) {
    if (!c.send(std::string(4096, 'x'))) break;
    if (auto l = c.line(20ms)) refused = has(*l, "a line longer than 100000 bytes");
  }
  if (!refused) refused = has(c.line().value_or(""), "a line longer than 100000 bytes");
  CHECK(refused);
  REQUIRE(eventually([&] { return slot->view().closed; }));
  CHECK(has(slot->view().protocol_error, "longer than 100000"));
}

TEST_CASE("lease server: a version the node does not speak is named with its own",
          "[lease][server]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  // A version 1 program (the node speaks 2) is told both versions.
  expect_refused(c, {R"({"v":1,"op":"hello","token":")" + token(1) + R"(","pid":5})"},
                 "protocol version 1 is not spoken here (this node speaks 2)");
  // The refused hello named a registered token: its slot knows why at once, and the token
  // cannot be used again.
  REQUIRE(eventually([&] { return slot->view().closed; }));
  CHECK(has(slot->view().protocol_error,
            "protocol version 1 is not spoken here (this node speaks 2)"));
  CHECK_FALSE(slot->view().said_hello);
  client again(s.server->path());
  expect_refused(again, {hello_line(token(1))}, "was used already");
}

TEST_CASE("lease server: garbage and messages out of order close the connection",
          "[lease][server]") {
  served s;
  struct bad_case {
    const char* name;
    bool hello_first;  ///< say a valid hello first (the slot then records it)
    std::vector<std::string> lines;
    std::string why;
  };
  const std::vector<bad_case> cases = {
      {"not JSON", false, {"hello there"}, "not a line of JSON"},
      {"not JSON after hello", true, {"{\"v\":2,"}, "not a line of JSON"},
      {"unknown op", true, {R"({"v":2,"op":"dance"})"}, "unknown op 'dance'"},
      {"wrong type",
       true,
       {R"({"v":2,"op":"report","steps":"many"})"},
       "'report': field 'steps' must be an integer"},
      {"version after hello",
       true,
       {R"({"v":3,"op":"report","steps":1})"},
       "protocol version 3 is not spoken here (this node speaks 2)"},
      {"version 1 after hello",
       true,
       {R"({"v":1,"op":"report","steps":1})"},
       "protocol version 1 is not spoken here (this node speaks 2)"},
      {"version 1's average, data in the line",
       true,
       {R"({"v":2,"op":"average","sizes":[1],"data":"AACAPw=="})"},
       "'average': field 'data' is lease protocol version 1's"},
      {"report before hello",
       false,
       {report_line(1)},
       "the first message must be 'hello', got 'report'"},
      {"unknown token",
       false,
       {hello_line(std::string(64, 'f'))},
       "not a token this node gave out"},
      {"hello twice", true, {"HELLO"}, "'hello' sent twice on one connection"},
      {"steps going down",
       true,
       {report_line(5), report_line(4)},
       "field 'steps' went down from 5 to 4"},
      {"average twice",
       true,
       {with_memfd + average_line({}), with_memfd + average_line({})},
       "'average' sent again before the node answered the first"},
      {"after complete",
       true,
       {R"({"v":2,"op":"complete","steps":1})", report_line(1)},
       "'report' after 'complete'"},
  };
  int n = 100;
  for (const auto& bc : cases) {
    SECTION(bc.name) {
      auto slot = registered(*s.server, ++n);
      client c(s.server->path());
      if (bc.hello_first) {
        REQUIRE(c.send_line(hello_line(token(n))));
        CHECK(c.reply().at("op") == "lease");
      }
      std::vector<std::string> lines = bc.lines;
      for (auto& l : lines)
        if (l == "HELLO") l = hello_line(token(n));
      expect_refused(c, lines, bc.why);
      if (bc.hello_first) {
        REQUIRE(eventually([&] { return slot->view().closed; }));
        CHECK(has(slot->view().protocol_error, bc.why));
      } else {
        CHECK(slot->view().protocol_error.empty());  // another process's slot: untouched
      }
    }
  }
}

TEST_CASE("lease server: a token is used once", "[lease][server]") {
  served s;
  auto slot = registered(*s.server, 1);
  client first(s.server->path());
  REQUIRE(first.send_line(hello_line(token(1))));
  CHECK(first.reply().at("op") == "lease");
  client second(s.server->path());
  expect_refused(second, {hello_line(token(1))}, "was used already (one connection per process)");
  // The first connection is not disturbed, nor is its slot.
  REQUIRE(first.send_line(report_line(2)));
  CHECK(first.reply().at("op") == "lease");
  CHECK(slot->view().protocol_error.empty());
  CHECK_FALSE(slot->view().closed);
}

TEST_CASE("lease server: connections over the limit are refused at once", "[lease][server]") {
  lease_server_options opt;
  opt.max_connections = 2;
  served s(opt);
  registered(*s.server, 1);
  registered(*s.server, 2);
  registered(*s.server, 3);
  auto a = std::make_unique<client>(s.server->path());
  client b(s.server->path());
  REQUIRE(a->send_line(hello_line(token(1))));
  CHECK(a->reply().at("op") == "lease");
  REQUIRE(eventually([&] { return s.server->accepted() == 2; }));
  client third(s.server->path());
  json e = third.reply();
  CHECK(e.at("op") == "error");
  CHECK(has(e.at("message").get<std::string>(), "too many connections"));
  CHECK(third.closed_by_node());
  CHECK(s.server->refused() == 1);
  // The two admitted connections still work; once one closes, a new one is served.
  REQUIRE(b.send_line(hello_line(token(2))));
  CHECK(b.reply().at("op") == "lease");
  a.reset();
  bool served_again = false;
  for (int tries = 0; tries < 100 && !served_again; ++tries) {
    client next(s.server->path());
    next.send_line(hello_line(token(3)));
    auto l = next.line(1s);
    served_again = l && has(*l, "\"lease\"");
    if (!served_again) std::this_thread::sleep_for(20ms);
  }
  CHECK(served_again);
}

TEST_CASE("lease server: no hello within the deadline closes, and idle connections cannot fill it",
          "[lease][server][bounds]") {
  // Before: a connection could wait for ever without a hello, so a process holding 256 of
  // them made the node refuse every program.
  lease_server_options opt;
  opt.hello_timeout = 200ms;
  opt.max_waiting_hello = 3;
  opt.max_connections = 8;
  served s(opt);
  registered(*s.server, 1);
  {
    client silent(s.server->path());
    json e = silent.reply();
    CHECK(e.at("op") == "error");
    CHECK(has(e.at("message").get<std::string>(), "no 'hello' within 200 ms"));
    CHECK(silent.closed_by_node());
  }
  std::vector<std::unique_ptr<client>> held;
  for (int i = 0; i < 8; ++i) held.push_back(std::make_unique<client>(s.server->path()));
  REQUIRE(eventually([&] { return s.server->accepted() == 1 + 8; }));
  client program(s.server->path());
  REQUIRE(program.send_line(hello_line(token(1))));
  CHECK(program.reply().at("op") == "lease");
  CHECK(s.server->refused() == 0);
  // The oldest idle ones were told why and closed.
  json e = held.front()->reply();
  CHECK(has(e.at("message").get<std::string>(), "connections waited for their hello"));
  CHECK(held.front()->closed_by_node());
}

TEST_CASE("lease server: a token works only for the process it was made for and its own",
          "[lease][server][bounds]") {
  // Before: any process of the user that read a program's TESSERA_LEASE_TOKEN (from
  // /proc/PID/environ) could say hello with it and report for that job.
  served s;
  auto slot = registered(*s.server, 1);
  slot->bind_to_mark("00112233aabbccdd");
  // This test process does not carry the mark.
  {
    client thief(s.server->path());
    REQUIRE(thief.send_line(hello_line(token(1))));
    json e = thief.reply();
    CHECK(e.at("op") == "error");
    CHECK(has(e.at("message").get<std::string>(), "was given to another process than this one"));
  }
  // A process started with the mark (and what it starts) may.
  process_spec spec;
  spec.mark = "00112233aabbccdd";
  const std::string script =
      "import socket,sys\n"
      "s=socket.socket(socket.AF_UNIX)\n"
      "s.connect(sys.argv[1])\n"
      "s.sendall(sys.argv[2].encode()+b'\\n')\n"
      "print(s.makefile().readline().strip())\n";
  spec.argv = {
      "/bin/sh",           "-c", "python3 -c \"$0\" \"$1\" \"$2\"", script, s.server->path(),
      hello_line(token(1))};
  auto p = child_process::start(spec);
  REQUIRE(p);
  std::ostringstream out, err;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (p->poll(20, out, err) && std::chrono::steady_clock::now() < until) {
  }
  INFO(err.str());
  CHECK(has(out.str(), "\"op\":\"lease\""));
}

TEST_CASE("lease server: a program that writes without reading is paced, nothing is lost",
          "[lease][server]") {
  served s;
  lease_terms uncapped = some_terms();
  uncapped.steps = -1;  // every report counts (a lease's step cap would stop at 50)
  auto slot = std::make_shared<lease_slot>(uncapped);
  s.server->add(token(1), slot);
  client c(s.server->path());
  REQUIRE(c.send_line(hello_line(token(1))));
  CHECK(c.reply().at("op") == "lease");
  // About 9 MB of replies: more than the node queues, so it stops reading until the program
  // reads (the writer blocks on a full socket meanwhile).
  constexpr int n = 80000;
  std::thread writer([&] {
    std::string all;
    for (int i = 1; i <= n; ++i) all += report_line(i) + "\n";
    c.send(all);
  });
  std::this_thread::sleep_for(300ms);
  int replies = 0;
  while (replies < n) {
    auto l = c.line();
    if (!l || !has(*l, "\"lease\"")) break;
    ++replies;
  }
  writer.join();
  CHECK(replies == n);
  CHECK(slot->view().steps == n);
  CHECK(slot->view().protocol_error.empty());
}

TEST_CASE("lease server: remove() closes a connection, and answers to a gone one are no-ops",
          "[lease][server]") {
  served s;
  auto slot = registered(*s.server, 1);
  auto waiting = registered(*s.server, 2);
  client c(s.server->path()), d(s.server->path());
  REQUIRE(c.send_line(hello_line(token(1))));
  CHECK(c.reply().at("op") == "lease");
  s.server->remove(token(1));
  CHECK(c.closed_by_node());
  REQUIRE(eventually([&] { return slot->view().closed; }));
  CHECK(slot->view().protocol_error.empty());

  REQUIRE(d.send_line(hello_line(token(2))));
  CHECK(d.reply().at("op") == "lease");
  program_buffer buf(1);
  buf.fill({1.0f});
  REQUIRE(d.send_line_with_fd(average_line({1}), buf.fd()));
  REQUIRE(eventually([&] { return waiting->view().average_waiting; }));
  d.close();
  REQUIRE(eventually([&] { return waiting->view().closed; }));
  // The buffer outlives the connection (a collective may still run on it) and is still shared.
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  REQUIRE(waiting->take_average(sizes, shared));
  REQUIRE(shared);
  shared->data()[0] = 2.0f;
  waiting->answer_average({1}, 1, 1);  // nobody to answer: nothing happens
  CHECK_FALSE(waiting->view().average_waiting);
  CHECK(buf.values() == std::vector<float>{2.0f});
}

TEST_CASE("lease server: shutdown with work in flight, then the slots outlive it",
          "[lease][server]") {
  std::shared_ptr<lease_slot> slot;
  std::string path;
  {
    served s;
    path = s.server->path();
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    slot = registered(*s.server, 1);
    client c(path);
    REQUIRE(c.send_line(hello_line(token(1))));
    CHECK(c.reply().at("op") == "lease");
    program_buffer buf(1);
    REQUIRE(c.send_line_with_fd(average_line({1}), buf.fd()));
    REQUIRE(eventually([&] { return slot->view().average_waiting; }));
    client idle(path);  // a connection that never says hello
    // An answer racing the shutdown: either it is sent or it is dropped, never a crash.
    std::thread answer([&] { slot->answer_average({1}, 2, 5); });
    s.server.reset();
    answer.join();
    CHECK(idle.closed_by_node());
    CHECK(::access(path.c_str(), F_OK) != 0);  // the socket file is gone
  }
  CHECK(slot->view().closed);
  slot->answer_average({1}, 2, 5);   // the server is gone: a no-op
  slot->refuse_average("too late");  // so is this
  CHECK_FALSE(has(slot->view().protocol_error, "too late"));
}

/// A connection that said hello under token(n) and got its lease.
void say_hello(client& c, int n) {
  REQUIRE(c.send_line(hello_line(token(n))));
  CHECK(c.reply().at("op") == "lease");
}

/// Expects the connection to get an error line holding every one of `parts`, then the close,
/// and the slot to record the same reason with no average left waiting; returns the message.
std::string expect_average_refused(client& c, lease_slot& slot,
                                   const std::vector<std::string>& parts) {
  const json e = c.reply();
  INFO(e.dump());
  CHECK(e.at("op") == "error");
  const std::string m = e.value("message", "");
  for (const auto& p : parts) CHECK(has(m, p));
  CHECK(c.closed_by_node());
  REQUIRE(eventually([&] { return slot.view().closed; }));
  CHECK(slot.view().protocol_error == m);
  CHECK_FALSE(slot.view().average_waiting);
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  CHECK_FALSE(slot.take_average(sizes, shared));
  return m;
}

TEST_CASE("lease server: an average's values go both ways through the program's memfd",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);

  // The program fills its buffer and sends the line with the memfd.
  const std::vector<std::size_t> sizes_sent = {3, 0, 4};
  program_buffer buf(7);
  const std::vector<float> mine = {1.0f, -2.5f, 3.0f, 0.125f, -0.0f, 6e-40f, 1e38f};
  buf.fill(mine);
  REQUIRE(c.send_line_with_fd(average_line(sizes_sent), buf.fd()));
  REQUIRE(eventually([&] { return slot->view().average_waiting; }));
  CHECK_FALSE(c.line(100ms));  // nothing before the executor answers

  // The executor sees the program's values in take_average's buffer, and writes the mean there.
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  REQUIRE(slot->take_average(sizes, shared));
  CHECK(sizes == sizes_sent);
  REQUIRE(shared);
  REQUIRE(shared->size() == 7);
  CHECK(same_bits(values_of(*shared, 7), mine));
  const std::vector<float> mean = {0.5f, 0.25f, -8.0f, 1e-45f, 42.0f, -1.0f, 3.5f};
  std::memcpy(shared->data(), mean.data(), mean.size() * sizeof(float));
  slot->answer_average(sizes, 2, 640);

  // The program reads the averaged line and finds the mean in its own mapping.
  const json avg = c.reply();
  CHECK(avg.at("op") == "averaged");
  CHECK(avg.at("sizes") == json::array({3, 0, 4}));
  CHECK(avg.at("copies") == 2);
  CHECK(avg.at("step") == 640);
  CHECK_FALSE(avg.contains("data"));
  CHECK(same_bits(buf.values(), mean));

  // A second average reuses the same memfd (sent again: the node's earlier copy is its own),
  // naming fewer values than it holds; the first buffer is let go first.
  shared.reset();
  buf.fill({9.0f, 8.0f});
  REQUIRE(c.send_line_with_fd(average_line({2}), buf.fd()));
  REQUIRE(eventually([&] { return slot->view().average_waiting; }));
  REQUIRE(slot->take_average(sizes, shared));
  CHECK(sizes == std::vector<std::size_t>{2});
  REQUIRE(shared);
  CHECK(shared->size() == 2);
  CHECK(values_of(*shared, 2) == std::vector<float>{9.0f, 8.0f});
  shared->data()[0] = 4.0f;
  shared->data()[1] = 5.0f;
  slot->answer_average(sizes, 2, 641);
  CHECK(c.reply().at("step") == 641);
  const auto after = buf.values();
  CHECK(after[0] == 4.0f);
  CHECK(after[1] == 5.0f);
  CHECK(after[2] == mean[2]);  // past the named values nothing changed

  // The connection goes on as before.
  REQUIRE(c.send_line(report_line(3)));
  CHECK(c.reply().at("op") == "lease");
  CHECK(slot->view().protocol_error.empty());
}

TEST_CASE("lease server: an 'average' line without its memfd fails the connection",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  auto other = registered(*s.server, 2);
  client c(s.server->path()), d(s.server->path());
  say_hello(c, 1);
  say_hello(d, 2);
  REQUIRE(c.send_line(average_line({2, 3})));
  expect_average_refused(
      c, *slot, {"'average' of 5 float32 values came without its buffers", "memfd", "SCM_RIGHTS"});
  // Only that connection: the other program averages as it should.
  program_buffer buf(1);
  REQUIRE(d.send_line_with_fd(average_line({1}), buf.fd()));
  REQUIRE(eventually([&] { return other->view().average_waiting; }));
  CHECK(other->view().protocol_error.empty());
}

TEST_CASE("lease server: a descriptor not sealed against shrinking is refused",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);
  int fd = -1;
  std::vector<std::string> why;
  SECTION("a memfd made without MFD_ALLOW_SEALING") {
    fd = ::memfd_create("unsealed", MFD_CLOEXEC);
    why = {"not sealed against shrinking", "F_SEAL_SHRINK", "pid 4242"};
  }
  SECTION("a sealable memfd sealed against growing only") {
    fd = ::memfd_create("grow-only", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 64) == 0);
    REQUIRE(::fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) == 0);
    why = {"not sealed against shrinking", "F_SEAL_SHRINK"};
  }
  SECTION("a pipe") {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    ::close(p[0]);
    fd = p[1];
    why = {"not a sealable memfd", "MFD_ALLOW_SEALING"};
  }
  REQUIRE(fd >= 0);
  if (::lseek(fd, 0, SEEK_END) == 0) REQUIRE(::ftruncate(fd, 64) == 0);
  REQUIRE(c.send_line_with_fd(average_line({4, 4}), fd));
  ::close(fd);
  expect_average_refused(c, *slot, why);
}

TEST_CASE("lease server: a memfd smaller than the sizes announce is refused naming both",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);
  program_buffer small(4);  // 16 bytes for 2 + 3 values (20 bytes)
  REQUIRE(c.send_line_with_fd(average_line({2, 3}), small.fd()));
  expect_average_refused(
      c, *slot, {"holds 16 bytes", "its sizes announce 5 float32 values (20 bytes)", "pid 4242"});
}

TEST_CASE("lease server: refuse_average sends an error line and closes the connection",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);
  program_buffer buf(3);
  buf.fill({1.0f, 2.0f, 3.0f});
  REQUIRE(c.send_line_with_fd(average_line({3}), buf.fd()));
  REQUIRE(eventually([&] { return slot->view().average_waiting; }));
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  REQUIRE(slot->take_average(sizes, shared));
  slot->refuse_average("the copies of job 7 announced different sizes: [3] and [4]");
  slot->answer_average(sizes, 2, 1);  // refused already: no averaged line follows
  const json e = c.reply();
  CHECK(e.at("op") == "error");
  CHECK(e.at("message") == "the copies of job 7 announced different sizes: [3] and [4]");
  CHECK_FALSE(c.line(200ms));
  CHECK(c.closed_by_node());
  REQUIRE(eventually([&] { return slot->view().closed; }));
  CHECK(slot->view().protocol_error ==
        "the copies of job 7 announced different sizes: [3] and [4]");
  CHECK_FALSE(slot->view().average_waiting);
  CHECK(buf.values() == std::vector<float>{1.0f, 2.0f, 3.0f});  // nothing was written
}

TEST_CASE("lease server: 16M floats (64 MB) average through the socket",
          "[lease][server][shared][big]") {
  // Version 1 put these in the line as base64 (~90 MB, over the line cap: "Broken pipe").
  constexpr std::size_t n = std::size_t{16} << 20;
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);
  program_buffer buf(n);
  for (std::size_t i = 0; i < n; ++i) buf.data()[i] = static_cast<float>(i);
  const std::vector<std::size_t> sizes_sent = {n - 1000, 1000};
  const std::string line = average_line(sizes_sent);
  CHECK(line.size() < 100);  // the line carries only the sizes
  REQUIRE(c.send_line_with_fd(line, buf.fd()));
  REQUIRE(eventually([&] { return slot->view().average_waiting; }, 10s));
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  REQUIRE(slot->take_average(sizes, shared));
  CHECK(sizes == sizes_sent);
  REQUIRE(shared);
  REQUIRE(shared->size() == n);
  const std::size_t at[] = {0, 1, 4095, 4096, n / 2 + 7, n - 1001, n - 1000, n - 1};
  for (const auto i : at) {
    INFO("node, value " << i);
    CHECK(shared->data()[i] == static_cast<float>(i));
  }
  float* d = shared->data();
  for (std::size_t i = 0; i < n; ++i) d[i] = -0.5f * static_cast<float>(i);
  slot->answer_average(sizes, 4, 12);
  const json avg = c.reply(10s);
  CHECK(avg.at("op") == "averaged");
  CHECK(avg.at("sizes") == json(sizes_sent));
  CHECK(avg.at("copies") == 4);
  for (const auto i : at) {
    INFO("program, value " << i);
    CHECK(buf.data()[i] == -0.5f * static_cast<float>(i));
  }
  REQUIRE(c.send_line(report_line(1)));
  CHECK(c.reply().at("op") == "lease");
  CHECK(slot->view().protocol_error.empty());
}

TEST_CASE("lease server: descriptors beyond what averages can use fail the connection",
          "[lease][server][shared]") {
  served s;
  auto slot = registered(*s.server, 1);
  client c(s.server->path());
  say_hello(c, 1);
  std::vector<std::unique_ptr<program_buffer>> bufs;
  std::vector<int> fds;
  std::string why;
  SECTION("three waiting (at most two)") {
    for (int i = 0; i < 3; ++i) bufs.push_back(std::make_unique<program_buffer>(1));
    why = "3 descriptors are waiting for an 'average' each";
  }
  SECTION("more in one message than the node takes") {
    for (int i = 0; i < 6; ++i) bufs.push_back(std::make_unique<program_buffer>(1));
    why = "more descriptors came with one message than the node takes";
  }
  for (const auto& b : bufs) fds.push_back(b->fd());
  REQUIRE(c.send_line_with_fds(average_line({1}), fds));
  expect_average_refused(c, *slot, {why});
}

TEST_CASE("lease server: start refuses bad paths and replaces a stale socket file",
          "[lease][server]") {
  scratch_dir dir("lease_start");
  auto too_long = lease_server::start(dir.file(std::string(120, 'x')));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.err().kind == error_kind::invalid_input);
  CHECK(has(too_long.err().message, "a Unix socket path has 1 to 107 bytes"));

  auto no_dir = lease_server::start(dir.file("missing/lease.sock"));
  REQUIRE_FALSE(no_dir);
  CHECK(no_dir.err().kind == error_kind::io);
  CHECK(has(no_dir.err().message, dir.file("missing/lease.sock")));
  CHECK(has(no_dir.err().message, "cannot bind"));

  // A regular file at the path is left alone.
  const auto file = dir.write("plain", "data");
  auto on_file = lease_server::start(file);
  REQUIRE_FALSE(on_file);
  CHECK(file_contents(file) == "data");

  // A socket file nobody serves (its process died) is replaced; a served one is not.
  const auto path = dir.file("lease.sock");
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    ::close(fd);  // the file stays
  }
  auto s = lease_server::start(path);
  INFO((s ? std::string() : s.err().message));
  REQUIRE(s);
  auto twice = lease_server::start(path);
  REQUIRE_FALSE(twice);
  CHECK(has(twice.err().message, path));
  auto slot = registered(**s, 1);
  client c(path);
  REQUIRE(c.send_line(hello_line(token(1))));
  CHECK(c.reply().at("op") == "lease");
}

TEST_CASE("lease slot: terms, stop, averages and closing without a socket", "[lease][slot]") {
  lease_terms t = some_terms();
  t.seconds = 999;  // ignored: the deadline decides
  lease_slot endless(t);
  CHECK(endless.terms_now().seconds == -1.0);
  CHECK(endless.terms_now().steps == 50);

  lease_slot timed(t, lease_clock::now() + 2s);
  const double a = timed.terms_now().seconds;
  std::this_thread::sleep_for(50ms);
  const double b = timed.terms_now().seconds;
  CHECK(a <= 2.0);
  CHECK(b < a);
  lease_slot past(t, lease_clock::now() - 1s);
  CHECK(past.terms_now().seconds == 0.0);  // never negative: -1 means "no cap"

  // A hello after the round's end still gets min_after_hello seconds (a program whose start
  // outlasted the round trains); an early hello keeps the round's end.
  lease_request hello;
  hello.op = request_op::hello;
  hello.pid = 7;
  lease_slot late(t, lease_clock::now() - 1s, 0.5);
  CHECK(late.terms_now().seconds == 0.0);
  late.on_request(hello);
  const double late_s = late.terms_now().seconds;
  CHECK(late_s > 0.3);
  CHECK(late_s <= 0.5);
  REQUIRE(late.view().lease_end);
  CHECK(*late.view().lease_end > lease_clock::now());
  lease_slot early(t, lease_clock::now() + 2s, 0.5);
  early.on_request(hello);
  CHECK(early.terms_now().seconds > 1.5);
  lease_slot no_min(t, lease_clock::now() - 1s);
  no_min.on_request(hello);
  CHECK(no_min.terms_now().seconds == 0.0);

  // stop(): no more steps than made; an uncapped lease is capped at what was made.
  lease_request r;
  r.op = request_op::report;
  r.steps = 70;
  endless.on_request(r);
  endless.stop();
  CHECK(endless.terms_now().steps == 50);  // made more than granted: the grant stands
  CHECK(endless.terms_now().seconds == 0.0);
  t.steps = -1;
  lease_slot uncapped(t);
  r.steps = 12;
  uncapped.on_request(r);
  CHECK(uncapped.terms_now().steps == -1);
  uncapped.stop();
  CHECK(uncapped.terms_now().steps == 12);

  // An answer with nothing waiting sends nothing; the first close reason is kept.
  std::vector<std::string> sent, refused;
  uncapped.set_sender([&](std::string l) { sent.push_back(std::move(l)); },
                      [&](std::string why) { refused.push_back(std::move(why)); });
  uncapped.answer_average({1}, 1, 0);
  uncapped.refuse_average("nothing waits");
  CHECK(sent.empty());
  CHECK(refused.empty());
  program_buffer buf(1);
  buf.fill({4.0f});
  auto mapped = shared_floats::map(::dup(buf.fd()), 1, "test");
  REQUIRE(mapped);
  lease_request avg;
  avg.op = request_op::average;
  avg.sizes = {1};
  CHECK(uncapped.on_request(avg, *mapped).empty());
  CHECK(uncapped.view().average_waiting);
  uncapped.answer_average({1}, 2, 9);
  uncapped.answer_average({1}, 2, 9);  // answered already
  uncapped.refuse_average("answered already");
  REQUIRE(sent.size() == 1);
  CHECK(sent[0] == format_averaged({1}, 2, 9));
  CHECK(refused.empty());
  CHECK_FALSE(uncapped.view().average_waiting);
  uncapped.on_closed("first reason");
  uncapped.on_closed("second reason");
  CHECK(uncapped.view().protocol_error == "first reason");
  std::vector<std::size_t> sizes;
  std::shared_ptr<shared_floats> shared;
  CHECK(uncapped.take_average(sizes, shared));  // the buffer stays for the executor
  CHECK(sizes == std::vector<std::size_t>{1});
  REQUIRE(shared);
  CHECK(shared.get() == mapped->get());
  CHECK(shared->data()[0] == 4.0f);

  // refuse_average: the refusal goes once, by the refusing way, and nothing is answered after.
  lease_slot refusing(t);
  sent.clear();
  refusing.set_sender([&](std::string l) { sent.push_back(std::move(l)); },
                      [&](std::string why) { refused.push_back(std::move(why)); });
  CHECK(refusing.on_request(avg).empty());  // no buffer: take_average hands out none
  refusing.refuse_average("the copies disagree on sizes");
  refusing.refuse_average("twice");
  refusing.answer_average({1}, 1, 0);
  CHECK(refused == std::vector<std::string>{"the copies disagree on sizes"});
  CHECK(sent.empty());
  CHECK_FALSE(refusing.view().average_waiting);
  CHECK(refusing.take_average(sizes, shared));
  CHECK_FALSE(shared);
  // A closed connection clears both ways.
  lease_slot gone(t);
  gone.set_sender([&](std::string l) { sent.push_back(std::move(l)); },
                  [&](std::string why) { refused.push_back(std::move(why)); });
  gone.on_request(avg);
  gone.on_closed("");
  gone.refuse_average("after the close");
  CHECK(refused.size() == 1);
}

TEST_CASE("lease slot: reported steps are capped by the lease", "[lease][slot][bounds]") {
  // Before: a program could report any number of steps and the job advanced by them.
  lease_slot slot(some_terms());  // 50 steps
  lease_request hello;
  hello.op = request_op::hello;
  hello.pid = 7;
  slot.on_request(hello);
  lease_request report;
  report.op = request_op::report;
  report.steps = 30;
  slot.on_request(report);
  CHECK(slot.view().steps == 30);
  report.steps = 1000000;
  slot.on_request(report);
  CHECK(slot.view().steps == 50);
  lease_terms open = some_terms();
  open.steps = -1;  // no step cap: the program's word
  lease_slot uncapped(open);
  uncapped.on_request(hello);
  uncapped.on_request(report);
  CHECK(uncapped.view().steps == 1000000);
}

TEST_CASE("lease order rules", "[lease][slot]") {
  program_view v;
  v.said_hello = true;
  v.steps = 10;
  lease_request r;
  r.op = request_op::report;
  r.steps = 10;
  CHECK(order_error(r, v).empty());
  r.steps = 9;
  CHECK(has(order_error(r, v), "went down from 10 to 9"));
  r.op = request_op::hello;
  CHECK(has(order_error(r, v), "'hello' sent twice"));
  r.op = request_op::average;
  CHECK(order_error(r, v).empty());  // an average carries no steps
  v.average_waiting = true;
  CHECK(has(order_error(r, v), "'average' sent again"));
  v.complete = true;
  r.op = request_op::complete;
  r.steps = 20;
  CHECK(has(order_error(r, v), "'complete' after 'complete'"));
}
