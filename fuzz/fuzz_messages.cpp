// libFuzzer target: decoding every message a peer can send, with CAF 0.17's
// binary_deserializer as the middleman uses it. The first byte picks what the rest is:
//   k < n: a value of the k-th type name register_protocol registered (protocol_type_names:
//          the list is read from the configuration, so new messages are covered unlisted);
//   k = n: a whole caf::message (type names, then values), as a BASP payload carries it.
// A value that decodes must encode and decode back to the same bytes.
#include "fuzz/fuzz_support.hpp"
#include "fuzz/protocol_system.hpp"

namespace {

using bytes = std::vector<char>;

/// Encodes `x` (a type-erased value or a caf::message).
template <class T>
bytes encode(caf::actor_system& sys, T& x) {
  bytes out;
  caf::binary_serializer sink{sys, out};
  if (auto err = sink(x)) tessera::fuzz::fail("a decoded value does not encode");
  return out;
}

/// Decodes `x` from `in`; true on success.
template <class T>
bool decode(caf::actor_system& sys, const char* in, std::size_t n, T& x) {
  caf::binary_deserializer source{sys, in, n};
  return !source(x);
}

/// Checks that `x`, decoded from fuzz input, encodes and decodes stably; `fresh` is an empty
/// value of the same type.
template <class T>
void check_round_trip(caf::actor_system& sys, T& x, T& fresh) {
  const bytes once = encode(sys, x);
  if (!decode(sys, once.data(), once.size(), fresh))
    tessera::fuzz::fail("an encoded value does not decode");
  if (encode(sys, fresh) != once) tessera::fuzz::fail("a value changes through encode/decode");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& sys = tessera::fuzz::protocol_system();
  static const auto names = tessera::fuzz::protocol_type_names(sys.config());
  if (names.empty()) tessera::fuzz::fail("register_protocol registered no type");
  if (size == 0) return 0;
  const std::size_t pick = data[0] % (names.size() + 1);
  const char* in = reinterpret_cast<const char*>(data + 1);
  if (pick == names.size()) {
    caf::message msg, fresh;
    if (decode(sys, in, size - 1, msg)) check_round_trip(sys, msg, fresh);
    return 0;
  }
  const auto& factory = sys.config().value_factories_by_name.at(names[pick]);
  auto value = factory();
  auto fresh = factory();
  if (decode(sys, in, size - 1, *value)) check_round_trip(sys, *value, *fresh);
  return 0;
}
