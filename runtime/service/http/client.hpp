#pragma once
/// @file client.hpp
/// The blocking HTTP/1.1 client of the CLI commands (`tessera submit`, `status`, ...) for the
/// control API (docs/api.md), on Boost.Beast. Each call has one deadline for the whole of it
/// (resolve, connect, send, answer); errors say what happened and where ("cannot connect to
/// 127.0.0.1:8080: Connection refused", "timed out after 5 s waiting for 127.0.0.1:8080 to
/// answer GET /v1/jobs"). A client keeps its connection open between calls when the server
/// allows; a GET on a kept connection that the server closed meanwhile is sent once more on a
/// new one (a POST never is: it may have been acted on).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/core/result.hpp"

namespace tessera::http {

/// A server's host and port.
struct server_address {
  std::string host;
  std::uint16_t port = 0;
  /// "HOST:PORT" ("[::1]:8080" for an IPv6 host).
  std::string text() const;
};

/// Parses "HOST:PORT", "http://HOST:PORT" (a trailing '/' allowed) or "[IPv6]:PORT". The port
/// must be 1..65535, or 0 too when `allow_any_port` (a `--listen` address: any free port).
/// Errors (invalid_input) quote the text: "server address 'x': expected HOST:PORT or
/// http://HOST:PORT".
result<server_address> parse_server_address(std::string_view text, bool allow_any_port = false);

struct client_options {
  std::string token;                             ///< sent as "Authorization: Bearer <token>" if set
  std::chrono::milliseconds timeout{5000};       ///< for each call, connecting included
  std::size_t max_body = std::size_t{64} << 20;  ///< a longer answer is an error
};

/// A server's answer.
struct reply {
  int status = 0;
  std::string content_type;
  std::string body;
};

class client {
 public:
  explicit client(server_address to, client_options opt = {});
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Sends one request and waits for the answer (any status: a 4xx or 5xx answer is a reply,
  /// not an error). `content_type` is sent when not empty. Errors (kind io; invalid_input for
  /// a method or target with blanks or control characters) name the server and the request.
  result<reply> call(std::string_view method, std::string_view target, std::string body = {},
                     std::string_view content_type = {});
  result<reply> get(std::string_view target) { return call("GET", target); }
  result<reply> post(std::string_view target, std::string body, std::string_view content_type) {
    return call("POST", target, std::move(body), content_type);
  }

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace tessera::http
