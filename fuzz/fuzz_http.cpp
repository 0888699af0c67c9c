// libFuzzer target: the HTTP request reader (runtime/service/http/request_reader.hpp) as the
// control API's server runs it on a connection's bytes: feed, check the token when the header is
// done (check_access), go on with the body, take each complete request and start on the next
// (keep-alive, pipelining), until a refusal or the end of the input. The input is fed whole,
// byte by byte and in pieces of a size taken from its length, with small limits (2 KiB of
// header, 4 KiB of body) so they are reached. Properties: the three feeds agree on every
// request they all read; a request keeps its limits (body size, a configured method,
// a path that starts the target, no Authorization among its headers); a refusal is one of
// 400, 401, 405, 413, 431 with a message, and its error body is JSON-shaped; a Host naming
// another port never passes the Host check.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "runtime/service/http/request_reader.hpp"

namespace {

using namespace tessera::http;
using tessera::fuzz::fail;
using stage = request_reader::stage;

constexpr const char* token = "tok";

/// What a connection fed these bytes would see: each request taken, then how it ended.
struct outcome {
  std::vector<std::string> requests;  ///< method, target, body and headers, flattened
  int refused = 0;                    ///< the status of the refusal (0: none)
};

/// Two feeds of the same bytes agree on every request both read. (Where they end may differ
/// on malformed input: Beast parses a header it has whole at once, but waits for the end of a
/// header that arrives in pieces, so a bad field can be refused in one and awaited in the
/// other; the server's read timeout and header limit end the wait.)
void check_agree(const outcome& a, const outcome& b, const char* what) {
  const std::size_t n = std::min(a.requests.size(), b.requests.size());
  for (std::size_t i = 0; i < n; ++i)
    if (a.requests[i] != b.requests[i]) fail(what);
}

limits fuzz_limits() {
  limits l;
  l.max_header = 2048;
  l.max_body = 4096;
  return l;
}

void check_request(const request& r, const limits& l) {
  if (r.body.size() > l.max_body) fail("a body over the limit was accepted");
  if (r.method != "GET" && r.method != "POST") fail("a method not configured was accepted");
  if (r.path.empty() || r.path[0] != '/' || r.target.compare(0, r.path.size(), r.path) != 0)
    fail("the path does not start the target");
  for (const auto& h : r.headers)
    if (equal_nocase(h.first, "authorization")) fail("the token is among the headers");
}

void check_refusal(const refusal& r) {
  const int s = r.status;
  if (s != 400 && s != 401 && s != 405 && s != 413 && s != 431) fail("an unexpected status");
  if (r.message.empty()) fail("a refusal without a message");
  const std::string body = error_body(r.message);
  if (body.compare(0, 11, "{\"error\": \"") != 0 || body.substr(body.size() - 2) != "\"}")
    fail("an error body not of the form {\"error\": \"...\"}");
  for (const char c : body)
    if (static_cast<unsigned char>(c) < 0x20) fail("a control byte in an error body");
}

/// Runs the reader over `bytes` fed in pieces of `piece` bytes, as the server does.
outcome read_all(const std::string& bytes, std::size_t piece) {
  const limits l = fuzz_limits();
  request_reader reader(l);
  outcome out;
  std::size_t at = 0;
  stage st = stage::need_more;
  for (;;) {
    if (st == stage::need_more) {
      if (at >= bytes.size()) return out;
      st = reader.feed(std::string_view(bytes).substr(at, piece));
      at += piece;
      continue;
    }
    if (st == stage::failed) {
      check_refusal(reader.failure());
      out.refused = reader.failure().status;
      return out;
    }
    if (st == stage::header_done) {
      if (auto no = check_access(reader, l, token, 8080)) {
        check_refusal(*no);
        out.refused = no->status;
        return out;
      }
      st = reader.feed({});
      continue;
    }
    const request r = reader.take();  // complete
    check_request(r, l);
    // The Host check on whatever Host it sent (not gating: the reader's paths stay reached).
    const std::string host = r.header("Host");
    if (host_allowed(host, {"localhost"}, 8080) && host.find(':') != std::string::npos &&
        host.back() != ']' && host.substr(host.rfind(':') + 1) != "8080")
      fail("a Host on another port passed");
    std::string flat = r.method + ' ' + r.target + '\n' + r.body;
    for (const auto& [name, value] : r.headers) flat += '\n' + name + ": " + value;
    out.requests.push_back(std::move(flat));
    st = reader.feed({});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes = tessera::fuzz::as_text(data, size);
  const outcome whole = read_all(bytes, bytes.size() + 1);
  check_agree(whole, read_all(bytes, 1), "fed byte by byte, a request read differently");
  check_agree(whole, read_all(bytes, 1 + size % 13), "fed in pieces, a request read differently");
  return 0;
}
