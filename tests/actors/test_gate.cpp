// The gate (actors/gate.hpp): its frame rules as a plain function, and its bounds on real
// loopback sockets (an oversized frame, too many connections, a silent peer), relaying to a
// stand-in for CAF's middleman that records what reaches it; and a real CAF behind it.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp/header.hpp>

#include "actors/gate.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;
using caf::io::basp::message_type;

namespace {

caf::node_id node(std::uint32_t pid, std::uint8_t host) {
  caf::node_id::default_data::host_id_type id{};
  id.fill(host);
  return caf::make_node_id(pid, id);
}

/// A frame: a valid BASP header of kind `op` announcing `announced` bytes (default: the
/// payload's size), then the payload.
std::vector<std::uint8_t> frame(message_type op, const std::vector<char>& payload,
                                std::int64_t announced = -1) {
  // Actor fields as CAF's basp::valid wants them for each kind of frame.
  const bool handshake = op == message_type::client_handshake || op == message_type::heartbeat;
  const std::uint64_t source = handshake ? 0 : 1;
  const std::uint64_t dest = handshake || op == message_type::down_message ? 0 : 2;
  const std::uint64_t data = op == message_type::server_handshake ? 1 : 0;
  caf::io::basp::header hdr{
      op,   0,      static_cast<std::uint32_t>(announced < 0 ? payload.size() : announced),
      data, source, dest};
  std::vector<char> buf;
  caf::binary_serializer bs{static_cast<caf::execution_unit*>(nullptr), buf};
  REQUIRE_FALSE(bs(hdr));
  buf.insert(buf.end(), payload.begin(), payload.end());
  return std::vector<std::uint8_t>(buf.begin(), buf.end());
}

/// A payload holding the given node ids (and `tail` bytes after them).
std::vector<char> nodes_payload(std::vector<caf::node_id> ids, std::size_t tail = 0) {
  std::vector<char> buf;
  caf::binary_serializer bs{static_cast<caf::execution_unit*>(nullptr), buf};
  for (auto& id : ids) REQUIRE_FALSE(bs(id));
  buf.resize(buf.size() + tail, 'x');
  return buf;
}

/// frame_verdict on a whole frame.
std::string verdict(const std::vector<std::uint8_t>& f, caf::node_id& peer,
                    const caf::node_id& self, const caf::node_id& other_conn = {}) {
  const std::vector<std::uint8_t> payload(f.begin() + frame_header_size(), f.end());
  return frame_verdict(f.data(), payload.data(), payload.size(), peer, self,
                       [&](const caf::node_id& id) { return other_conn && id == other_conn; });
}

/// A stand-in for CAF's middleman: takes the gate's socketpair ends, greets each with "hi",
/// records every byte it receives.
struct recorder {
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards received and conns (the gate's thread adds to conns)
  std::string received;
  std::vector<int> conns;
  std::thread worker;

  recorder() {
    worker = std::thread([this] { loop(); });
  }
  ~recorder() {
    stop = true;
    worker.join();
    for (int c : conns) ::close(c);
  }
  /// What the gate calls with its end for CAF.
  upstream_fn take() {
    return [this](int fd) {
      (void)!::write(fd, "hi", 2);
      std::lock_guard<std::mutex> lock(mu);
      conns.push_back(fd);
      return true;
    };
  }
  void loop() {
    while (!stop) {
      std::vector<pollfd> fds;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int c : conns) fds.push_back({c, POLLIN, 0});
      }
      if (fds.empty() || ::poll(fds.data(), fds.size(), 20) <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      for (auto& p : fds)
        if (p.revents & POLLIN) {
          char buf[4096];
          const ssize_t n = ::read(p.fd, buf, sizeof buf);
          std::lock_guard<std::mutex> lock(mu);
          if (n > 0) {
            received.append(buf, static_cast<std::size_t>(n));
          } else {  // the gate closed its end
            ::close(p.fd);
            conns.erase(std::find(conns.begin(), conns.end(), p.fd));
          }
        }
    }
  }
  std::string got() {
    std::lock_guard<std::mutex> lock(mu);
    return received;
  }
};

int dial(int port) {
  const int fd = tessera::test::dial_loopback(port);
  REQUIRE(fd >= 0);
  return fd;
}

/// Reads what arrives within `seconds`; `closed` tells whether the peer closed.
std::string read_for(int fd, double seconds, bool& closed) {
  std::string out;
  closed = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) {
      closed = true;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

void send_all(int fd, const std::vector<std::uint8_t>& bytes) {
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

template <class Pred>
bool eventually(Pred p, double seconds = 3) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return p();
}

}  // namespace

TEST_CASE("gate rules: a handshake first, then only frames about the peer's own node",
          "[actors][gate]") {
  const auto self = node(1, 1), a = node(2, 2), b = node(3, 3);
  caf::node_id peer;
  CHECK_FALSE(verdict(frame(message_type::direct_message, {}), peer, self).empty());
  CHECK_FALSE(
      verdict(frame(message_type::client_handshake, nodes_payload({self})), peer, self).empty());
  CHECK_FALSE(
      verdict(frame(message_type::client_handshake, nodes_payload({a})), peer, self, a).empty());
  CHECK_FALSE(verdict(frame(message_type::client_handshake, {}), peer, self).empty());
  CHECK_FALSE(peer);
  CHECK(verdict(frame(message_type::client_handshake, nodes_payload({a})), peer, self).empty());
  CHECK(peer == a);
  CHECK(verdict(frame(message_type::client_handshake, nodes_payload({a})), peer, self).empty());
  CHECK_FALSE(
      verdict(frame(message_type::client_handshake, nodes_payload({b})), peer, self).empty());
  CHECK(verdict(frame(message_type::direct_message, {'m', 's', 'g'}), peer, self).empty());
  CHECK(verdict(frame(message_type::heartbeat, {}), peer, self).empty());
  CHECK(
      verdict(frame(message_type::monitor_message, nodes_payload({a, self})), peer, self).empty());
  CHECK(
      verdict(frame(message_type::down_message, nodes_payload({a, self}, 8)), peer, self).empty());
  // Spoofing another node, or asking the scheduler to forward, closes the connection.
  CHECK_FALSE(
      verdict(frame(message_type::down_message, nodes_payload({b, self})), peer, self).empty());
  CHECK_FALSE(
      verdict(frame(message_type::monitor_message, nodes_payload({a, b})), peer, self).empty());
  CHECK_FALSE(
      verdict(frame(message_type::routed_message, nodes_payload({a, self})), peer, self).empty());
  CHECK_FALSE(verdict(frame(message_type::server_handshake, {}), peer, self).empty());
  auto bad = frame(message_type::heartbeat, {});
  bad[0] = 0x7f;  // no such operation
  CHECK_FALSE(verdict(bad, peer, self).empty());
}

TEST_CASE("gate rules: any header bytes decode or are refused, never more",
          "[actors][gate][property]") {
  std::mt19937 rng(5);
  std::vector<std::uint8_t> hdr(frame_header_size());
  int decoded = 0;
  for (int i = 0; i < 20000; ++i) {
    for (auto& b : hdr) b = static_cast<std::uint8_t>(rng());
    hdr[0] = static_cast<std::uint8_t>(rng() % 9);
    auto len = frame_payload_length(hdr.data());
    if (len) ++decoded;
    caf::node_id peer;
    const std::vector<std::uint8_t> payload(rng() % 64, 0xab);
    (void)frame_verdict(hdr.data(), payload.data(), payload.size(), peer, node(1, 1),
                        [](const caf::node_id&) { return false; });
  }
  CHECK(decoded > 0);
}

TEST_CASE("gate: relays frames both ways, and an oversized frame closes its connection unread",
          "[actors][gate]") {
  recorder up;
  gate_limits lim;
  lim.max_message = 1024;
  auto g = gate::open("127.0.0.1", 0, up.take(), node(1, 1), lim);
  REQUIRE(g);
  const int c = dial((*g)->port());
  bool closed = false;
  CHECK(read_for(c, 0.3, closed) == "hi");  // CAF's side reaches the peer
  const auto hs = frame(message_type::client_handshake, nodes_payload({node(2, 2)}));
  const auto msg = frame(message_type::direct_message, std::vector<char>(1000, 'm'));
  send_all(c, hs);
  send_all(c, msg);
  std::string expect(hs.begin(), hs.end());
  expect.append(msg.begin(), msg.end());
  CHECK(eventually([&] { return up.got() == expect; }));
  // 4 GiB announced: closed after the header, nothing of it passed on.
  send_all(c, frame(message_type::direct_message, {}, 0xffffffffLL));
  read_for(c, 1.0, closed);
  CHECK(closed);
  CHECK(up.got() == expect);
  auto st = (*g)->stats();
  CHECK(st.oversized == 1);
  CHECK(st.frames == 2);
  CHECK(eventually([&] { return (*g)->stats().open == 0; }));
  ::close(c);
}

TEST_CASE("gate: connections beyond the cap are closed, silent ones time out", "[actors][gate]") {
  recorder up;
  gate_limits lim;
  lim.max_connections = 2;
  lim.idle_timeout = 0.4;
  auto g = gate::open("127.0.0.1", 0, up.take(), node(1, 1), lim);
  REQUIRE(g);
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(dial((*g)->port()));
  bool closed = false;
  read_for(fds[2], 0.3, closed);
  CHECK(closed);
  CHECK((*g)->stats().over_capacity == 1);
  // The two admitted ones say nothing: both are closed after the idle timeout.
  for (int i = 0; i < 2; ++i) {
    read_for(fds[i], 1.5, closed);
    CHECK(closed);
  }
  CHECK((*g)->stats().idle == 2);
  CHECK((*g)->wait_closed(1));
  for (int fd : fds) ::close(fd);
}

TEST_CASE("gate: a second connection naming a connected node is closed", "[actors][gate]") {
  recorder up;
  auto g = gate::open("127.0.0.1", 0, up.take(), node(1, 1));
  REQUIRE(g);
  const auto hs = frame(message_type::client_handshake, nodes_payload({node(2, 2)}));
  const int first = dial((*g)->port());
  send_all(first, hs);
  CHECK(eventually([&] { return (*g)->stats().frames == 1; }));
  const int second = dial((*g)->port());
  send_all(second, hs);
  bool closed = false;
  read_for(second, 1.0, closed);
  CHECK(closed);
  CHECK((*g)->stats().bad_frames == 1);
  read_for(first, 0.2, closed);
  CHECK_FALSE(closed);
  ::close(first);
  ::close(second);
}

TEST_CASE("gate: an address it cannot listen on is an error naming it", "[actors][gate]") {
  auto bad = gate::open(
      "not-an-address", 0,
      [](int fd) {
        ::close(fd);
        return false;
      },
      node(1, 1));
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains("not-an-address"));
  auto unroutable = gate::open(
      "192.0.2.1", 0,
      [](int fd) {
        ::close(fd);
        return false;
      },
      node(1, 1));  // TEST-NET-1, not ours
  REQUIRE_FALSE(unroutable);
  CHECK_THAT(unroutable.err().message, Catch::Contains("192.0.2.1"));
}

namespace {

struct gate_test_config : caf::actor_system_config {
  gate_test_config() { load<caf::io::middleman>(); }
};

/// A child process that reaches `whom` through the gate on `port` (read from `port_pipe`)
/// and asks it to add 2 and 3: exits 0 when the answer is 5.
[[noreturn]] void remote_asker(int port_pipe) {
  int port = 0;
  if (::read(port_pipe, &port, sizeof port) != sizeof port) ::_exit(3);
  gate_test_config cfg;
  caf::actor_system sys{cfg};
  auto remote = sys.middleman().remote_actor("127.0.0.1", static_cast<std::uint16_t>(port));
  if (!remote) ::_exit(4);
  caf::scoped_actor self{sys};
  int answer = 0;
  self->request(*remote, std::chrono::seconds(10), 2, 3)
      .receive([&](int sum) { answer = sum; }, [](caf::error&) {});
  ::_exit(answer == 5 ? 0 : 5);
}

}  // namespace

TEST_CASE("gate: CAF is reached through the gate alone, listening on no socket of its own",
          "[actors][gate]") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();  // before this process starts CAF's threads
  REQUIRE(child >= 0);
  if (child == 0) remote_asker(pipe_fds[0]);
  ::close(pipe_fds[0]);
  gate_test_config cfg;
  caf::actor_system sys{cfg};
  // An argument, as in actors/scheduler_actor.cpp: CAF 0.17 spawning a function without
  // arguments trips UBSan.
  auto adder = sys.spawn(
      [](int offset) -> caf::behavior { return {[=](int a, int b) { return a + b + offset; }}; },
      0);
  auto g = gate::open("127.0.0.1", 0, caf_upstream(sys, adder), sys.node());
  REQUIRE(g);
  // The gate's is the only listener here (CAF's publish would have added one on loopback).
  CHECK(tessera::test::listeners_of(::getpid()).size() == 1);
  const int port = (*g)->port();
  REQUIRE(::write(pipe_fds[1], &port, sizeof port) == sizeof port);
  ::close(pipe_fds[1]);
  int status = -1;
  CHECK(eventually([&] { return ::waitpid(child, &status, WNOHANG) == child; }, 30));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK((*g)->stats().accepted == 1);
  CHECK((*g)->stats().frames >= 2);  // the client handshake and the request at least
  caf::anon_send_exit(adder, caf::exit_reason::user_shutdown);
}
