#include "runtime/node/program/lease_server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include <boost/asio.hpp>

#include "runtime/node/program/process.hpp"

namespace tessera::program {
namespace {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

/// Bytes one read takes from a socket.
constexpr std::size_t read_chunk = std::size_t{64} << 10;
/// A connection stops reading while more than this many reply bytes wait to be written, so a
/// program that sends without reading cannot make the node queue replies without end.
constexpr std::size_t write_backlog = std::size_t{4} << 20;
/// How long a connection closed for a protocol error has to take its error line.
constexpr auto error_linger = std::chrono::seconds(2);
/// Pause before accepting again after accept failed (out of descriptors, say).
constexpr auto accept_retry = std::chrono::milliseconds(100);
/// Descriptors a connection may hold for averages still to come; more is a protocol error.
constexpr std::size_t max_held_fds = 2;

/// One program's connection; lives on the server's thread only.
struct connection {
  explicit connection(local::socket s) : sock(std::move(s)), timer(sock.get_executor()) {}
  ~connection() {
    for (const int fd : fds) ::close(fd);
  }
  local::socket sock;
  std::deque<int> fds;       ///< descriptors received (SCM_RIGHTS), each for an average's line
  asio::steady_timer timer;  ///< limits the wait for an error line to go out
  std::array<char, read_chunk> chunk{};
  std::string partial;          ///< the line being read (no '\n' yet)
  std::deque<std::string> out;  ///< lines to write; the front is in flight when writing
  std::size_t out_bytes = 0;
  bool reading = false, writing = false;
  bool failing = false;  ///< a protocol error: the error line goes, then it closes
  bool closed = false;
  std::shared_ptr<lease_slot> slot;  ///< set by hello
};
using conn_ptr = std::shared_ptr<connection>;

}  // namespace

// ---- lease_server -------------------------------------------------------------------------

struct lease_server::impl {
  /// A token the executor registered.
  struct entry {
    std::shared_ptr<lease_slot> slot;
    bool used = false;  ///< a hello (or a refused one) named it
    std::weak_ptr<connection> conn;
  };

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  local::acceptor acceptor{io};
  asio::steady_timer retry{io};
  std::string path;
  lease_server_options opt;
  std::set<conn_ptr> conns;                            ///< open connections (server thread only)
  std::deque<std::weak_ptr<connection>> before_hello;  ///< oldest first (server thread only)
  std::mutex mu;                                       ///< guards tokens
  std::map<std::string, entry> tokens;
  std::atomic<std::int64_t> accepted{0}, refused{0};
  std::thread worker;

  void accept();
  void admit(local::socket s);
  void make_room();
  void read(const conn_ptr& c);
  void receive(const conn_ptr& c);
  bool take_fds(const conn_ptr& c, msghdr& msg);
  void take(const conn_ptr& c, std::size_t n);
  result<std::shared_ptr<shared_floats>> average_buffer(const conn_ptr& c, const lease_request& r);
  void on_line(const conn_ptr& c, std::string_view line);
  void hello(const conn_ptr& c, lease_request r);
  void blame(std::string_view line, const std::string& why);
  void send(const conn_ptr& c, std::string line);
  void write_next(const conn_ptr& c);
  void fail(const conn_ptr& c, const std::string& why);
  void close(conn_ptr c);
  void shutdown();

  /// Reads again unless the connection is failing, closed, already reading or backlogged.
  void maybe_read(const conn_ptr& c) {
    if (!c->reading && !c->failing && !c->closed && c->out_bytes <= write_backlog) read(c);
  }
};

void lease_server::impl::accept() {
  acceptor.async_accept([this](const boost::system::error_code& ec, local::socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      retry.expires_after(accept_retry);
      retry.async_wait([this](const boost::system::error_code& wec) {
        if (!wec) accept();
      });
      return;
    }
    admit(std::move(s));
    accept();
  });
}

namespace {

/// The process at the other end of a connection (SO_PEERCRED), -1 when unknown.
pid_t peer_pid(local::socket& s) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.pid;
}

/// One try at telling a connection why it is refused, without waiting (its buffer is empty or
/// nearly: nothing was ever answered on it).
void tell_at_once(local::socket& s, const std::string& why) {
  boost::system::error_code ec;
  const std::string line = format_error(why);
  s.non_blocking(true, ec);
  if (!ec) s.write_some(asio::buffer(line), ec);
}

}  // namespace

void lease_server::impl::admit(local::socket s) {
  make_room();
  if (conns.size() >= opt.max_connections) {
    ++refused;
    tell_at_once(s, "too many connections to this node's lease socket (at most " +
                        std::to_string(opt.max_connections) + ")");
    boost::system::error_code ec;
    s.close(ec);
    return;
  }
  ++accepted;
  auto c = std::make_shared<connection>(std::move(s));
  conns.insert(c);
  before_hello.push_back(c);
  c->timer.expires_after(opt.hello_timeout);  // hello() cancels it; fail() re-arms it
  c->timer.async_wait([this, weak = std::weak_ptr<connection>(c)](boost::system::error_code ec) {
    if (auto conn = weak.lock(); !ec && conn && !conn->slot)
      fail(conn, "no 'hello' within " + std::to_string(opt.hello_timeout.count()) + " ms");
  });
  read(c);
}

/// Before a new connection: forgets the ones that said hello or ended; at the cap of those
/// waiting for their hello, closes the oldest at once.
void lease_server::impl::make_room() {
  std::deque<std::weak_ptr<connection>> still;
  for (auto& w : before_hello)
    if (auto c = w.lock(); c && !c->slot && !c->closed && !c->failing)
      still.push_back(std::move(w));
  before_hello = std::move(still);
  while (before_hello.size() >= opt.max_waiting_hello) {
    if (auto c = before_hello.front().lock()) {
      tell_at_once(c->sock, "closed: more than " + std::to_string(opt.max_waiting_hello) +
                                " connections waited for their hello");
      close(c);
    }
    before_hello.pop_front();
  }
}

void lease_server::impl::read(const conn_ptr& c) {
  c->reading = true;
  c->sock.async_wait(local::socket::wait_read, [this, c](const boost::system::error_code& ec) {
    c->reading = false;
    if (c->closed || c->failing) return;
    if (ec) return close(c);  // the socket failed or was closed
    receive(c);
  });
}

/// Reads what is there with the descriptors that came with it (recvmsg: Asio's reads do not
/// take ancillary data), then cuts it into lines.
void lease_server::impl::receive(const conn_ptr& c) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  iovec iov{c->chunk.data(), c->chunk.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(c->sock.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return maybe_read(c);
    return close(c);
  }
  if (!take_fds(c, msg)) return;
  if (n == 0) return close(c);  // the program closed its end (or went away)
  take(c, static_cast<std::size_t>(n));
  maybe_read(c);
}

/// Keeps the descriptors of `msg` for the averages they come with; false (the connection
/// failing) when they were cut off or are more than any average could use.
bool lease_server::impl::take_fds(const conn_ptr& c, msghdr& msg) {
  for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < k; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      c->fds.push_back(fd);  // owned by the connection from here on
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    fail(c, "more descriptors came with one message than the node takes (one per 'average')");
    return false;
  }
  if (c->fds.size() > max_held_fds) {
    fail(c, std::to_string(c->fds.size()) +
                " descriptors are waiting for an 'average' each: send one memfd with each "
                "'average' line, no other");
    return false;
  }
  return true;
}

/// Cuts the `n` bytes just read into lines; a line over max_line fails the connection as soon
/// as it is seen to be too long, without holding more of it than max_line bytes.
void lease_server::impl::take(const conn_ptr& c, std::size_t n) {
  std::string_view data(c->chunk.data(), n);
  const auto too_long = [this] {
    return "a line longer than " + std::to_string(opt.max_line) +
           " bytes, the node's limit (is its '\\n' missing?)";
  };
  while (!data.empty() && !c->failing && !c->closed) {
    const auto nl = data.find('\n');
    const std::size_t len = nl == data.npos ? data.size() : nl;
    if (c->partial.size() + len > opt.max_line) return fail(c, too_long());
    if (nl == data.npos) {
      c->partial.append(data);
      return;
    }
    if (c->partial.empty()) {
      on_line(c, data.substr(0, nl));
    } else {
      c->partial.append(data.substr(0, nl));
      on_line(c, c->partial);
      if (c->partial.capacity() > read_chunk)
        std::string().swap(c->partial);
      else
        c->partial.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void lease_server::impl::on_line(const conn_ptr& c, std::string_view line) {
  auto r = parse_request(line);
  if (!r) {
    if (!c->slot) blame(line, r.err().message);
    return fail(c, r.err().message);
  }
  if (!c->slot) return hello(c, std::move(*r));
  if (auto why = order_error(*r, c->slot->view()); !why.empty()) return fail(c, why);
  std::shared_ptr<shared_floats> shared;
  if (r->op == request_op::average) {
    auto buf = average_buffer(c, *r);
    if (!buf) return fail(c, buf.err().message);
    shared = std::move(*buf);
  }
  auto reply = c->slot->on_request(std::move(*r), std::move(shared));
  if (!reply.empty()) send(c, std::move(reply));
}

/// The shared buffer of average request `r`: the connection's oldest descriptor, mapped.
result<std::shared_ptr<shared_floats>> lease_server::impl::average_buffer(const conn_ptr& c,
                                                                          const lease_request& r) {
  std::size_t count = 0;
  for (const auto n : r.sizes) count += n;
  if (c->fds.empty())
    return error{error_kind::invalid_input,
                 "'average' of " + std::to_string(count) +
                     " float32 values came without its buffers: send the line together with a "
                     "sealed memfd holding them (sendmsg with SCM_RIGHTS; "
                     "docs/lease-protocol.md)"};
  const int fd = c->fds.front();
  c->fds.pop_front();
  return shared_floats::map(
      fd, count, "'average' of the program with pid " + std::to_string(c->slot->view().pid));
}

/// The first message of a connection: a hello with a registered, unused token.
void lease_server::impl::hello(const conn_ptr& c, lease_request r) {
  if (r.op != request_op::hello)
    return fail(c, std::string("the first message must be 'hello', got '") + op_name(r.op) + "'");
  std::shared_ptr<lease_slot> slot;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = tokens.find(r.token);
    if (it == tokens.end()) {
      why = "'hello': field 'token' is not a token this node gave out (TESSERA_LEASE_TOKEN)";
    } else if (it->second.used) {
      why = "'hello': field 'token' was used already (one connection per process)";
    } else if (const auto peer = peer_pid(c->sock);
               !it->second.slot->owner_mark().empty() &&
               !process_carries_mark(peer, it->second.slot->owner_mark())) {
      why = "'hello': field 'token' was given to another process than this one (pid " +
            std::to_string(peer) + ")";  // left unused: the process it was given to may come
    } else {
      it->second.used = true;
      it->second.conn = c;
      slot = it->second.slot;
    }
  }
  if (!slot) return fail(c, why);
  c->slot = slot;
  c->timer.cancel();  // the hello deadline
  std::weak_ptr<connection> weak = c;
  // answer_average's and refuse_average's ways back: posted onto this thread; a connection
  // gone by then is skipped.
  slot->set_sender(
      [this, weak](std::string line) {
        asio::post(io, [this, weak, line = std::move(line)]() mutable {
          if (auto conn = weak.lock()) send(conn, std::move(line));
        });
      },
      [this, weak](std::string why) {
        asio::post(io, [this, weak, why = std::move(why)] {
          if (auto conn = weak.lock()) fail(conn, why);
        });
      });
  send(c, slot->on_request(std::move(r)));
}

/// A first line that is refused but names a registered, unused token: its slot learns why,
/// so the executor need not wait for a hello that will never come.
void lease_server::impl::blame(std::string_view line, const std::string& why) {
  const auto token = token_of(line);
  if (!token) return;
  std::shared_ptr<lease_slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = tokens.find(*token);
    if (it == tokens.end() || it->second.used) return;
    it->second.used = true;
    slot = it->second.slot;
  }
  slot->on_closed(why);
}

void lease_server::impl::send(const conn_ptr& c, std::string line) {
  if (c->closed || c->failing) return;
  c->out_bytes += line.size();
  c->out.push_back(std::move(line));
  if (!c->writing) write_next(c);
}

void lease_server::impl::write_next(const conn_ptr& c) {
  c->writing = true;
  asio::async_write(c->sock, asio::buffer(c->out.front()),
                    [this, c](const boost::system::error_code& ec, std::size_t) {
                      c->writing = false;
                      if (c->closed) return;
                      c->out_bytes -= c->out.front().size();
                      c->out.pop_front();
                      if (ec) return close(c);
                      if (!c->out.empty())
                        write_next(c);
                      else if (c->failing)
                        return close(c);
                      maybe_read(c);
                    });
}

/// A protocol error: the slot (if any) records `why`, the program gets an error line, then
/// the connection closes (at the latest error_linger later, if the program does not read).
void lease_server::impl::fail(const conn_ptr& c, const std::string& why) {
  if (c->failing || c->closed) return;
  c->failing = true;
  if (c->slot) c->slot->on_closed(why);
  // Keeps the line in flight (a write cannot be taken back halfway), drops the rest.
  c->out.resize(c->writing ? 1 : 0);
  c->out_bytes = c->out.empty() ? 0 : c->out.front().size();
  c->out.push_back(format_error(why));
  c->out_bytes += c->out.back().size();
  if (!c->writing) write_next(c);
  c->timer.expires_after(error_linger);
  c->timer.async_wait([this, c](const boost::system::error_code& ec) {
    if (!ec) close(c);
  });
}

void lease_server::impl::close(conn_ptr c) {  // by value: erasing it from conns keeps it alive
  if (c->closed) return;
  c->closed = true;
  boost::system::error_code ec;
  c->sock.close(ec);
  c->timer.cancel();
  conns.erase(c);
  if (c->slot) c->slot->on_closed("");  // keeps the reason fail() recorded
}

void lease_server::impl::shutdown() {
  boost::system::error_code ec;
  acceptor.close(ec);
  retry.cancel();
  const auto open = conns;
  for (const auto& c : open) close(c);
  io.stop();
}

// ---- lease_server: start and the executor's calls ----------------------------------------

namespace {

/// Binds `acceptor` to `path`; a socket file left by a process that is gone is replaced.
boost::system::error_code bind_socket(local::acceptor& acceptor, const std::string& path) {
  const local::endpoint ep(path);
  boost::system::error_code ec;
  acceptor.open(ep.protocol(), ec);
  if (ec) return ec;
  acceptor.bind(ep, ec);
  if (ec != asio::error::address_in_use) return ec;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return ec;
  local::socket probe(acceptor.get_executor());
  boost::system::error_code pec;
  probe.connect(ep, pec);
  if (pec != asio::error::connection_refused) return ec;  // someone serves it: leave it
  ::unlink(path.c_str());
  ec = {};
  acceptor.bind(ep, ec);
  return ec;
}

}  // namespace

result<std::unique_ptr<lease_server>> lease_server::start(const std::string& socket_path,
                                                          lease_server_options opt) {
  const std::string where = "lease socket " + socket_path + ": ";
  if (socket_path.empty() || socket_path.size() >= sizeof(sockaddr_un{}.sun_path))
    return error{error_kind::invalid_input, where + "a Unix socket path has 1 to " +
                                                std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                                                " bytes, this one " +
                                                std::to_string(socket_path.size())};
  if (opt.max_line == 0 || opt.max_connections == 0 || opt.max_waiting_hello == 0 ||
      opt.hello_timeout.count() <= 0)
    return error{
        error_kind::invalid_input,
        where + "max_line, max_connections, max_waiting_hello and hello_timeout must be > 0"};
  auto p = std::make_unique<impl>();
  p->path = socket_path;
  p->opt = opt;
  boost::system::error_code ec = bind_socket(p->acceptor, socket_path);
  if (ec) return error{error_kind::io, where + "cannot bind: " + ec.message()};
  // Before listen: nobody can connect until only the node's user may.
  if (::chmod(socket_path.c_str(), 0600) != 0) {
    const int e = errno;
    ::unlink(socket_path.c_str());
    return error{error_kind::io, where + "cannot set its mode to 0600: " + std::strerror(e)};
  }
  p->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    ::unlink(socket_path.c_str());
    return error{error_kind::io, where + "cannot listen: " + ec.message()};
  }
  p->accept();
  auto* raw = p.get();
  p->worker = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<lease_server>(new lease_server(std::move(p)));
}

lease_server::lease_server(std::unique_ptr<impl> p) : p_(std::move(p)) {}

lease_server::~lease_server() {
  asio::post(p_->io, [p = p_.get()] { p->shutdown(); });
  if (p_->worker.joinable()) p_->worker.join();
  ::unlink(p_->path.c_str());
}

const std::string& lease_server::path() const { return p_->path; }

void lease_server::add(const std::string& token, std::shared_ptr<lease_slot> slot) {
  std::lock_guard<std::mutex> lock(p_->mu);
  p_->tokens[token] = impl::entry{std::move(slot), false, {}};
}

void lease_server::remove(const std::string& token) {
  std::weak_ptr<connection> conn;
  {
    std::lock_guard<std::mutex> lock(p_->mu);
    const auto it = p_->tokens.find(token);
    if (it == p_->tokens.end()) return;
    conn = it->second.conn;
    p_->tokens.erase(it);
  }
  asio::post(p_->io, [p = p_.get(), conn] {
    if (auto c = conn.lock()) p->close(c);
  });
}

std::int64_t lease_server::accepted() const { return p_->accepted.load(); }
std::int64_t lease_server::refused() const { return p_->refused.load(); }

}  // namespace tessera::program
