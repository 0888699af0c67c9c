#include "runtime/service/http/client.hpp"

#include <poll.h>

#include <charconv>
#include <cstdio>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

namespace tessera::http {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using client_clock = std::chrono::steady_clock;

namespace {

/// "5 s", "0.25 s".
std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

/// True when `s` is a non-empty run of printable characters without blanks.
bool printable_word(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return false;
  }
  return true;
}

/// Where a call failed.
enum class step { resolve, connect, send, answer };

struct failure {
  step at = step::connect;
  error_code ec;
  bool timed_out = false;
};

}  // namespace

std::string server_address::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

result<server_address> parse_server_address(std::string_view text, bool allow_any_port) {
  const std::string quoted = "server address '" + std::string(text) + "': ";
  auto bad = [&](const std::string& why) { return error{error_kind::invalid_input, quoted + why}; };
  std::string_view s = text;
  if (s.substr(0, 8) == "https://") return bad("https is not supported (use http://HOST:PORT)");
  if (s.substr(0, 7) == "http://") s.remove_prefix(7);
  if (!s.empty() && s.back() == '/') s.remove_suffix(1);
  server_address out;
  std::string_view port_text;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return bad("expected [IPv6]:PORT");
    out.host = std::string(s.substr(1, close - 1));
    port_text = s.substr(close + 2);
  } else {
    const auto colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon)
      return bad("expected HOST:PORT or http://HOST:PORT");
    out.host = std::string(s.substr(0, colon));
    port_text = s.substr(colon + 1);
  }
  if (out.host.empty() || !printable_word(out.host) ||
      out.host.find_first_of("/?#@") != std::string::npos)
    return bad("expected HOST:PORT or http://HOST:PORT");
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535 || (port == 0 && !allow_any_port))
    return bad(std::string("the port must be a number from ") + (allow_any_port ? "0" : "1") +
               " to 65535");
  out.port = static_cast<std::uint16_t>(port);
  return out;
}

struct client::impl {
  impl(server_address a, client_options o) : to(std::move(a)), opt(std::move(o)) {}

  server_address to;
  client_options opt;
  asio::io_context io{1};
  tcp::resolver resolver{io};
  tcp::socket sock{io};
  boost::beast::flat_buffer buf;
  client_clock::time_point deadline;

  bool wait(const bool& done);
  bool stale();
  std::optional<failure> connect();
  std::optional<failure> exchange(const bhttp::request<bhttp::string_body>& req, reply& out);
  std::string describe(const failure& f, std::string_view method, std::string_view target) const;
};

bool client::impl::wait(const bool& done) {
  io.restart();
  while (!done) {
    if (io.run_one_until(deadline) > 0) continue;
    if (done) break;
    if (client_clock::now() < deadline) {
      io.restart();  // stopped without reaching the deadline: go on
      continue;
    }
    // The deadline: closing the socket ends the operation in flight (operation_aborted).
    error_code ec;
    resolver.cancel();
    sock.close(ec);
    io.restart();
    while (!done) io.run_one();
    return false;
  }
  return true;
}

bool client::impl::stale() {
  // A kept connection with something to read before a request is sent has been closed by
  // the server (its idle timeout) or is out of step: start a new one.
  pollfd p{sock.native_handle(), POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

std::optional<failure> client::impl::connect() {
  bool done = false;
  error_code ec;
  tcp::resolver::results_type found;
  resolver.async_resolve(to.host, std::to_string(to.port),
                         [&](error_code e, tcp::resolver::results_type r) {
                           ec = e;
                           found = std::move(r);
                           done = true;
                         });
  if (!wait(done)) return failure{step::resolve, {}, true};
  if (ec) return failure{step::resolve, ec, false};
  done = false;
  asio::async_connect(sock, found, [&](error_code e, const tcp::endpoint&) {
    ec = e;
    done = true;
  });
  if (!wait(done)) return failure{step::connect, {}, true};
  if (ec) {
    error_code ignored;
    sock.close(ignored);
    return failure{step::connect, ec, false};
  }
  sock.set_option(tcp::no_delay(true), ec);
  buf.clear();
  return std::nullopt;
}

std::optional<failure> client::impl::exchange(const bhttp::request<bhttp::string_body>& req,
                                              reply& out) {
  bool done = false;
  error_code ec;
  bhttp::async_write(sock, req, [&](error_code e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!wait(done)) return failure{step::send, {}, true};
  if (ec) return failure{step::send, ec, false};
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(static_cast<std::uint64_t>(opt.max_body));
  // The header first: Beast 1.74 skips the Content-Length check against the body limit when
  // it parses a response's header and body in one go (async_read's eager mode).
  for (const bool header : {true, false}) {
    done = false;
    const auto on_read = [&](error_code e, std::size_t) {
      ec = e;
      done = true;
    };
    if (header)
      bhttp::async_read_header(sock, buf, parser, on_read);
    else
      bhttp::async_read(sock, buf, parser, on_read);
    if (!wait(done)) return failure{step::answer, {}, true};
    if (ec) return failure{step::answer, ec, false};
  }
  auto res = parser.release();
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[bhttp::field::content_type]);
  out.body = std::move(res.body());
  if (!res.keep_alive()) {
    sock.shutdown(tcp::socket::shutdown_both, ec);
    sock.close(ec);
  }
  return std::nullopt;
}

std::string client::impl::describe(const failure& f, std::string_view method,
                                   std::string_view target) const {
  const std::string where = to.text();
  const std::string what = std::string(method) + " " + std::string(target);
  if (f.timed_out) {
    const std::string after = "timed out after " + seconds_text(opt.timeout);
    if (f.at == step::resolve) return after + " resolving " + to.host;
    if (f.at == step::connect) return after + " connecting to " + where;
    return after + " waiting for " + where + " to answer " + what;
  }
  switch (f.at) {
    case step::resolve:
      return "cannot resolve '" + to.host + "': " + f.ec.message();
    case step::connect:
      return "cannot connect to " + where + ": " + f.ec.message();
    case step::send:
      return "cannot send " + what + " to " + where + ": " + f.ec.message();
    case step::answer:
      break;
  }
  if (f.ec == bhttp::error::end_of_stream || f.ec == asio::error::eof ||
      f.ec == asio::error::connection_reset)
    return where + " closed the connection before answering " + what;
  if (f.ec == bhttp::error::body_limit)
    return "the answer to " + what + " from " + where + " is over " + std::to_string(opt.max_body) +
           " bytes";
  return "bad answer to " + what + " from " + where + ": " + f.ec.message();
}

client::client(server_address to, client_options opt)
    : p_(std::make_unique<impl>(std::move(to), std::move(opt))) {}

client::~client() = default;

result<reply> client::call(std::string_view method, std::string_view target, std::string body,
                           std::string_view content_type) {
  if (!printable_word(method) || !printable_word(target) || target.front() != '/')
    return error{error_kind::invalid_input,
                 "bad request line '" + std::string(method) + " " + std::string(target) + "'"};
  auto& p = *p_;
  bhttp::request<bhttp::string_body> req;
  req.version(11);
  req.method_string(std::string(method));
  req.target(std::string(target));
  req.set(bhttp::field::host, p.to.text());
  req.set(bhttp::field::user_agent, "tessera");
  if (!p.opt.token.empty()) req.set(bhttp::field::authorization, "Bearer " + p.opt.token);
  if (!content_type.empty()) req.set(bhttp::field::content_type, std::string(content_type));
  req.body() = std::move(body);
  req.keep_alive(true);
  req.prepare_payload();

  p.deadline = client_clock::now() + p.opt.timeout;
  error_code ignored;
  bool reused = p.sock.is_open();
  if (reused && p.stale()) {
    p.sock.close(ignored);
    reused = false;
  }
  for (;;) {
    std::optional<failure> f;
    if (!p.sock.is_open()) f = p.connect();
    reply out;
    if (!f) f = p.exchange(req, out);
    if (!f) return out;
    p.sock.close(ignored);
    // A kept connection the server closed as this GET went out: once more on a new one.
    const bool closed_under_us = f->at == step::send || f->ec == bhttp::error::end_of_stream ||
                                 f->ec == asio::error::connection_reset;
    if (reused && !f->timed_out && closed_under_us && method == "GET") {
      reused = false;
      continue;
    }
    return error{error_kind::io, p.describe(*f, method, target)};
  }
}

}  // namespace tessera::http
