// libFuzzer target: the gate's rules (actors/gate.hpp) over what one peer sends on one
// connection: the input is a byte stream cut into frames as the gate cuts it (a header, then
// the payload length it announces), each judged by frame_payload_length and frame_verdict
// with the connection's node id carried from frame to frame, as a session does. The properties
// checked: a frame is never passed with a payload over the cap, the connection's node id is
// set only by a client handshake and never changes afterwards, and no frame passes before one.
#include <caf/node_id.hpp>

#include "actors/gate.hpp"
#include "fuzz/fuzz_support.hpp"

namespace {

caf::node_id make_node(std::uint32_t pid, std::uint8_t fill) {
  caf::node_id::default_data::host_id_type host{};
  host.fill(fill);
  return caf::make_node_id(pid, host);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tessera::actors;
  static const caf::node_id self = make_node(1, 1), other = make_node(2, 2);
  constexpr std::size_t cap = 1 << 16;
  const std::size_t hs = frame_header_size();
  caf::node_id peer;
  std::size_t at = 0;
  while (size - at >= hs) {
    auto len = frame_payload_length(data + at);
    if (!len || *len > cap) break;     // the gate closes the connection here
    if (size - at - hs < *len) break;  // the rest of the payload never came
    const caf::node_id before = peer;
    const auto verdict = frame_verdict(data + at, data + at + hs, *len, peer, self,
                                       [&](const caf::node_id& id) { return id == other; });
    if (!verdict.empty()) break;
    if (!peer) tessera::fuzz::fail("a frame passed before a client handshake");
    if (before && peer != before) tessera::fuzz::fail("the connection's node id changed");
    if (peer == self || peer == other) tessera::fuzz::fail("a handshake took a taken node id");
    at += hs + *len;
  }
  return 0;
}
