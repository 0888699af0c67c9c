#pragma once
/// @file http_support.hpp
/// Helpers of the HTTP layer's tests: a server on a free loopback port with short limits, a
/// client for it, and a raw TCP connection for clients that must misbehave (garbage, silence,
/// partial requests), with reads bounded by a timeout so a test cannot hang.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "runtime/service/http/client.hpp"
#include "runtime/service/http/server.hpp"
#include "tests/support.hpp"

namespace tessera::test {

using namespace std::chrono_literals;
using http_clock = std::chrono::steady_clock;

/// The token of every test server (64 hex digits, like a real one).
inline const std::string http_token(64, 'a');

/// Limits with short times, so the tests of timeouts take a fraction of a second.
inline http::limits short_limits() {
  http::limits l;
  l.read_timeout = 1000ms;
  l.write_timeout = 1000ms;
  l.linger = 300ms;
  l.close_grace = 500ms;
  return l;
}

/// Answers "METHOD PATH BODY" as text/plain at once.
inline void echo_handler(http::request r, http::responder answer) {
  answer(200, "text/plain", r.method + " " + r.path + " " + r.body);
}

/// A server on 127.0.0.1, any free port.
inline std::unique_ptr<http::server> open_server(http::handler h, http::limits l = short_limits()) {
  auto s = http::server::open("127.0.0.1", 0, std::move(l), http_token, std::move(h));
  REQUIRE(s.ok());
  return std::move(s).value();
}

/// A client of `s` with the test token (or `token`) and a 2 s timeout.
inline std::unique_ptr<http::client> client_of(const http::server& s,
                                               std::string token = http_token,
                                               std::chrono::milliseconds timeout = 2000ms) {
  http::client_options o;
  o.token = std::move(token);
  o.timeout = timeout;
  return std::make_unique<http::client>(http::server_address{"127.0.0.1", s.port()}, o);
}

/// Polls `cond` every 5 ms for at most `limit`; true when it held.
template <class F>
bool eventually(F cond, std::chrono::milliseconds limit = 1500ms) {
  const auto end = http_clock::now() + limit;
  while (!cond()) {
    if (http_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

/// A raw TCP connection to the server: writes what it is told, reads with a timeout.
class raw_conn {
 public:
  explicit raw_conn(std::uint16_t port) : fd_(dial_loopback(port)) { REQUIRE(fd_ >= 0); }
  ~raw_conn() { ::close(fd_); }
  raw_conn(const raw_conn&) = delete;
  raw_conn& operator=(const raw_conn&) = delete;

  /// Writes all of `bytes`; false when the connection broke.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  /// Reads what arrives within `timeout` until the peer closes; `closed` says whether it did.
  std::string read_until_closed(std::chrono::milliseconds timeout, bool* closed = nullptr) {
    std::string out;
    const auto end = http_clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - http_clock::now());
      if (left.count() <= 0 || !wait_readable(left)) break;
      char buf[65536];
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (closed) *closed = true;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    if (closed) *closed = false;
    return out;
  }

  /// Reads one response (header, then Content-Length bytes of body) within `timeout`; what
  /// arrived so far when it did not come whole.
  std::string read_response(std::chrono::milliseconds timeout = 2000ms) {
    const auto end = http_clock::now() + timeout;
    for (;;) {
      const auto head_end = pending_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const std::size_t length = content_length(pending_.substr(0, head_end));
        const std::size_t total = head_end + 4 + length;
        if (pending_.size() >= total) {
          std::string out = pending_.substr(0, total);
          pending_.erase(0, total);
          return out;
        }
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(end - http_clock::now());
      char buf[65536];
      if (left.count() <= 0 || !wait_readable(left)) break;
      const auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      pending_.append(buf, static_cast<std::size_t>(n));
    }
    std::string out;
    out.swap(pending_);
    return out;
  }

 private:
  bool wait_readable(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
  }
  static std::size_t content_length(const std::string& head) {
    const auto at = head.find("Content-Length: ");
    return at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 16, nullptr, 10);
  }

  int fd_;
  std::string pending_;
};

/// The status code of a raw response ("HTTP/1.1 413 ..." gives 413), 0 when there is none.
inline int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return 0;
  return std::atoi(response.c_str() + 9);
}

/// The body of a raw response (after the blank line).
inline std::string body_of(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace tessera::test
