// The HTTP client (runtime/service/http/client.hpp): server addresses as the CLI takes them, its
// errors (refused, timed out, closed) and keeping a connection across calls.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "tests/runtime/service/http/http_support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// A loopback port nothing listens on (bound, then released).
std::uint16_t unused_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(
      io, boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0));
  return a.local_endpoint().port();
}

}  // namespace

TEST_CASE("parse_server_address: HOST:PORT and http://HOST:PORT", "[http]") {
  struct ok_case {
    const char* text;
    const char* host;
    int port;
  };
  for (const auto& c :
       {ok_case{"127.0.0.1:8080", "127.0.0.1", 8080},
        ok_case{"http://localhost:1/", "localhost", 1}, ok_case{"http://[::1]:65535", "::1", 65535},
        ok_case{"node-3.cluster:443", "node-3.cluster", 443}}) {
    INFO(c.text);
    auto a = http::parse_server_address(c.text);
    REQUIRE(a.ok());
    CHECK(a->host == c.host);
    CHECK(a->port == c.port);
  }
  CHECK(http::parse_server_address("[::1]:80")->text() == "[::1]:80");
  CHECK(http::parse_server_address("0.0.0.0:0", true)->port == 0);
  for (const char* bad :
       {"", "8080", "host", "host:", ":80", "host:0", "host:65536", "host:8o", "host:80:1",
        "https://h:1", "http://h:1/v1", "[::1]80", "a b:1", "user@h:1"}) {
    INFO(bad);
    auto a = http::parse_server_address(bad);
    REQUIRE_FALSE(a.ok());
    CHECK(a.err().kind == error_kind::invalid_input);
    CHECK(a.err().message.rfind("server address '" + std::string(bad) + "': ", 0) == 0);
  }
}

TEST_CASE("client: a refused connection and a bad request line say what happened", "[http]") {
  const auto port = unused_port();
  http::client c({"127.0.0.1", port});
  auto got = c.get("/v1/jobs");
  REQUIRE_FALSE(got.ok());
  CHECK(got.err().kind == error_kind::io);
  CHECK(got.err().message ==
        "cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused");
  auto bad = c.call("GET", "/a b");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().kind == error_kind::invalid_input);
}

TEST_CASE("client: a server that does not answer times out within the deadline", "[http]") {
  std::mutex m;
  std::vector<http::responder> held;
  auto srv = open_server([&](http::request, http::responder r) {
    std::lock_guard<std::mutex> lock(m);
    held.push_back(std::move(r));
  });
  auto c = client_of(*srv, http_token, 200ms);
  const auto t0 = http_clock::now();
  auto got = c->get("/v1/jobs");
  const auto took = http_clock::now() - t0;
  REQUIRE_FALSE(got.ok());
  CHECK(got.err().message == "timed out after 0.2 s waiting for 127.0.0.1:" +
                                 std::to_string(srv->port()) + " to answer GET /v1/jobs");
  CHECK(took >= 190ms);
  CHECK(took < 1000ms);
  std::lock_guard<std::mutex> lock(m);
  REQUIRE(held.size() == 1);
  held.front()(200, "text/plain", "late");  // the answer to a request given up on: dropped
}

TEST_CASE("client: keeps its connection, and starts a new one once the server closed it",
          "[http]") {
  auto lim = short_limits();
  lim.read_timeout = 200ms;
  auto srv = open_server(echo_handler, lim);
  auto c = client_of(*srv);
  for (int i = 0; i < 3; ++i) REQUIRE(c->get("/a").ok());
  CHECK(srv->accepted() == 1);
  REQUIRE(eventually([&] { return srv->connections() == 0; }));  // idle: closed by the server
  auto after = c->post("/b", "x", "text/plain");  // a POST too: the close is seen before sending
  REQUIRE(after.ok());
  CHECK(after->body == "POST /b x");
  CHECK(srv->accepted() == 2);
}

TEST_CASE("client: an answer over its body limit is an error", "[http]") {
  auto srv = open_server(
      [](http::request, http::responder r) { r(200, "text/plain", std::string(4096, 'x')); });
  http::client_options o;
  o.token = http_token;
  o.max_body = 1000;
  http::client c({"127.0.0.1", srv->port()}, o);
  auto got = c.get("/big");
  REQUIRE_FALSE(got.ok());
  CHECK(got.err().message == "the answer to GET /big from 127.0.0.1:" +
                                 std::to_string(srv->port()) + " is over 1000 bytes");
}
