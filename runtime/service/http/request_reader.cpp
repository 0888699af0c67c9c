#include "runtime/service/http/request_reader.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace tessera::http {

namespace beast_http = boost::beast::http;

struct request_reader::parser_box {
  std::optional<beast_http::request_parser<beast_http::string_body>> p;
};

namespace {

/// A Host header as a message quotes it: at most 100 bytes, control bytes as '?'.
std::string printable_host(std::string_view host) {
  std::string out(host.substr(0, 100));
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

/// "a, b, c".
std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// The answer to a parser error: 431 and 413 for the limits, 400 for the rest.
refusal refusal_for(const boost::system::error_code& ec) {
  if (ec == beast_http::error::header_limit) return {431, "request header over the limit"};
  if (ec == beast_http::error::body_limit || ec == beast_http::error::buffer_overflow)
    return {413, "request body over the limit"};
  return {400, "malformed request: " + ec.message()};
}

}  // namespace

request_reader::request_reader(const limits& l)
    : limits_(l), parser_(std::make_unique<parser_box>()) {
  start_request();
}

request_reader::~request_reader() = default;

void request_reader::start_request() {
  auto& p = parser_->p.emplace();
  p.body_limit(static_cast<std::uint64_t>(limits_.max_body));
  p.eager(false);  // stop after the header, so it is checked before any body byte is read
  header_consumed_ = 0;
  header_seen_ = false;
  stage_ = stage::need_more;
  req_ = request{};
  authorization_.clear();
  keep_alive_ = false;
  has_body_ = false;
  expect_continue_ = false;
  failure_ = refusal{};
}

request_reader::stage request_reader::fail(int status, std::string message) {
  failure_ = refusal{status, std::move(message)};
  return stage_ = stage::failed;
}

request_reader::stage request_reader::feed(std::string_view bytes) {
  buf_.append(bytes.data(), bytes.size());
  if (stage_ == stage::complete || stage_ == stage::failed) return stage_;
  return parse();
}

request_reader::stage request_reader::parse() {
  auto& p = *parser_->p;
  for (;;) {
    if (header_seen_ && p.is_done()) return stage_ = stage::complete;
    if (!header_seen_) {
      // Beast measures the request line and the fields apart; the limit is on both together.
      if (header_consumed_ >= limits_.max_header) return fail(431, "request header over the limit");
      const auto left = std::min<std::size_t>(limits_.max_header - header_consumed_,
                                              std::numeric_limits<std::uint32_t>::max());
      p.header_limit(static_cast<std::uint32_t>(left));
    }
    boost::system::error_code ec;
    const std::size_t n = p.put(boost::asio::buffer(buf_.data(), buf_.size()), ec);
    buf_.erase(0, n);
    if (!header_seen_) header_consumed_ += n;
    if (ec == beast_http::error::need_more) return stage_ = stage::need_more;
    if (ec) {
      // The method, when the request line was read, labels the refusal in the counters.
      if (!header_seen_)
        req_.method.assign(p.get().method_string().data(), p.get().method_string().size());
      const auto r = refusal_for(ec);
      return fail(r.status, r.message);
    }
    if (!header_seen_ && p.is_header_done()) {
      if (header_consumed_ > limits_.max_header)  // line and fields in one put(): checked here
        return fail(431, "request header over the limit");
      header_seen_ = true;
      on_header();
      if (stage_ == stage::failed) return stage_;
      p.eager(true);
      return stage_ = stage::header_done;
    }
    if (n == 0 && !p.is_done()) return stage_ = stage::need_more;
  }
}

void request_reader::on_header() {
  const auto& h = parser_->p->get();
  req_.method.assign(h.method_string().data(), h.method_string().size());
  req_.target.assign(h.target().data(), h.target().size());
  if (std::find(limits_.methods.begin(), limits_.methods.end(), req_.method) ==
      limits_.methods.end()) {
    fail(405, "method not allowed");
    return;
  }
  if (auto bad = split_target(req_.target, req_.path, req_.query)) {
    fail(bad->status, bad->message);
    return;
  }
  for (const auto& f : h) {
    const std::string_view name(f.name_string().data(), f.name_string().size());
    const std::string_view value(f.value().data(), f.value().size());
    if (equal_nocase(name, "authorization")) {
      authorization_ = std::string(value);
      continue;
    }
    if (equal_nocase(name, "content-type")) req_.content_type = std::string(value);
    if (equal_nocase(name, "expect") && equal_nocase(value, "100-continue"))
      expect_continue_ = true;
    req_.headers.emplace_back(std::string(name), std::string(value));
  }
  keep_alive_ = h.keep_alive();
  const auto length = parser_->p->content_length();
  has_body_ = parser_->p->chunked() || (length && *length > 0);
  expect_continue_ = expect_continue_ && h.version() == 11;
}

request request_reader::take() {
  request out = std::move(req_);
  out.body = parser_->p->release().body();
  start_request();
  return out;
}

std::optional<refusal> check_access(const request_reader& r, const limits& l,
                                    std::string_view token, std::uint16_t port) {
  if (const auto host = r.head().header("Host"); !host_allowed(host, l.hosts, port))
    return refusal{421, "Host '" + printable_host(host) +
                            "' is not this server's name (a rebound DNS name?); use one of " +
                            joined(l.hosts) + " or start serve with --allow-host NAME"};
  if (!is_public(r.head().method, r.head().path, l.public_paths))
    return check_token(r.authorization(), token);
  if (r.has_body()) return refusal{413, "a request without the token may not carry a body"};
  return std::nullopt;
}

}  // namespace tessera::http
