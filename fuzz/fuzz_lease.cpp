// libFuzzer target: the lease channel (runtime/node/program/lease_protocol.hpp, lease_server.hpp).
// The input is parsed as one line by parse_request; then it is cut at '\n' and played line by
// line into a lease_slot after a valid hello, as the server does (parse, order_error,
// on_request; a refused line ends the connection). Properties: an accepted request keeps its
// bounds (counts in [0, 2^53], finite numbers, an average's sizes at most 2^42 values in all);
// an average's sizes go through format_averaged and parse_request unchanged, and through the
// slot (take_average, answer_average); every reply is one line of the op its request calls
// for. (The buffers themselves travel in shared memory, which the server's tests cover.)
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "fuzz/fuzz_support.hpp"
#include "runtime/node/program/lease_server.hpp"

namespace {

using namespace tessera::program;
using tessera::fuzz::fail;

constexpr std::int64_t max_count = std::int64_t{1} << 53;

/// An averaged line read back as a program's average (same fields, another op).
void check_averaged_round_trip(const std::vector<std::size_t>& sizes, const std::string& line) {
  std::string as_request = line;
  const std::string from = "\"op\":\"averaged\"";
  const auto at = as_request.find(from);
  if (at == std::string::npos || line.back() != '\n') fail("averaged line malformed");
  as_request.replace(at, from.size(), "\"op\":\"average\"");
  as_request.pop_back();
  auto back = parse_request(as_request);
  if (!back) fail("format_averaged wrote a line parse_request refuses");
  if (back->sizes != sizes) fail("averaged round trip differs");
}

/// The bounds every accepted request keeps.
void check_request(const lease_request& r) {
  if (r.steps < 0 || r.steps > max_count || r.pid < 0 || r.pid > max_count)
    fail("a count out of [0, 2^53] was accepted");
  if (r.own_step && (*r.own_step < 0 || *r.own_step > max_count)) fail("step out of bounds");
  if ((r.loss && !std::isfinite(*r.loss)) || (r.accuracy && !std::isfinite(*r.accuracy)))
    fail("a non-finite number was accepted");
  std::size_t sum = 0;
  for (const auto s : r.sizes) sum += s;
  if (sum > (std::size_t{1} << 42)) fail("an average over 2^42 values was accepted");
  if (r.op == request_op::average)
    check_averaged_round_trip(r.sizes, format_averaged(r.sizes, 2, 9));
}

/// One accepted, in-order request through the slot, with the reply it calls for.
void play(lease_slot& slot, const lease_request& r, std::string& sent) {
  const std::string reply = slot.on_request(r);
  const auto v = slot.view();
  if (r.op == request_op::average) {
    if (!reply.empty() || !v.average_waiting) fail("an average was answered at once");
    std::vector<std::size_t> sizes;
    std::shared_ptr<shared_floats> shared;
    if (!slot.take_average(sizes, shared) || sizes != r.sizes)
      fail("the slot did not keep the average's sizes");
    sent.clear();
    slot.answer_average(sizes, 3, 11);
    if (sent.empty() || slot.view().average_waiting) fail("answer_average sent nothing");
    check_averaged_round_trip(sizes, sent);
    return;
  }
  if (r.op == request_op::renew) {  // answered later: renewed afresh, steps from zero
    if (!reply.empty() || !v.renew_waiting) fail("a renew was answered at once");
    sent.clear();
    if (!slot.renew(slot.terms_now(), std::nullopt, 0) ||
        sent.find("\"op\":\"lease\"") == std::string::npos)
      fail("renew() sent no lease");
    if (slot.view().steps != 0 || slot.view().renew_waiting) fail("a renewal kept old steps");
    return;
  }
  const char* op = r.op == request_op::complete ? "\"op\":\"exit\"" : "\"op\":\"lease\"";
  if (reply.find(op) == std::string::npos || reply.find('\n') != reply.size() - 1)
    fail("a reply of the wrong op or not one line");
  // The reported steps, never past the lease's 1000 (docs/lease-protocol.md).
  if (v.steps != std::min<std::int64_t>(r.steps, 1000)) fail("the view lost the reported steps");
  if (slot.terms_now().steps != 1000 || slot.terms_now().seconds != -1) fail("terms moved");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = tessera::fuzz::as_text(data, size);
  if (auto r = parse_request(text)) check_request(*r);

  lease_terms terms;
  terms.steps = 1000;
  terms.renewable = true;
  auto slot = std::make_shared<lease_slot>(terms);
  std::string sent;
  slot->set_sender([&sent](std::string line) { sent = std::move(line); });
  lease_request hello;
  hello.token = "t";
  hello.renew = true;
  slot->on_request(hello);
  std::size_t at = 0;
  while (at < text.size()) {
    const auto nl = text.find('\n', at);
    const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    auto r = parse_request(line);
    if (!r) break;  // the server closes the connection here
    check_request(*r);
    if (!order_error(*r, slot->view()).empty()) break;
    play(*slot, *r, sent);
  }
  return 0;
}
