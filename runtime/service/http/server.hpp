#pragma once
/// @file server.hpp
/// The HTTP/1.1 server of `tessera serve`'s control API (docs/api.md), on Boost.Beast.
///
/// Threading: the server runs one io_context on one thread of its own. One is enough: the
/// server only parses and writes (the routes hand work to the actors and answer later), and
/// the API serves a few CLI clients and a dashboard, not a crowd (docs/benchmarks/service.md,
/// "HTTP layer"). Each connection still runs on a strand of its own, so more threads
/// would need no change. The handler is called on the server's thread and must not block: it
/// keeps the `responder` and calls it later, from any thread.
///
/// Rules the server enforces itself, before the handler sees a request (each answered with
/// a JSON body {"error": "..."}, and the connection closed):
/// - the bearer token on every request but a GET of limits::public_paths (401), compared in
///   constant time, so the API cannot be driven by a page or process that lacks the token
///   file; a request let in without the token may carry no body (413);
/// - request header at most limits::max_header bytes (431) and body at most limits::max_body
///   (413, from Content-Length before the body is read, or while a chunked body is read),
///   so one client cannot make the server hold unbounded memory;
/// - a whole request within limits::read_timeout of the connection's start or of the previous
///   response, else the connection is closed (also an idle keep-alive one), so slow or silent
///   clients cannot hold connections;
/// - at most limits::max_connections open connections; one more is answered 503 and closed;
/// - malformed HTTP: 400; a method outside limits::methods: 405.
/// No input ends the process: parser and socket errors close the one connection, and an
/// exception from the handler answers 500.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/service/http/message.hpp"
#include "runtime/core/result.hpp"

namespace tessera::http {

/// One answer.
struct response {
  int status = 200;
  std::string content_type;
  std::string body;
  header_list headers;  ///< extra headers (Content-Length and Connection are the server's)
};

namespace detail {
struct reply_slot;
}

/// How a handler answers its request. Copies share one answer: the first call (from any
/// thread) sends it, later calls return false and do nothing. The call only posts the answer
/// to the connection's strand, so it never blocks. When the last copy is destroyed without a
/// call, the client gets 500. A call after the connection or the server is gone is a no-op.
class responder {
 public:
  explicit responder(std::shared_ptr<detail::reply_slot> slot) : slot_(std::move(slot)) {}

  /// Answers with `status` (200..599; another value sends 500), a Content-Type (none when
  /// empty), the body and extra headers (lines with CR, LF or NUL and the server's own
  /// Content-Length, Transfer-Encoding and Connection are dropped). False when already answered.
  bool operator()(int status, std::string content_type, std::string body,
                  header_list extra = {}) const;
  /// Answers with a JSON body.
  bool json(int status, std::string body) const;
  /// Answers with {"error": message}.
  bool error(int status, std::string_view message) const;
  /// True once any copy has answered.
  bool answered() const;

 private:
  std::shared_ptr<detail::reply_slot> slot_;
};

/// Called once per request on the server's thread. It must not block; it may answer at once
/// or keep the responder and answer later from another thread.
using handler = std::function<void(request, responder)>;

/// Requests answered, by method and status code (methods outside limits::methods, and
/// connections refused before a request was read, count as method "other").
struct request_count {
  std::string method;
  int code = 0;
  std::uint64_t count = 0;
};

class server {
 public:
  /// Listens on `bind_address` ("127.0.0.1", "::1", "localhost", "0.0.0.0") and `port` (0: a
  /// free one, see port()) and starts the server's thread. `token` (not empty) is what the
  /// Authorization header must carry as "Bearer <token>". Errors: invalid_input for an empty
  /// token, no handler or a limit of 0; io for an address that does not resolve or cannot be
  /// bound ("cannot listen on 127.0.0.1:80: Permission denied").
  static result<std::unique_ptr<server>> open(const std::string& bind_address, std::uint16_t port,
                                              limits lim, std::string token, handler h);
  /// close().
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The port bound (the chosen one when open was given 0).
  std::uint16_t port() const;
  /// "HOST:PORT" as bound ("[::1]:8080" for IPv6), for STATE_DIR/address.
  std::string address() const;
  /// Stops accepting, closes idle connections, lets responses in flight be written for at most
  /// limits::close_grace, then stops the thread and closes what is left. Responders called
  /// afterwards do nothing. Idempotent; called by the destructor. Not to be called from the
  /// handler (the server's thread): it waits for that thread to end.
  void close();

  /// Counters, safe to read from any thread while the server runs.
  std::vector<request_count> request_counts() const;  ///< sorted by method, then code
  std::size_t connections() const;       ///< open connections now (refused ones not included)
  std::uint64_t accepted() const;        ///< connections accepted so far, refused ones included
  std::uint64_t refused() const;         ///< connections answered 503 for the cap
  std::uint64_t handler_errors() const;  ///< exceptions caught from the handler or the loop

  struct impl;

 private:
  explicit server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace tessera::http
