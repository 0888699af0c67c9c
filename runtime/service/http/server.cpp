#include "runtime/service/http/server.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "runtime/service/http/request_reader.hpp"

namespace tessera::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

/// Bytes one socket read takes.
constexpr std::size_t read_chunk = std::size_t{16} << 10;
/// Pause before accepting again after accept failed (out of descriptors, say).
constexpr auto accept_retry = std::chrono::milliseconds(100);
/// The interim answer to `Expect: 100-continue`.
constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";

/// Lets responders post to the io_context only while it exists: close() shuts the gate,
/// under its mutex, before the io_context goes.
struct post_gate {
  std::mutex m;
  bool open = true;
};

/// A header line a handler may add: a token name, a value without CR, LF or NUL, and not one
/// of the headers the server writes itself.
bool allowed_extra_header(const std::string& name, const std::string& value) {
  if (name.empty() || value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
    return false;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == ':') return false;
  }
  return !equal_nocase(name, "content-length") && !equal_nocase(name, "transfer-encoding") &&
         !equal_nocase(name, "connection");
}

std::string host_port(const tcp::endpoint& e) {
  const auto a = e.address();
  const std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return host + ":" + std::to_string(e.port());
}

}  // namespace

namespace detail {

/// One request's answer, shared by the copies of its responder.
struct reply_slot {
  std::atomic<bool> done{false};
  std::function<void(response)> deliver;  ///< set once before the handler runs

  bool send(response r) {
    if (done.exchange(true)) return false;
    try {
      deliver(std::move(r));
    } catch (...) {  // posting failed (no memory): the connection's timeouts end it
    }
    return true;
  }
  ~reply_slot() {
    send(response{500,
                  "application/json",
                  error_body("the server dropped the request without an answer"),
                  {}});
  }
};

}  // namespace detail

bool responder::operator()(int status, std::string content_type, std::string body,
                           header_list extra) const {
  return slot_->send(response{status, std::move(content_type), std::move(body), std::move(extra)});
}

bool responder::json(int status, std::string body) const {
  return (*this)(status, "application/json", std::move(body));
}

bool responder::error(int status, std::string_view message) const {
  return json(status, error_body(message));
}

bool responder::answered() const { return slot_->done.load(); }

class connection;

struct server::impl {
  impl(limits l, std::string t, handler h)
      : lim(std::move(l)), token(std::move(t)), on_request(std::move(h)) {}

  // Declared first, destroyed last; close() resets them in order before the rest goes.
  std::optional<asio::io_context> io{std::in_place, 1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> retry;

  const limits lim;
  const std::string token;
  const handler on_request;
  std::shared_ptr<post_gate> gate = std::make_shared<post_gate>();
  std::atomic<bool> closing{false};
  std::atomic<bool> closed{false};
  std::uint16_t port = 0;
  std::string address;
  std::thread worker;

  std::mutex reg_m;  ///< guards conns
  std::condition_variable reg_cv;
  std::set<std::shared_ptr<connection>> conns;
  /// Admitted connections that have not shown the token, oldest first (guarded by reg_m).
  std::deque<std::weak_ptr<connection>> unauthenticated;

  mutable std::mutex count_m;  ///< guards requests
  std::map<std::pair<std::string, int>, std::uint64_t> requests;
  std::atomic<std::size_t> open_connections{0};
  std::atomic<std::uint64_t> accepted{0}, refused{0}, errors{0};

  void run();
  void accept();
  void admit(tcp::socket s);
  void make_room();
  void remove(const std::shared_ptr<connection>& c, bool admitted);
  void count(const std::string& method, int code);
  std::string method_label(const std::string& method) const;
  void close();
};

/// One client connection; its handlers run on its strand.
class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(tcp::socket s, server::impl& core)
      : stream_(std::move(s)), core_(core), reader_(core.lim) {}

  /// Reads requests (an admitted connection).
  void start();
  /// Answers 503 and closes (a connection over the cap).
  void refuse();
  /// The server is closing: an idle or reading connection closes now; one whose request is
  /// being handled or written closes after its response.
  void on_closing();
  /// The handler's answer to request number `seq`.
  void deliver(std::uint64_t seq, response r);
  /// Closes the connection if it has not shown the token and waits for a request (on its
  /// strand): another client needs its slot.
  void evict();
  /// It sent a request with the token.
  bool authenticated() const { return authenticated_.load(); }

  auto executor() { return stream_.get_executor(); }

 private:
  enum class phase { reading, handling, writing, lingering, done };

  void begin_request();
  void read_more();
  void process(std::string_view bytes);
  void dispatch();
  void send_refusal(const refusal& r);
  void write(response r, bool keep);
  void after_write(bool keep);
  void linger();
  void drain();
  void finish();

  beast::tcp_stream stream_;
  server::impl& core_;
  request_reader reader_;
  std::array<char, read_chunk> chunk_{};
  bhttp::response<bhttp::string_body> res_;
  phase phase_ = phase::reading;
  bool admitted_ = false;
  bool keep_alive_ = false;                 ///< the request being answered asked for keep-alive
  std::string method_label_;                ///< the request's method as counted
  std::uint64_t seq_ = 0;                   ///< requests handed to the handler
  std::atomic<bool> authenticated_{false};  ///< a request of it carried the token
};

// ---- connection ---------------------------------------------------------------------------

void connection::start() {
  admitted_ = true;
  begin_request();
  process({});
}

void connection::begin_request() {
  phase_ = phase::reading;
  stream_.expires_after(core_.lim.read_timeout);
}

void connection::refuse() {
  method_label_ = "other";
  core_.refused.fetch_add(1);
  write(response{503,
                 "application/json",
                 error_body("too many connections (at most " +
                            std::to_string(core_.lim.max_connections) + "); try again later"),
                 {}},
        false);
}

void connection::evict() {
  if (!authenticated_ && phase_ == phase::reading && reader_.head().method.empty())
    stream_.cancel();  // the read ends: finish()
}

void connection::on_closing() {
  if (phase_ == phase::reading || phase_ == phase::lingering) stream_.cancel();
}

void connection::read_more() {
  if (core_.closing) return finish();
  stream_.async_read_some(asio::buffer(chunk_),
                          [self = shared_from_this()](error_code ec, std::size_t n) {
                            // Timeout, end of stream, reset, cancel: the connection ends.
                            if (ec) return self->finish();
                            self->process(std::string_view(self->chunk_.data(), n));
                          });
}

void connection::process(std::string_view bytes) {
  auto st = reader_.feed(bytes);
  if (st == request_reader::stage::header_done) {
    if (auto no = check_access(reader_, core_.lim, core_.token, core_.port))
      return send_refusal(*no);
    if (!authenticated_ && !check_token(reader_.authorization(), core_.token))
      authenticated_ = true;  // its slot is safe from eviction from now on
    if (reader_.expects_continue()) {
      // Interim answer, written before any more is read; then the body.
      asio::async_write(stream_, asio::buffer(continue_line),
                        [self = shared_from_this()](error_code ec, std::size_t) {
                          if (ec) return self->finish();
                          self->process({});
                        });
      return;
    }
    st = reader_.feed({});
  }
  switch (st) {
    case request_reader::stage::need_more:
      return read_more();
    case request_reader::stage::failed:
      return send_refusal(reader_.failure());
    case request_reader::stage::complete:
      return dispatch();
    case request_reader::stage::header_done:
      return finish();  // not reached: the reader reports header_done once per request
  }
}

void connection::dispatch() {
  phase_ = phase::handling;
  stream_.expires_never();
  keep_alive_ = reader_.keep_alive();
  method_label_ = core_.method_label(reader_.head().method);
  request req = reader_.take();
  auto slot = std::make_shared<detail::reply_slot>();
  slot->deliver = [gate = core_.gate, weak = weak_from_this(), seq = ++seq_](response r) {
    std::lock_guard<std::mutex> lock(gate->m);
    if (!gate->open) return;
    if (auto c = weak.lock())
      asio::post(c->executor(),
                 [c, seq, r = std::move(r)]() mutable { c->deliver(seq, std::move(r)); });
  };
  const responder answer(std::move(slot));
  try {
    core_.on_request(std::move(req), answer);
  } catch (const std::exception& e) {
    core_.errors.fetch_add(1);
    answer.error(500, std::string("the request failed: ") + e.what());
  } catch (...) {
    core_.errors.fetch_add(1);
    answer.error(500, "the request failed");
  }
}

void connection::deliver(std::uint64_t seq, response r) {
  if (seq != seq_ || phase_ != phase::handling) return;  // a stale answer
  write(std::move(r), keep_alive_);
}

void connection::send_refusal(const refusal& r) {
  method_label_ = core_.method_label(reader_.head().method);
  response out{r.status, "application/json", error_body(r.message), {}};
  if (r.status == 401) out.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (r.status == 405) {
    std::string allow;
    for (const auto& m : core_.lim.methods) allow += (allow.empty() ? "" : ", ") + m;
    out.headers.emplace_back("Allow", allow);
  }
  write(std::move(out), false);
}

void connection::write(response r, bool keep) {
  keep = keep && !core_.closing;
  const int status = r.status >= 200 && r.status <= 599 ? r.status : 500;
  res_ = {};
  res_.version(11);
  res_.result(static_cast<unsigned>(status));
  if (!r.content_type.empty() && allowed_extra_header("Content-Type", r.content_type))
    res_.set(bhttp::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers)
    if (allowed_extra_header(name, value)) res_.insert(name, value);
  // No page of this server may be framed by another (clickjacking the dashboard), and no
  // answer is sniffed into another content type.
  res_.set("Content-Security-Policy", "frame-ancestors 'none'");
  res_.set(bhttp::field::x_frame_options, "DENY");
  res_.set("X-Content-Type-Options", "nosniff");
  res_.body() = std::move(r.body);
  res_.keep_alive(keep);
  if (keep) res_.set(bhttp::field::connection, "keep-alive");  // for HTTP/1.0 clients
  res_.prepare_payload();
  core_.count(method_label_, status);
  phase_ = phase::writing;
  stream_.expires_after(core_.lim.write_timeout);
  bhttp::async_write(stream_, res_, [self = shared_from_this(), keep](error_code ec, std::size_t) {
    if (ec) return self->finish();
    self->after_write(keep);
  });
}

void connection::after_write(bool keep) {
  res_ = {};
  if (!keep || core_.closing) return linger();
  begin_request();
  process({});  // a pipelined request may be buffered already
}

void connection::linger() {
  // Stop sending, then read and drop what the client still sends until it closes or the
  // linger time ends: closing with unread bytes would reset the connection, and the client
  // could lose the answer before reading it.
  phase_ = phase::lingering;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return finish();
  stream_.expires_after(core_.lim.linger);
  drain();
}

void connection::drain() {
  stream_.async_read_some(asio::buffer(chunk_),
                          [self = shared_from_this()](error_code ec, std::size_t) {
                            if (ec || self->core_.closing) return self->finish();
                            self->drain();
                          });
}

void connection::finish() {
  if (phase_ == phase::done) return;
  phase_ = phase::done;
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  core_.remove(shared_from_this(), admitted_);
}

// ---- server::impl -------------------------------------------------------------------------

void server::impl::run() {
  for (;;) {
    try {
      io->run();
      return;
    } catch (...) {  // a handler threw past its own catch: count it and go on serving
      errors.fetch_add(1);
    }
  }
}

void server::impl::accept() {
  acceptor->async_accept(asio::make_strand(*io), [this](error_code ec, tcp::socket s) {
    if (closing || ec == asio::error::operation_aborted) return;
    if (ec) {
      retry->expires_after(accept_retry);
      retry->async_wait([this](error_code e) {
        if (!e && !closing) accept();
      });
      return;
    }
    admit(std::move(s));
    accept();
  });
}

void server::impl::admit(tcp::socket s) {
  accepted.fetch_add(1);
  error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  auto c = std::make_shared<connection>(std::move(s), *this);
  make_room();
  const bool over = open_connections.load() >= lim.max_connections;
  if (!over) open_connections.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(reg_m);
    conns.insert(c);
    if (!over) unauthenticated.push_back(c);
  }
  if (over)
    asio::post(c->executor(), [c] { c->refuse(); });
  else
    asio::post(c->executor(), [c] { c->start(); });
}

void server::impl::make_room() {
  std::lock_guard<std::mutex> lock(reg_m);
  // Forget the ones that ended or showed the token; then, at the cap, evict the oldest.
  std::deque<std::weak_ptr<connection>> still;
  for (auto& w : unauthenticated)
    if (auto c = w.lock(); c && !c->authenticated()) still.push_back(std::move(w));
  unauthenticated = std::move(still);
  while (unauthenticated.size() >= lim.max_unauthenticated && !unauthenticated.empty()) {
    if (auto c = unauthenticated.front().lock()) asio::post(c->executor(), [c] { c->evict(); });
    unauthenticated.pop_front();
  }
}

void server::impl::remove(const std::shared_ptr<connection>& c, bool admitted) {
  if (admitted) open_connections.fetch_sub(1);
  std::lock_guard<std::mutex> lock(reg_m);
  conns.erase(c);
  if (conns.empty()) reg_cv.notify_all();
}

void server::impl::count(const std::string& method, int code) {
  std::lock_guard<std::mutex> lock(count_m);
  ++requests[{method, code}];
}

std::string server::impl::method_label(const std::string& method) const {
  // Only configured methods become labels: a client must not be able to add label values.
  return std::find(lim.methods.begin(), lim.methods.end(), method) != lim.methods.end() ? method
                                                                                        : "other";
}

void server::impl::close() {
  if (closed.exchange(true)) return;
  closing = true;
  if (io) {
    asio::post(*io, [this] {
      error_code ec;
      acceptor->close(ec);
      retry->cancel();
    });
    std::unique_lock<std::mutex> lock(reg_m);
    for (const auto& c : conns) asio::post(c->executor(), [c] { c->on_closing(); });
    reg_cv.wait_for(lock, lim.close_grace, [this] { return conns.empty(); });
  }
  work.reset();
  if (io) io->stop();
  if (worker.joinable()) worker.join();
  {
    std::lock_guard<std::mutex> lock(gate->m);
    gate->open = false;
  }
  std::set<std::shared_ptr<connection>> left;
  {
    std::lock_guard<std::mutex> lock(reg_m);
    left.swap(conns);
  }
  left.clear();
  retry.reset();
  acceptor.reset();
  io.reset();  // destroys the handlers still queued, and the connections they hold
  open_connections = 0;
}

// ---- server -------------------------------------------------------------------------------

server::server(std::unique_ptr<impl> p) : p_(std::move(p)) {}

server::~server() { close(); }

void server::close() { p_->close(); }

std::uint16_t server::port() const { return p_->port; }

std::string server::address() const { return p_->address; }

std::vector<request_count> server::request_counts() const {
  std::lock_guard<std::mutex> lock(p_->count_m);
  std::vector<request_count> out;
  for (const auto& [key, n] : p_->requests) out.push_back({key.first, key.second, n});
  return out;  // the map's order: method, then code
}

std::size_t server::connections() const { return p_->open_connections.load(); }
std::uint64_t server::accepted() const { return p_->accepted.load(); }
std::uint64_t server::refused() const { return p_->refused.load(); }
std::uint64_t server::handler_errors() const { return p_->errors.load(); }

namespace {

/// The first endpoint `host`:`port` resolves to (numeric addresses need no lookup).
result<tcp::endpoint> bind_endpoint(asio::io_context& io, const std::string& host,
                                    std::uint16_t port) {
  error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(addr, port);
  tcp::resolver resolver(io);
  const auto found = resolver.resolve(host, std::to_string(port), ec);
  if (ec || found.empty())
    return error{error_kind::io, "cannot resolve '" + host +
                                     "': " + (ec ? ec.message() : std::string("no address"))};
  return found.begin()->endpoint();
}

std::optional<error> check_config(const limits& lim, const std::string& token, const handler& h) {
  auto bad = [](const std::string& what) { return error{error_kind::invalid_input, what}; };
  if (token.empty()) return bad("the API token must not be empty");
  if (!h) return bad("the HTTP server needs a handler");
  if (lim.max_body == 0 || lim.max_header == 0 || lim.max_connections == 0)
    return bad("HTTP limits max_body, max_header and max_connections must be positive");
  if (lim.read_timeout.count() <= 0 || lim.write_timeout.count() <= 0)
    return bad("HTTP read and write timeouts must be positive");
  return std::nullopt;
}

}  // namespace

result<std::unique_ptr<server>> server::open(const std::string& bind_address, std::uint16_t port,
                                             limits lim, std::string token, handler h) {
  if (auto bad = check_config(lim, token, h)) return *bad;
  auto p = std::make_unique<impl>(std::move(lim), std::move(token), std::move(h));
  auto ep = bind_endpoint(*p->io, bind_address, port);
  if (!ep) return ep.err();
  const std::string where = host_port(*ep);
  p->acceptor.emplace(*p->io);
  p->retry.emplace(*p->io);
  error_code ec;
  auto& a = *p->acceptor;
  a.open(ep->protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(*ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return error{error_kind::io, "cannot listen on " + where + ": " + ec.message()};
  const auto bound = a.local_endpoint(ec);
  if (ec) return error{error_kind::io, "cannot listen on " + where + ": " + ec.message()};
  p->port = bound.port();
  p->address = host_port(bound);
  p->work.emplace(p->io->get_executor());
  p->accept();
  p->worker = std::thread([raw = p.get()] { raw->run(); });
  return std::unique_ptr<server>(new server(std::move(p)));
}

}  // namespace tessera::http
