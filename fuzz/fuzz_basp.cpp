// libFuzzer target: a whole BASP frame (CAF 0.17's caf::io::basp), header then payload,
// decoded in the steps the middleman takes on a connection: the 32-byte header (refused
// unless basp::valid), the payload length it announces, then the payload by operation --
// handshakes (node id, application ids, actor id, interface), routed messages (source and
// destination node), direct and routed messages (forwarding stack, then the caf::message whose
// elements are the types register_protocol registers), monitor and down messages.
// Decoding runs on the system's own execution unit, which has no proxy registry: a non-empty
// forwarding stack or an actor handle inside a message is refused there, as it is in the
// middleman for an actor it cannot make a proxy for; that path stays outside this target.
#include <caf/io/basp/all.hpp>

#include "fuzz/fuzz_support.hpp"
#include "fuzz/protocol_system.hpp"

namespace {

namespace basp = caf::io::basp;

/// Decodes a payload of `hdr.operation`; the error of the first field that fails.
caf::error decode_payload(caf::actor_system& sys, const basp::header& hdr, const char* payload,
                          std::size_t n) {
  caf::binary_deserializer source{sys, payload, n};
  caf::node_id source_node, dest_node;
  std::vector<caf::strong_actor_ptr> forwarding_stack;
  caf::message msg;
  switch (hdr.operation) {
    case basp::message_type::server_handshake: {
      std::vector<std::string> app_ids;
      caf::actor_id aid = caf::invalid_actor_id;
      std::set<std::string> interface;
      return source(source_node, app_ids, aid, interface);
    }
    case basp::message_type::client_handshake:
      return source(source_node);
    case basp::message_type::routed_message:
      if (auto err = source(source_node, dest_node)) return err;
      return source(forwarding_stack, msg);
    case basp::message_type::direct_message:
      return source(forwarding_stack, msg);
    case basp::message_type::monitor_message:
      return source(source_node, dest_node);
    case basp::message_type::down_message: {
      caf::error reason;
      return source(source_node, dest_node, reason);
    }
    case basp::message_type::heartbeat:
      return caf::none;
  }
  return caf::sec::invalid_argument;  // valid() lets no other operation through
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& sys = tessera::fuzz::protocol_system();
  if (size < basp::header_size) return 0;
  const char* in = reinterpret_cast<const char*>(data);
  basp::header hdr;
  caf::binary_deserializer head{sys, in, basp::header_size};
  if (head(hdr) || !basp::valid(hdr)) return 0;
  if (hdr.payload_len != size - basp::header_size) return 0;  // the middleman reads exactly this
  (void)decode_payload(sys, hdr, in + basp::header_size, hdr.payload_len);
  return 0;
}
