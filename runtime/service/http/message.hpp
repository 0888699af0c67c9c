#pragma once
/// @file message.hpp
/// The plain values of tessera's HTTP layer (docs/api.md, "Transport and security"): a request
/// as a route sees it, the limits a server enforces, and the small text helpers the server,
/// the client and the routes share (query strings, JSON error bodies, the token compare).
/// No Boost types appear here, so a route includes this without Beast's headers.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::http {

/// Header lines as (name, value) pairs, in the order given.
using header_list = std::vector<std::pair<std::string, std::string>>;

/// One request, read whole, as the handler gets it.
struct request {
  std::string method;                        ///< "GET", "POST" (one of limits::methods)
  std::string target;                        ///< as sent: "/v1/jobs?state=running"
  std::string path;                          ///< the target before '?': "/v1/jobs"
  std::map<std::string, std::string> query;  ///< decoded query parameters ('+' is a space)
  std::string content_type;                  ///< the Content-Type header ("" when absent)
  header_list headers;                       ///< every header but Authorization (names as sent)
  std::string body;

  /// The value of header `name` (compared without case), or "" when absent.
  std::string header(std::string_view name) const;
};

/// What a server enforces on every connection. The defaults are docs/api.md's.
struct limits {
  std::size_t max_body = std::size_t{16} << 20;    ///< request body bytes (413)
  std::size_t max_header = std::size_t{64} << 10;  ///< request line + headers bytes (431)
  /// A whole request must arrive within this, counted from the connection's start or from the
  /// previous response; an idle keep-alive connection is closed after it.
  std::chrono::milliseconds read_timeout{10000};
  /// Writing one response may take this long (a client that does not read is dropped).
  std::chrono::milliseconds write_timeout{10000};
  std::size_t max_connections = 256;  ///< open connections; beyond it: 503 and closed
  /// Connections that have not shown the token yet, at most: one more closes the oldest of
  /// them that is waiting for its request, so slow clients without the token cannot take
  /// the slots of clients with it.
  std::size_t max_unauthenticated = 64;
  /// After an error response the server stops sending and reads (discards) what the client
  /// still sends for at most this long, so the client reads the error before the close.
  std::chrono::milliseconds linger{1000};
  /// close() waits at most this long for responses in flight before it stops.
  std::chrono::milliseconds close_grace{2000};
  std::vector<std::string> methods{"GET", "POST"};  ///< others get 405
  /// Paths a GET of which is served without the bearer token (exact matches of
  /// request::path); such a request may carry no body.
  std::vector<std::string> public_paths{"/metrics", "/", "/dashboard"};
  /// Host names a request's Host header may give besides IP address literals (compared
  /// without case; its port, when given, must be the server's): another name is answered
  /// 421, so a web page whose name an attacker rebinds to this address (DNS rebinding)
  /// cannot read the public paths or try tokens. Empty: any Host.
  std::vector<std::string> hosts;
};

/// An answer the server gives on its own (a limit, the token, malformed input): the status
/// and the message of its JSON error body.
struct refusal {
  int status = 400;
  std::string message;
};

/// Splits an origin-form target ("/a/b?x=1&y=%20") into its path and decoded query
/// parameters; a refusal (400) for a target that does not start with '/', a bad '%' escape,
/// a control byte in a query value or a parameter given twice.
std::optional<refusal> split_target(std::string_view target, std::string& path,
                                    std::map<std::string, std::string>& query);

/// The body of every error answer: {"error": "<message>"}. The message is escaped for JSON;
/// bytes that are not UTF-8 become U+FFFD, so the body is valid JSON whatever it quotes.
std::string error_body(std::string_view message);

/// True when `host` (a Host header's value: name or [v6 address], then an optional ":port")
/// is an IP address literal or names one of `names` (compared without case), and its port,
/// when given, is `port`. Any host when `names` is empty.
bool host_allowed(std::string_view host, const std::vector<std::string>& names, std::uint16_t port);

/// ASCII equality without case (header names, "100-continue").
bool equal_nocase(std::string_view a, std::string_view b);

/// Equality whose time depends on the lengths only, not on where the bytes differ.
bool constant_time_equal(std::string_view a, std::string_view b);

/// True when a request goes without the token (docs/api.md): a GET of one of `public_paths`
/// (exact matches of the path).
bool is_public(std::string_view method, std::string_view path,
               const std::vector<std::string>& public_paths);

/// The token check: a refusal (401) unless `authorization` is "Bearer <token>" with exactly
/// `token`, compared in constant time (an empty `token` matches nothing).
std::optional<refusal> check_token(std::string_view authorization, std::string_view token);

}  // namespace tessera::http
