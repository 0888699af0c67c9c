#include "actors/gate.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

namespace tessera::actors {

namespace asio = boost::asio;
using asio::ip::tcp;
using local_socket = asio::local::stream_protocol::socket;
using caf::io::basp::message_type;

std::size_t frame_header_size() { return caf::io::basp::header_size; }

namespace {

result<caf::io::basp::header> decode_header(const std::uint8_t* bytes) {
  caf::io::basp::header hdr;
  caf::binary_deserializer bd{static_cast<caf::execution_unit*>(nullptr),
                              reinterpret_cast<const char*>(bytes), frame_header_size()};
  if (bd(hdr) || !caf::io::basp::valid(hdr))
    return error{error_kind::invalid_input, "not a BASP frame header"};
  return hdr;
}

/// The node ids a payload starts with (`count` of them), or none when they do not decode.
std::vector<caf::node_id> leading_nodes(const std::uint8_t* payload, std::size_t size, int count) {
  caf::binary_deserializer bd{static_cast<caf::execution_unit*>(nullptr),
                              reinterpret_cast<const char*>(payload), size};
  std::vector<caf::node_id> ids(static_cast<std::size_t>(count));
  for (auto& id : ids)
    if (bd(id)) return {};
  return ids;
}

}  // namespace

result<std::uint32_t> frame_payload_length(const std::uint8_t* hdr) {
  auto h = decode_header(hdr);
  if (!h) return h.err();
  return h->payload_len;
}

std::string frame_verdict(const std::uint8_t* hdr_bytes, const std::uint8_t* payload,
                          std::size_t payload_size, caf::node_id& peer, const caf::node_id& self,
                          const std::function<bool(const caf::node_id&)>& taken) {
  auto hdr = decode_header(hdr_bytes);
  if (!hdr) return hdr.err().message;
  const auto op = hdr->operation;
  if (op == message_type::client_handshake) {
    auto ids = leading_nodes(payload, payload_size, 1);
    if (ids.empty() || !ids[0]) return "a client handshake without a node id";
    if (ids[0] == self) return "a client handshake naming the scheduler's own node";
    if (peer) return ids[0] == peer ? "" : "a second handshake naming another node";
    if (taken(ids[0])) return "a client handshake naming a node another connection holds";
    peer = ids[0];
    return "";
  }
  if (!peer) return "a frame before the client handshake";
  switch (op) {
    case message_type::direct_message:
    case message_type::heartbeat:
      return "";
    case message_type::monitor_message:
    case message_type::down_message: {
      // (source node, destination node, ...): about the peer's own actors, for this node.
      auto ids = leading_nodes(payload, payload_size, 2);
      if (ids.size() != 2 || ids[0] != peer || ids[1] != self)
        return "a monitor or down notice about another node's actors";
      return "";
    }
    default:
      return "a frame of a kind peers may not send (routed or server handshake)";
  }
}

namespace {

/// The number CAF files the published actor under for the gate's connections. No socket has
/// it: BASP only uses it to find which actor to name in its server handshake.
constexpr std::uint16_t gate_publish_tag = 1;

}  // namespace

// CAF 0.17's BASP broker takes (publish_atom, scribe) for a connection without a doorman
// (its own tests set up peers this way): the same server handshake as an accepted peer gets.
upstream_fn caf_upstream(caf::actor_system& sys, const caf::actor& whom) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  auto ptr = caf::actor_cast<caf::strong_actor_ptr>(whom);
  return [&sys, basp, ptr](int fd) {
    auto scribe = sys.middleman().backend().new_scribe(fd);
    caf::anon_send(basp, caf::publish_atom::value, std::move(scribe), gate_publish_tag, ptr,
                   std::set<std::string>{});
    return true;
  };
}

/// One relayed connection: a peer's socket and the gate's end of its socketpair to CAF.
struct session : std::enable_shared_from_this<session> {
  session(tcp::socket c, asio::io_context& io) : client(std::move(c)), upstream(io), timer(io) {}
  tcp::socket client;
  local_socket upstream;
  asio::steady_timer timer;
  caf::node_id peer;
  std::vector<std::uint8_t> in;   ///< bytes read from the peer, not yet relayed
  std::size_t checked = 0;        ///< bytes of `in` (whole frames) that passed the rules
  std::vector<std::uint8_t> out;  ///< frames being written to CAF
  std::array<std::uint8_t, 1 << 16> up{};
  std::array<std::uint8_t, 1 << 16> down{};
  bool closed = false;
};

struct gate::impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  upstream_fn upstream;
  int port = 0;  ///< where it listens (set before the worker starts)
  caf::node_id self;
  gate_limits limits;
  std::list<std::shared_ptr<session>> sessions;
  mutable std::mutex mu;  // guards counters read by stats()
  gate_stats counters;
  std::thread worker;

  void count(std::int64_t gate_stats::*field) {
    std::lock_guard<std::mutex> lock(mu);
    ++(counters.*field);
  }

  void close(const std::shared_ptr<session>& s, std::int64_t gate_stats::*why = nullptr) {
    if (s->closed) return;
    s->closed = true;
    if (why) count(why);
    boost::system::error_code ec;
    s->client.close(ec);
    s->upstream.close(ec);
    s->timer.cancel();
    sessions.remove(s);
    std::lock_guard<std::mutex> lock(mu);
    counters.open = static_cast<int>(sessions.size());
  }

  /// True when a connection other than `asker` announced node `id`.
  bool taken(const caf::node_id& id, const std::shared_ptr<session>& asker) const {
    for (const auto& s : sessions)
      if (s != asker && !s->closed && s->peer == id) return true;
    return false;
  }

  void arm_idle(const std::shared_ptr<session>& s) {
    s->timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(limits.idle_timeout)));
    s->timer.async_wait([this, s](const boost::system::error_code& ec) {
      if (!ec) close(s, &gate_stats::idle);
    });
  }

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) admit(std::move(sock));
      accept();
    });
  }

  void admit(tcp::socket sock) {
    if (static_cast<int>(sessions.size()) >= limits.max_connections) {
      count(&gate_stats::over_capacity);
      boost::system::error_code ec;
      sock.close(ec);
      return;
    }
    auto s = std::make_shared<session>(std::move(sock), io);
    sessions.push_back(s);
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.accepted;
      counters.open = static_cast<int>(sessions.size());
    }
    arm_idle(s);
    if (!connect_upstream(*s)) return close(s);
    // Small frames go out at once: with Nagle's algorithm a reply waits for a delayed ACK
    // (about 40 ms).
    boost::system::error_code opt;
    s->client.set_option(tcp::no_delay(true), opt);
    relay_down(s);
    read_up(s);
  }

  /// Makes the session's socketpair and hands CAF its other end; false when either fails.
  bool connect_upstream(session& s) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return false;
    boost::system::error_code ec;
    s.upstream.assign(asio::local::stream_protocol(), fds[0], ec);
    if (ec) {
      ::close(fds[0]);
      ::close(fds[1]);
      return false;
    }
    return upstream(fds[1]);  // it owns fds[1] either way
  }

  /// CAF -> peer: relayed as it is.
  void relay_down(const std::shared_ptr<session>& s) {
    s->upstream.async_read_some(
        asio::buffer(s->down), [this, s](const boost::system::error_code& ec, std::size_t n) {
          if (ec) return close(s);
          asio::async_write(s->client, asio::buffer(s->down.data(), n),
                            [this, s](const boost::system::error_code& wec, std::size_t) {
                              if (wec) return close(s);
                              relay_down(s);
                            });
        });
  }

  /// Peer -> CAF: reads what the peer sends in chunks, checks every whole frame in it (a
  /// header announcing too much closes the connection before its payload is read), and
  /// relays the frames that passed in one write; reading goes on once that write is done.
  void read_up(const std::shared_ptr<session>& s) {
    s->client.async_read_some(
        asio::buffer(s->up), [this, s](const boost::system::error_code& ec, std::size_t n) {
          if (ec) return close(s);
          arm_idle(s);
          s->in.insert(s->in.end(), s->up.begin(), s->up.begin() + static_cast<std::ptrdiff_t>(n));
          if (auto why = check_frames(s)) return close(s, why);
          if (s->checked == 0) return read_up(s);
          s->out.assign(s->in.begin(), s->in.begin() + static_cast<std::ptrdiff_t>(s->checked));
          s->in.erase(s->in.begin(), s->in.begin() + static_cast<std::ptrdiff_t>(s->checked));
          s->checked = 0;
          asio::async_write(s->upstream, asio::buffer(s->out),
                            [this, s](const boost::system::error_code& wec, std::size_t) {
                              if (wec) return close(s);
                              read_up(s);
                            });
        });
  }

  /// Checks the whole frames in `s->in` past `s->checked`; the counter to close the
  /// connection for, or null when every whole frame passed.
  std::int64_t gate_stats::*check_frames(const std::shared_ptr<session>& s) {
    const std::size_t hs = frame_header_size();
    std::int64_t passed = 0;  // counted once per read, not per frame: the counters take a lock
    std::int64_t gate_stats::*why = nullptr;
    while (!why && s->in.size() - s->checked >= hs) {
      const std::uint8_t* h = s->in.data() + s->checked;
      auto len = frame_payload_length(h);
      if (!len) {
        why = &gate_stats::bad_frames;
      } else if (*len > limits.max_message) {
        why = &gate_stats::oversized;
      } else if (s->in.size() - s->checked - hs < *len) {
        break;  // the rest of its payload is to come
      } else if (!frame_verdict(h, h + hs, *len, s->peer, self, [&](const caf::node_id& id) {
                    return taken(id, s);
                  }).empty()) {
        why = &gate_stats::bad_frames;
      } else {
        s->checked += hs + *len;
        ++passed;
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    counters.frames += passed;
    return why;
  }
};

result<std::unique_ptr<gate>> gate::open(const std::string& bind, int port, upstream_fn upstream,
                                         const caf::node_id& self, gate_limits limits) {
  auto p = std::make_unique<impl>();
  p->upstream = std::move(upstream);
  p->self = self;
  p->limits = limits;
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(bind, ec);
  if (ec)
    return error{error_kind::invalid_input, "cannot listen on '" + bind + "': not an IP address"};
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  p->acceptor.open(ep.protocol(), ec);
  if (!ec) p->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) p->acceptor.bind(ep, ec);
  if (!ec) p->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return error{error_kind::io,
                 "cannot listen on " + bind + ":" + std::to_string(port) + ": " + ec.message()};
  p->port = p->acceptor.local_endpoint().port();
  p->accept();
  auto* raw = p.get();
  p->worker = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<gate>(new gate(std::move(p)));
}

gate::gate(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

gate::~gate() {
  asio::post(impl_->io, [p = impl_.get()] {
    boost::system::error_code ec;
    p->acceptor.close(ec);
    auto open = p->sessions;
    for (auto& s : open) p->close(s);
    p->io.stop();
  });
  if (impl_->worker.joinable()) impl_->worker.join();
}

int gate::port() const { return impl_->port; }

bool gate::wait_closed(double timeout) const {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(timeout));
  while (stats().open > 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

gate_stats gate::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

}  // namespace tessera::actors
