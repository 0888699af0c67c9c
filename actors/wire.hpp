#pragma once
/// @file wire.hpp
/// How the protocol's floating-point values go on the wire. CAF 0.17's binary serializer packs
/// a double with its own IEEE-754 routine (caf/detail/ieee_754.hpp, pack754), which never
/// returns for +-infinity (it halves the value until it is below 2) and garbles NaN and
/// subnormal values; and the bytes a peer sends can decode to infinity. One infinite loss or
/// throughput would hang the process that serialises it. The protocol therefore sends every
/// double as its 64-bit IEEE-754 pattern -- for finite normal values the same 8 bytes CAF's
/// packing writes -- alone, in vectors and in string-keyed maps. Other inspectors (CAF's
/// to_string) see the doubles themselves. Byte vectors go as strings (see on_wire below).

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/deserializer.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/serializer.hpp>

namespace tessera::actors::wire {

/// The bit pattern of `x`.
inline std::uint64_t bits_of(double x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

/// The double with bit pattern `b`.
inline double double_of(std::uint64_t b) {
  double x = 0;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

/// A field of type T sent as `Wire` (a T made of bit patterns): `to_wire` and `from_wire`
/// convert. Serialising writes the converted copy; deserialising reads one and converts back.
template <class T, class Wire, Wire (*to_wire)(const T&), T (*from_wire)(const Wire&)>
struct as_bits {
  T& value;  ///< the field
};

/// Serialises, deserialises or shows (any other inspector) a field sent as bits.
template <class Inspector, class T, class Wire, Wire (*to_wire)(const T&),
          T (*from_wire)(const Wire&)>
typename Inspector::result_type inspect(Inspector& f, as_bits<T, Wire, to_wire, from_wire>& x) {
  if constexpr (std::is_base_of<caf::serializer, Inspector>::value) {
    Wire w = to_wire(x.value);
    return f(w);
  } else if constexpr (std::is_base_of<caf::deserializer, Inspector>::value) {
    Wire w{};
    auto err = f(w);
    if (!err) x.value = from_wire(w);
    return err;
  } else {
    return f(x.value);
  }
}

inline std::uint64_t double_to_wire(const double& x) { return bits_of(x); }
inline double double_from_wire(const std::uint64_t& b) { return double_of(b); }

inline std::vector<std::uint64_t> vector_to_wire(const std::vector<double>& xs) {
  std::vector<std::uint64_t> out;
  out.reserve(xs.size());
  for (double x : xs) out.push_back(bits_of(x));
  return out;
}
inline std::vector<double> vector_from_wire(const std::vector<std::uint64_t>& bs) {
  std::vector<double> out;
  out.reserve(bs.size());
  for (auto b : bs) out.push_back(double_of(b));
  return out;
}

using double_map = std::map<std::string, double>;
using bits_map = std::map<std::string, std::uint64_t>;
inline bits_map map_to_wire(const double_map& xs) {
  bits_map out;
  for (const auto& [k, v] : xs) out.emplace_hint(out.end(), k, bits_of(v));
  return out;
}
inline double_map map_from_wire(const bits_map& bs) {
  double_map out;
  for (const auto& [k, b] : bs) out.emplace_hint(out.end(), k, double_of(b));
  return out;
}

using byte_vector = std::vector<std::uint8_t>;
inline std::string bytes_to_wire(const byte_vector& xs) {
  return std::string(xs.begin(), xs.end());
}
inline byte_vector bytes_from_wire(const std::string& s) { return byte_vector(s.begin(), s.end()); }

/// Any other field goes to the inspector as it is.
template <class T>
T& on_wire(T& x) {
  return x;
}
/// A double goes as its bit pattern.
inline auto on_wire(double& x) {
  return as_bits<double, std::uint64_t, double_to_wire, double_from_wire>{x};
}
/// A vector of doubles goes as a vector of bit patterns.
inline auto on_wire(std::vector<double>& x) {
  return as_bits<std::vector<double>, std::vector<std::uint64_t>, vector_to_wire, vector_from_wire>{
      x};
}
/// A byte vector goes as a string: CAF 0.17 resizes a byte vector to the length a peer
/// announces before checking that the bytes are there (a 4 GiB allocation from 5 bytes;
/// found by fuzz_messages), while it checks a string's length against the input first.
/// Same bytes on the wire.
inline auto on_wire(byte_vector& x) {
  return as_bits<byte_vector, std::string, bytes_to_wire, bytes_from_wire>{x};
}
/// A string-keyed map of doubles goes as a map of bit patterns.
inline auto on_wire(double_map& x) {
  return as_bits<double_map, bits_map, map_to_wire, map_from_wire>{x};
}

/// Inspects the fields `xs` of the type `name`, doubles as bits (every inspect of the
/// protocol goes through here, so a double field added to a message is covered).
template <class Inspector, class... Ts>
typename Inspector::result_type fields(Inspector& f, const char* name, Ts&... xs) {
  return f(caf::meta::type_name(name), on_wire(xs)...);
}

/// A named field of a record. A record with a field list (a `fields_of(x, visit)` found by
/// argument-dependent lookup, calling `visit(type name, field(name, x.member)...)`) lists its
/// fields once: CAF's inspectors take the values (inspect_fields), JSON writers the names
/// with the values (actors/record_json.hpp).
template <class T>
struct named {
  const char* name;  ///< the field's name (its JSON key)
  T& value;          ///< the field
};

/// The field `value` named `name`.
template <class T>
named<T> field(const char* name, T& value) {
  return {name, value};
}

/// Inspects a record through its field list, doubles as bits (as `fields`).
template <class Inspector, class T>
typename Inspector::result_type inspect_fields(Inspector& f, T& x) {
  return fields_of(x, [&f](const char* type, auto... fs) { return fields(f, type, fs.value...); });
}

}  // namespace tessera::actors::wire
