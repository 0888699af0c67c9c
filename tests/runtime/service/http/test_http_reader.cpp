// The HTTP layer without sockets: the request reader (runtime/service/http/request_reader.hpp) fed
// bytes as a connection would get them, and the text helpers (runtime/service/http/message.hpp):
// targets and query strings, error bodies, the token check.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "runtime/service/http/message.hpp"
#include "runtime/service/http/request_reader.hpp"

using namespace tessera::http;
using stage = request_reader::stage;

namespace {

/// Feeds `bytes` in pieces of `piece` bytes, going past header_done, and returns the last
/// stage: complete, failed or need_more.
stage feed_in_pieces(request_reader& r, const std::string& bytes, std::size_t piece) {
  stage st = stage::need_more;
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    st = r.feed(std::string_view(bytes).substr(at, piece));
    if (st == stage::header_done) st = r.feed({});
    if (st == stage::failed || st == stage::complete) return st;
  }
  return st;
}

limits small_limits() {
  limits l;
  l.max_header = 1024;
  l.max_body = 100;
  return l;
}

}  // namespace

TEST_CASE("reader: a request parses the same fed whole or byte by byte", "[http]") {
  const std::string text =
      "POST /v1/jobs?state=running&x=a%20b+c HTTP/1.1\r\nHost: h\r\n"
      "Content-Type: application/json\r\nAuthorization: Bearer tok\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}";
  for (const std::size_t piece : {text.size(), std::size_t{1}, std::size_t{5}}) {
    request_reader r(limits{});
    REQUIRE(feed_in_pieces(r, text, piece) == stage::complete);
    CHECK(r.authorization() == "Bearer tok");
    CHECK(r.keep_alive());
    const request q = r.take();
    CHECK(q.method == "POST");
    CHECK(q.target == "/v1/jobs?state=running&x=a%20b+c");
    CHECK(q.path == "/v1/jobs");
    CHECK(q.query == std::map<std::string, std::string>{{"state", "running"}, {"x", "a b c"}});
    CHECK(q.content_type == "application/json");
    CHECK(q.header("HOST") == "h");
    CHECK(q.header("authorization").empty());  // the token stays out of the request
    CHECK(q.body == "{\"a\":1}");
  }
}

TEST_CASE("reader: header_done comes once, before the body is read", "[http]") {
  request_reader r(limits{});
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 4\r\n\r\n";
  REQUIRE(r.feed(head + "ab") == stage::header_done);
  CHECK(r.head().path == "/x");
  CHECK(r.feed({}) == stage::need_more);
  CHECK(r.feed("cd") == stage::complete);
  CHECK(r.take().body == "abcd");
}

TEST_CASE("reader: pipelined requests come out one after another", "[http]") {
  request_reader r(limits{});
  const std::string two =
      "GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
      "GET /c HTTP/1.1\r\n";
  REQUIRE(feed_in_pieces(r, two, two.size()) == stage::complete);
  CHECK(r.take().path == "/a");
  CHECK(r.feed({}) == stage::header_done);
  CHECK(r.feed({}) == stage::complete);
  const auto b = r.take();
  CHECK((b.path == "/b" && b.body == "hi"));
  CHECK(r.feed({}) == stage::need_more);  // "/c" has no blank line yet
  CHECK(r.feed("\r\n") == stage::header_done);
}

TEST_CASE("reader: the header limit counts the request line and the fields together", "[http]") {
  // Beast measures the request line and the fields separately; 700 + 700 bytes stay under
  // a 1024-byte limit for each, but not together.
  const std::string line = "GET /" + std::string(700, 'a') + " HTTP/1.1\r\n";
  const std::string field = "X-Big: " + std::string(700, 'b') + "\r\n\r\n";
  for (const std::size_t piece : {std::size_t{1} << 20, std::size_t{64}}) {
    request_reader r(small_limits());
    REQUIRE(feed_in_pieces(r, line + field, piece) == stage::failed);
    CHECK(r.failure().status == 431);
  }
  request_reader ok(small_limits());
  CHECK(feed_in_pieces(ok, "GET /" + std::string(900, 'a') + " HTTP/1.1\r\n\r\n", 64) ==
        stage::complete);
}

TEST_CASE("reader: a body over the limit is refused from Content-Length or while chunked",
          "[http]") {
  request_reader declared(small_limits());
  // No body byte is sent: the header alone is refused.
  CHECK(feed_in_pieces(declared, "POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 1024) ==
        stage::failed);
  CHECK(declared.failure().status == 413);

  // Header and body in one buffer: refused all the same.
  request_reader at_once(small_limits());
  CHECK(feed_in_pieces(at_once,
                       "POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n" + std::string(101, 'b'),
                       4096) == stage::failed);
  CHECK(at_once.failure().status == 413);

  request_reader chunked(small_limits());
  const std::string head = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "3c\r\n" + std::string(60, 'x') + "\r\n";
  CHECK(feed_in_pieces(chunked, head + chunk, 7) == stage::need_more);  // 60 bytes: fine
  CHECK(feed_in_pieces(chunked, chunk, 7) == stage::failed);            // 120: over 100
  CHECK(chunked.failure().status == 413);

  request_reader at_limit(small_limits());
  CHECK(feed_in_pieces(at_limit,
                       "POST /x HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'y'),
                       13) == stage::complete);
  CHECK(at_limit.take().body.size() == 100);
}

TEST_CASE("reader: malformed requests, other methods and bad targets are refused", "[http]") {
  const std::vector<std::pair<std::string, int>> cases = {
      {"GARBAGE\r\n\r\n", 400},
      {std::string("\x00\x01\x02\xff\r\n\r\n", 8), 400},
      {"GET /x HTTP/9.9\r\n\r\n", 400},
      {"GET /x HTTP/1.1\r\nBad Header\r\n\r\n", 400},
      {"POST /x HTTP/1.1\r\nContent-Length: zz\r\n\r\n", 400},
      {"DELETE /v1/jobs HTTP/1.1\r\n\r\n", 405},
      {"GET http://h/x HTTP/1.1\r\n\r\n", 400},
      {"GET /x?a=%zz HTTP/1.1\r\n\r\n", 400},
      {"GET /x?a=1&a=2 HTTP/1.1\r\n\r\n", 400},
  };
  for (const auto& [text, status] : cases) {
    INFO(text);
    request_reader r(limits{});
    REQUIRE(feed_in_pieces(r, text, text.size()) == stage::failed);
    CHECK(r.failure().status == status);
    CHECK(r.feed("GET / HTTP/1.1\r\n\r\n") == stage::failed);  // stays failed
  }
}

TEST_CASE("split_target: paths and query strings", "[http]") {
  std::string path;
  std::map<std::string, std::string> q;
  CHECK_FALSE(split_target("/v1/rounds?limit=5&&flag&e=%3D%26", path, q));
  CHECK(path == "/v1/rounds");
  CHECK(q == std::map<std::string, std::string>{{"limit", "5"}, {"flag", ""}, {"e", "=&"}});
  CHECK_FALSE(split_target("/", path, q));
  CHECK((path == "/" && q.empty()));
  for (const char* bad : {"", "x", "*", "/a?x=%4", "/a?x=%0a", "/a?=1", "/a?k=1&k=2"}) {
    INFO(bad);
    const auto r = split_target(bad, path, q);
    REQUIRE(r);
    CHECK(r->status == 400);
  }
}

TEST_CASE("error_body: valid JSON whatever the message holds", "[http]") {
  CHECK(error_body("plain") == R"({"error": "plain"})");
  CHECK(error_body("q\"b\\n\nt\t") == R"({"error": "q\"b\\n\u000at\u0009"})");
  CHECK(error_body("caf\xc3\xa9") == "{\"error\": \"caf\xc3\xa9\"}");  // UTF-8 kept
  CHECK(error_body("bad \xff\xc3") == R"({"error": "bad \ufffd\ufffd"})");
  CHECK(error_body("\xed\xa0\x80") == R"({"error": "\ufffd\ufffd\ufffd"})");  // a surrogate
}

TEST_CASE("check_token, is_public: the bearer token and the public GETs", "[http]") {
  CHECK_FALSE(check_token("Bearer tok", "tok"));
  CHECK_FALSE(check_token("bearer  tok ", "tok"));
  for (const char* bad :
       {"", "Bearer", "Bearer ", "Bearer to", "Bearer tokk", "Basic tok", "tok"}) {
    INFO(bad);
    const auto r = check_token(bad, "tok");
    REQUIRE(r);
    CHECK(r->status == 401);
  }
  CHECK(check_token("Bearer ", ""));  // no token configured: nothing passes
  const std::vector<std::string> pub{"/metrics", "/"};
  CHECK(is_public("GET", "/metrics", pub));
  CHECK_FALSE(is_public("POST", "/metrics", pub));
  CHECK_FALSE(is_public("GET", "/metrics/x", pub));  // exact paths only
  CHECK(constant_time_equal("abc", "abc"));
  CHECK_FALSE(constant_time_equal("abc", "abd"));
  CHECK_FALSE(constant_time_equal("abc", "ab"));
}

TEST_CASE("check_access: a public request without a body, any other with the token", "[http]") {
  const limits l;
  auto access = [&](const std::string& head) {
    request_reader r(l);
    REQUIRE(r.feed(head) == stage::header_done);
    return check_access(r, l, "tok", 8080);
  };
  CHECK_FALSE(access("GET /metrics HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(access("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"));
  CHECK_FALSE(
      access("POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer tok\r\n"
             "Content-Length: 3\r\n\r\n"));
  CHECK(access("POST /metrics HTTP/1.1\r\n\r\n")->status == 401);
  CHECK(access("GET /v1/jobs HTTP/1.1\r\n\r\n")->status == 401);
  CHECK(access("GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\n")->status == 413);
  CHECK(access("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")->status == 413);
}

TEST_CASE("the Host header must name the server: DNS rebinding gets 421", "[http][host]") {
  // Before: any Host was served, so a page at a name rebound to 127.0.0.1 could read
  // /metrics and the dashboard from the user's browser and try tokens.
  limits l;
  l.hosts = {"localhost", "tessera.example.org"};
  auto access = [&](const std::string& host) {
    request_reader r(l);
    const std::string head = "GET /metrics HTTP/1.1\r\n" +
                             (host.empty() ? std::string() : "Host: " + host + "\r\n") + "\r\n";
    REQUIRE(r.feed(head) == stage::header_done);
    return check_access(r, l, "tok", 8080);
  };
  CHECK_FALSE(access("localhost:8080"));
  CHECK_FALSE(access("LOCALHOST:8080"));
  CHECK_FALSE(access("localhost"));  // no port: the name decides
  CHECK_FALSE(access("tessera.example.org:8080"));
  CHECK_FALSE(access("127.0.0.1:8080"));  // address literals name the server by themselves
  CHECK_FALSE(access("[::1]:8080"));
  CHECK_FALSE(access("10.1.2.3:8080"));
  const auto rebound = access("attacker.example.com:8080");
  REQUIRE(rebound);
  CHECK(rebound->status == 421);
  CHECK_THAT(rebound->message,
             Catch::Contains("attacker.example.com") && Catch::Contains("--allow-host"));
  REQUIRE(access("localhost:9999"));  // another port: not this server
  CHECK(access("localhost:9999")->status == 421);
  REQUIRE(access(""));  // HTTP/1.1 requires Host
  CHECK(access("localhost.attacker.com:8080")->status == 421);
  CHECK(access("127.0.0.1.attacker.com:8080")->status == 421);
  l.hosts.clear();  // no list: any host (the HTTP server's own default)
  CHECK_FALSE(access("attacker.example.com:8080"));
}
