// The HTTP server (runtime/service/http/server.hpp) live on a loopback port, driven by the real
// client (runtime/service/http/client.hpp) and, where the client must misbehave, by raw TCP
// connections: round trips, answers from other threads, the security limits of docs/api.md,
// keep-alive, the connection cap, the counters and close() with requests in flight.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/runtime/service/http/http_support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// Responders a handler kept, answered or dropped by the test.
struct kept_responders {
  std::mutex m;
  std::vector<http::responder> held;
  std::atomic<int> calls{0};

  http::handler keep() {
    return [this](http::request, http::responder r) {
      std::lock_guard<std::mutex> lock(m);
      held.push_back(std::move(r));
      ++calls;
    };
  }
};

/// A server whose handler keeps every responder, with one client's GET held by it.
struct held_request {
  kept_responders kept;
  std::unique_ptr<http::server> srv;
  std::unique_ptr<http::client> c;
  result<http::reply> got = error{};
  std::thread asker;

  held_request(const std::string& target, std::chrono::milliseconds grace) {
    auto lim = short_limits();
    lim.close_grace = grace;
    srv = open_server(kept.keep(), lim);
    c = client_of(*srv);
    asker = std::thread([this, target] { got = c->get(target); });
    const bool held = eventually([&] { return kept.calls == 1; });
    if (!held) asker.join();
    REQUIRE(held);
  }
  ~held_request() {
    if (asker.joinable()) asker.join();
  }

  /// Closes the server; how long close() took.
  std::chrono::nanoseconds close_server() {
    const auto t0 = http_clock::now();
    srv->close();
    return http_clock::now() - t0;
  }
};

std::uint64_t count_of(const http::server& s, const std::string& method, int code) {
  for (const auto& c : s.request_counts())
    if (c.method == method && c.code == code) return c.count;
  return 0;
}

}  // namespace

TEST_CASE("server: GET and POST round trips with the client", "[http]") {
  std::vector<http::request> seen;
  std::mutex m;
  auto srv = open_server([&](http::request r, http::responder answer) {
    std::string q;
    for (const auto& [k, v] : r.query) q += k + "=" + v + ";";
    {
      std::lock_guard<std::mutex> lock(m);
      seen.push_back(r);
    }
    answer(r.method == "POST" ? 201 : 200, "application/json", q + r.body,
           {{"X-Extra", "1"}, {"Bad\r\nHeader", "x"}});
  });
  auto c = client_of(*srv);
  auto got = c->get("/v1/rounds?limit=5&name=a%20b+c");
  REQUIRE(got.ok());
  CHECK(got->status == 200);
  CHECK(got->content_type == "application/json");
  CHECK(got->body == "limit=5;name=a b c;");
  auto posted = c->post("/v1/jobs", "{\"job\": []}", "application/json");
  REQUIRE(posted.ok());
  CHECK(posted->status == 201);
  CHECK(posted->body == "{\"job\": []}");
  std::lock_guard<std::mutex> lock(m);
  REQUIRE(seen.size() == 2);
  CHECK((seen[1].method == "POST" && seen[1].path == "/v1/jobs"));
  CHECK(seen[1].content_type == "application/json");
  CHECK(seen[0].query.at("limit") == "5");
  CHECK(count_of(*srv, "GET", 200) == 1);
  CHECK(count_of(*srv, "POST", 201) == 1);
}

TEST_CASE("server: a responder answers from another thread after a delay", "[http]") {
  std::vector<std::thread> workers;
  std::mutex m;
  auto srv = open_server([&](http::request r, http::responder answer) {
    std::lock_guard<std::mutex> lock(m);
    workers.emplace_back([r = std::move(r), answer] {
      std::this_thread::sleep_for(150ms);
      answer.json(200, "{\"path\": \"" + r.path + "\"}");
    });
  });
  auto c = client_of(*srv);
  const auto t0 = http_clock::now();
  auto got = c->get("/v1/cluster");
  const auto waited = http_clock::now() - t0;
  REQUIRE(got.ok());
  CHECK(got->body == "{\"path\": \"/v1/cluster\"}");
  CHECK(waited >= 140ms);
  auto again = c->get("/v1/nodes");  // the same connection, answered later again
  REQUIRE(again.ok());
  CHECK(again->body == "{\"path\": \"/v1/nodes\"}");
  CHECK(srv->accepted() == 1);
  for (auto& w : workers) w.join();
}

TEST_CASE("server: a responder dropped unanswered gives 500, not a hang", "[http]") {
  std::vector<std::thread> workers;
  std::mutex m;
  auto srv = open_server([&](http::request r, http::responder answer) {
    if (r.path == "/here") return;  // dropped on the server's thread
    std::lock_guard<std::mutex> lock(m);
    workers.emplace_back([answer = std::move(answer)]() mutable {
      std::this_thread::sleep_for(50ms);
      http::responder gone = std::move(answer);  // dropped on another thread
    });
  });
  auto c = client_of(*srv);
  for (const char* path : {"/here", "/there"}) {
    auto got = c->get(path);
    REQUIRE(got.ok());
    CHECK(got->status == 500);
    CHECK(got->content_type == "application/json");
    CHECK(got->body.rfind("{\"error\": ", 0) == 0);
  }
  for (auto& w : workers) w.join();
}

TEST_CASE("server: the first answer wins, and a throwing handler gives 500", "[http]") {
  std::atomic<bool> second_refused{false};
  auto srv = open_server([&](http::request r, http::responder answer) {
    if (r.path == "/throw") throw std::runtime_error("boom");
    CHECK(answer(200, "text/plain", "first"));
    second_refused = !answer(202, "text/plain", "second");
    CHECK(answer.answered());
  });
  auto c = client_of(*srv);
  auto got = c->get("/twice");
  REQUIRE(got.ok());
  CHECK((got->status == 200 && got->body == "first"));
  CHECK(second_refused);
  auto thrown = c->get("/throw");
  REQUIRE(thrown.ok());
  CHECK(thrown->status == 500);
  CHECK(thrown->body == R"({"error": "the request failed: boom"})");
  CHECK(srv->handler_errors() == 1);
}

TEST_CASE("server: the bearer token, and the public paths without it", "[http]") {
  std::atomic<int> handled{0};
  auto srv = open_server([&](http::request r, http::responder answer) {
    ++handled;
    echo_handler(std::move(r), std::move(answer));
  });
  auto wrong = client_of(*srv, std::string(64, 'b'));
  auto none = client_of(*srv, "");
  for (auto* c : {wrong.get(), none.get()}) {
    auto got = c->get("/v1/jobs");
    REQUIRE(got.ok());
    CHECK(got->status == 401);
    CHECK(got->content_type == "application/json");
    CHECK(got->body.rfind("{\"error\": ", 0) == 0);
  }
  CHECK(handled == 0);
  for (const char* path : {"/metrics", "/", "/dashboard"}) {
    auto got = none->get(path);
    REQUIRE(got.ok());
    CHECK(got->status == 200);
  }
  auto with = client_of(*srv);
  auto ok = with->get("/v1/jobs");
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
  CHECK(handled == 4);
  CHECK(count_of(*srv, "GET", 401) == 2);

  raw_conn raw(srv->port());  // the header's name and scheme in any case
  raw.send("GET /v1/jobs HTTP/1.1\r\nauthorization: bearer " + http_token + "\r\n\r\n");
  CHECK(status_of(raw.read_response()) == 200);
  CHECK(handled == 5);
}

TEST_CASE("server: only a GET of a public path goes without the token, and without a body",
          "[http]") {
  std::atomic<int> handled{0};
  auto lim = short_limits();
  auto srv = open_server(
      [&](http::request r, http::responder answer) {
        ++handled;
        echo_handler(std::move(r), std::move(answer));
      },
      lim);
  auto none = client_of(*srv, "");
  auto post = none->post("/metrics", "x", "text/plain");  // docs/api.md: GET /metrics only
  REQUIRE(post.ok());
  CHECK(post->status == 401);
  // A body on a request let in without the token is refused before it is read, so clients
  // without the token cannot make the server hold max_body bytes per connection.
  raw_conn declared(srv->port());
  declared.send("GET /metrics HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
  CHECK(status_of(declared.read_response()) == 413);
  raw_conn chunked(srv->port());
  chunked.send("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  CHECK(status_of(chunked.read_response()) == 413);
  CHECK(handled == 0);
  auto empty = none->call("GET", "/dashboard", "", "");  // Content-Length: 0 is no body
  REQUIRE(empty.ok());
  CHECK(empty->status == 200);
  CHECK(handled == 1);
}

TEST_CASE("server: a body over the limit gets 413, declared or chunked", "[http]") {
  auto lim = short_limits();
  lim.max_body = 1024;
  std::atomic<int> handled{0};
  auto srv = open_server(
      [&](http::request r, http::responder a) {
        ++handled;
        echo_handler(std::move(r), std::move(a));
      },
      lim);
  {
    // Refused from the header alone: no body byte is sent.
    raw_conn raw(srv->port());
    raw.send("POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token +
             "\r\nContent-Length: 1025\r\n\r\n");
    const auto res = raw.read_response();
    CHECK(status_of(res) == 413);
    CHECK(body_of(res).rfind("{\"error\": ", 0) == 0);
    CHECK(res.find("Connection: close") != std::string::npos);
  }
  {
    raw_conn raw(srv->port());
    raw.send("POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token +
             "\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "200\r\n" + std::string(512, 'x') + "\r\n";
    raw.send(chunk + chunk);  // 1024 bytes: still fine
    CHECK(raw.read_until_closed(100ms).empty());
    raw.send(chunk);
    CHECK(status_of(raw.read_response()) == 413);
  }
  // The client sends a whole large body; the server's lingering close lets it read the 413.
  auto c = client_of(*srv);
  auto big = c->post("/v1/jobs", std::string(std::size_t{1} << 20, 'z'), "application/toml");
  REQUIRE(big.ok());
  CHECK(big->status == 413);
  auto fits = c->post("/v1/jobs", std::string(1024, 'z'), "application/toml");
  REQUIRE(fits.ok());
  CHECK(fits->status == 200);
  CHECK(handled == 1);
  CHECK(count_of(*srv, "POST", 413) == 3);
}

TEST_CASE("server: a header over the limit gets 431", "[http]") {
  auto srv = open_server(echo_handler, short_limits());  // the default 64 KiB
  raw_conn raw(srv->port());
  raw.send("GET /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token +
           "\r\nX-Pad: " + std::string(std::size_t{70} << 10, 'p') + "\r\n\r\n");
  const auto res = raw.read_response();
  CHECK(status_of(res) == 431);
  CHECK(body_of(res) == R"({"error": "request header over the limit"})");
  auto c = client_of(*srv);
  auto ok = c->get("/v1/jobs?pad=" + std::string(std::size_t{60} << 10, 'p'));
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
}

TEST_CASE("server: malformed requests get 400 and the server serves the next client", "[http]") {
  auto srv = open_server(echo_handler);
  const std::vector<std::string> junk = {
      "GARBAGE\r\n\r\n",
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15),  // TLS hello
      "GET /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token +
          "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "GET  HTTP/1.1\r\n\r\n",
  };
  for (const auto& bytes : junk) {
    INFO(bytes);
    raw_conn raw(srv->port());
    raw.send(bytes);
    bool closed = false;
    const auto res = raw.read_until_closed(1500ms, &closed);
    CHECK(status_of(res) == 400);
    CHECK(body_of(res).rfind("{\"error\": \"malformed request", 0) == 0);
    CHECK(closed);
  }
  raw_conn method(srv->port());
  method.send("DELETE /v1/jobs/1 HTTP/1.1\r\n\r\n");
  const auto res = method.read_response();
  CHECK(status_of(res) == 405);
  CHECK(res.find("Allow: GET, POST") != std::string::npos);
  auto c = client_of(*srv);
  auto ok = c->get("/after");
  REQUIRE(ok.ok());
  CHECK(ok->body == "GET /after ");
  // Refused before the method was read: "other"; after it: the method.
  CHECK(count_of(*srv, "other", 400) == 3);
  CHECK(count_of(*srv, "GET", 400) == 1);
  CHECK(count_of(*srv, "POST", 400) == 1);
  CHECK(count_of(*srv, "other", 405) == 1);
}

TEST_CASE("server: a silent or slow client is disconnected after the read timeout", "[http]") {
  auto lim = short_limits();
  lim.read_timeout = 300ms;
  auto srv = open_server(echo_handler, lim);
  raw_conn silent(srv->port());
  raw_conn slow(srv->port());
  const auto t0 = http_clock::now();
  slow.send("GET /v1/jobs HTTP/1.1\r\n");  // a request that never ends
  std::thread drip([&] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(100ms);
      slow.send("X-Drip: 1\r\n");
    }
  });
  bool closed = false;
  CHECK(silent.read_until_closed(1500ms, &closed).empty());
  CHECK(closed);
  const auto waited = http_clock::now() - t0;
  CHECK(waited >= 250ms);
  CHECK(waited < 1200ms);
  CHECK(slow.read_until_closed(1500ms, &closed).empty());  // closed although it kept sending
  CHECK(closed);
  drip.join();
  CHECK(eventually([&] { return srv->connections() == 0; }));

  raw_conn idle(srv->port());  // keep-alive: one answer, then idle until the timeout
  idle.send("GET /metrics HTTP/1.1\r\n\r\n");
  CHECK(status_of(idle.read_response()) == 200);
  idle.read_until_closed(1500ms, &closed);
  CHECK(closed);
}

TEST_CASE("server: beyond the connection cap a client gets 503", "[http]") {
  auto lim = short_limits();
  lim.max_connections = 3;
  auto srv = open_server(echo_handler, lim);
  std::vector<std::unique_ptr<raw_conn>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<raw_conn>(srv->port()));
  REQUIRE(eventually([&] { return srv->connections() == 3; }));
  auto c = client_of(*srv);
  auto refused = c->get("/v1/jobs");
  REQUIRE(refused.ok());
  CHECK(refused->status == 503);
  CHECK(refused->body.rfind("{\"error\": \"too many connections", 0) == 0);
  CHECK(srv->refused() == 1);
  CHECK(count_of(*srv, "other", 503) == 1);
  held.pop_back();
  REQUIRE(eventually([&] { return srv->connections() == 2; }));
  auto ok = c->get("/v1/jobs");
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
}

TEST_CASE("server: slow clients without the token cannot take the slots of clients with it",
          "[http][bounds]") {
  // Before: 300 slow unauthenticated connections made 85% of authenticated requests get 503.
  auto lim = short_limits();
  lim.max_connections = 8;
  lim.max_unauthenticated = 2;
  auto srv = open_server(echo_handler, lim);
  std::vector<std::unique_ptr<raw_conn>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<raw_conn>(srv->port()));
    if (i % 2) held.back()->send("GET /v1/jobs HTTP/1.1\r\nHost: x\r\n");  // a header, cut
  }
  // Each new one past two evicts the oldest still waiting for its request.
  REQUIRE(eventually([&] { return srv->connections() <= 2; }));
  auto c = client_of(*srv);
  for (int i = 0; i < 3; ++i) {
    auto ok = c->get("/v1/jobs");
    REQUIRE(ok.ok());
    CHECK(ok->status == 200);
  }
  // A client that showed the token keeps its connection however many others arrive.
  for (int i = 0; i < 6; ++i) held.push_back(std::make_unique<raw_conn>(srv->port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto again = c->get("/v1/jobs");
  REQUIRE(again.ok());
  CHECK(again->status == 200);
  CHECK(srv->accepted() == 8 + 1 + 6);  // the client's one connection, kept alive
}

TEST_CASE("server: keep-alive serves several requests on one connection, pipelined too", "[http]") {
  auto srv = open_server(echo_handler);
  auto c = client_of(*srv);
  for (int i = 0; i < 5; ++i) {
    auto got = c->post("/n", std::to_string(i), "text/plain");
    REQUIRE(got.ok());
    CHECK(got->body == "POST /n " + std::to_string(i));
  }
  CHECK(srv->accepted() == 1);

  raw_conn raw(srv->port());
  const std::string auth = "Authorization: Bearer " + http_token + "\r\n";
  raw.send("GET /a HTTP/1.1\r\n" + auth + "\r\nPOST /b HTTP/1.1\r\n" + auth +
           "Content-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\n" + auth + "Connection: close\r\n\r\n");
  CHECK(body_of(raw.read_response()) == "GET /a ");
  CHECK(body_of(raw.read_response()) == "POST /b hi");
  const auto last = raw.read_response();
  CHECK(body_of(last) == "GET /c ");
  CHECK(last.find("Connection: close") != std::string::npos);
  bool closed = false;
  raw.read_until_closed(1000ms, &closed);
  CHECK(closed);

  raw_conn old(srv->port());  // HTTP/1.0 asking for keep-alive is told it is kept
  old.send("GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  CHECK(old.read_response().find("Connection: keep-alive") != std::string::npos);
  old.send("GET /metrics HTTP/1.0\r\n\r\n");
  CHECK(status_of(old.read_response()) == 200);
}

TEST_CASE("server: Expect 100-continue gets the interim answer before the body", "[http]") {
  auto srv = open_server(echo_handler);
  raw_conn raw(srv->port());
  raw.send("POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token +
           "\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  CHECK(raw.read_response() == "HTTP/1.1 100 Continue\r\n\r\n");
  raw.send("hello");
  const auto res = raw.read_response();
  CHECK(status_of(res) == 200);
  CHECK(body_of(res) == "POST /v1/jobs hello");
}

TEST_CASE("server: close() finishes the responses in flight and ends the rest", "[http]") {
  held_request h("/v1/cluster", 1500ms);
  raw_conn idle(h.srv->port());
  REQUIRE(eventually([&] { return h.srv->connections() == 2; }));
  std::thread answerer([&] {
    std::this_thread::sleep_for(150ms);
    std::lock_guard<std::mutex> lock(h.kept.m);
    h.kept.held[0].json(200, "{\"late\": true}");
  });
  const auto took = h.close_server();
  h.asker.join();
  answerer.join();
  REQUIRE(h.got.ok());
  CHECK(h.got->status == 200);
  CHECK(h.got->body == "{\"late\": true}");
  CHECK(took >= 100ms);  // it waited for the answer ...
  CHECK(took < 1200ms);  // ... not for the grace time
  bool closed = false;
  idle.read_until_closed(500ms, &closed);
  CHECK(closed);
  CHECK(dial_loopback(h.srv->port()) < 0);  // no longer listening
}

TEST_CASE("server: close() stops after the grace time, and late answers are no-ops", "[http]") {
  held_request h("/never", 200ms);
  const auto took = h.close_server();
  h.asker.join();
  CHECK(took >= 180ms);
  CHECK(took < 1000ms);
  REQUIRE_FALSE(h.got.ok());
  CHECK(h.got.err().message.find("closed the connection before answering GET /never") !=
        std::string::npos);
  h.srv.reset();                                         // the server is gone ...
  CHECK(h.kept.held[0](200, "text/plain", "too late"));  // ... the answer is dropped
  h.kept.held.clear();                                   // and so is the responder
}

TEST_CASE("server: open refuses a missing token or handler and a taken port", "[http]") {
  // (A name that does not resolve is not tried: without DNS the lookup can take seconds.)
  auto no_token = http::server::open("127.0.0.1", 0, {}, "", echo_handler);
  REQUIRE_FALSE(no_token.ok());
  CHECK(no_token.err().kind == error_kind::invalid_input);
  auto no_handler = http::server::open("127.0.0.1", 0, {}, http_token, nullptr);
  REQUIRE_FALSE(no_handler.ok());
  auto srv = open_server(echo_handler);
  CHECK(srv->address() == "127.0.0.1:" + std::to_string(srv->port()));
  auto taken = http::server::open("127.0.0.1", srv->port(), {}, http_token, echo_handler);
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.err().message ==
        "cannot listen on 127.0.0.1:" + std::to_string(srv->port()) + ": Address already in use");
}

TEST_CASE("server: every answer forbids framing and content sniffing", "[http]") {
  auto srv = open_server(echo_handler);
  raw_conn raw(srv->port());
  raw.send("GET /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + http_token + "\r\n\r\n");
  const auto ok = raw.read_response();
  CHECK(status_of(ok) == 200);
  CHECK_THAT(ok, Catch::Contains("Content-Security-Policy: frame-ancestors 'none'"));
  CHECK_THAT(ok, Catch::Contains("X-Frame-Options: DENY"));
  CHECK_THAT(ok, Catch::Contains("X-Content-Type-Options: nosniff"));
  raw_conn refused(srv->port());  // an error answer too
  refused.send("GET /v1/jobs HTTP/1.1\r\n\r\n");
  const auto no = refused.read_response();
  CHECK(status_of(no) == 401);
  CHECK_THAT(no, Catch::Contains("frame-ancestors 'none'"));
}
