#pragma once
/// @file bytes.hpp
/// Little-endian byte encoding for trainable state and checkpoint headers, and the FNV-1a 64
/// hash used for fingerprints. Internal to runtime/node/train: not part of the public API.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessera::train::detail {

/// FNV-1a 64 offset basis: the hash of nothing.
constexpr std::uint64_t fnv1a64_basis = 0xcbf29ce484222325ULL;

/// FNV-1a 64 of `n` bytes at `data`, continuing from `h` (pass the previous result to chain).
inline std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h = fnv1a64_basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/// Appends fixed-width little-endian values to a byte vector.
class byte_writer {
 public:
  /// Appends the low `bytes` bytes of `v`, least significant first.
  void put_uint(std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  /// Appends a 32-bit unsigned value.
  void u32(std::uint32_t v) { put_uint(v, 4); }
  /// Appends a 64-bit unsigned value.
  void u64(std::uint64_t v) { put_uint(v, 8); }
  /// Appends a 64-bit signed value (two's complement).
  void i64(std::int64_t v) { put_uint(static_cast<std::uint64_t>(v), 8); }
  /// Appends raw bytes.
  void raw(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  /// Appends a length-prefixed string.
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  /// Appends a length-prefixed float array, each float as its IEEE-754 bit pattern.
  void floats(const std::vector<float>& v) {
    u64(v.size());
    for (float f : v) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);
      u32(bits);
    }
  }
  /// The bytes written so far.
  std::vector<std::uint8_t>& bytes() { return out_; }

 private:
  std::vector<std::uint8_t> out_;
};

/// Reads fixed-width little-endian values from a byte range; every getter returns false when
/// the range is exhausted, so a truncated buffer is reported instead of read past.
class byte_reader {
 public:
  /// Reads from `n` bytes at `data`; the bytes must outlive the reader.
  byte_reader(const std::uint8_t* data, std::size_t n) : p_(data), n_(n) {}

  /// Reads `bytes` bytes as an unsigned little-endian value.
  bool get_uint(std::uint64_t& v, int bytes) {
    if (remaining() < static_cast<std::size_t>(bytes)) return false;
    v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += static_cast<std::size_t>(bytes);
    return true;
  }
  /// Reads a 32-bit unsigned value.
  bool u32(std::uint32_t& v) {
    std::uint64_t x = 0;
    if (!get_uint(x, 4)) return false;
    v = static_cast<std::uint32_t>(x);
    return true;
  }
  /// Reads a 64-bit unsigned value.
  bool u64(std::uint64_t& v) { return get_uint(v, 8); }
  /// Reads a 64-bit signed value.
  bool i64(std::int64_t& v) {
    std::uint64_t x = 0;
    if (!get_uint(x, 8)) return false;
    v = static_cast<std::int64_t>(x);
    return true;
  }
  /// Reads `n` raw bytes.
  bool raw(void* out, std::size_t n) {
    if (remaining() < n) return false;
    std::memcpy(out, p_ + pos_, n);
    pos_ += n;
    return true;
  }
  /// Reads a length-prefixed string of at most `max_len` bytes.
  bool str(std::string& s, std::size_t max_len = 1 << 16) {
    std::uint64_t n = 0;
    if (!u64(n) || n > max_len || n > remaining()) return false;
    s.assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return true;
  }
  /// Reads a length-prefixed float array.
  bool floats(std::vector<float>& v) {
    std::uint64_t n = 0;
    if (!u64(n) || n > remaining() / 4) return false;
    v.resize(static_cast<std::size_t>(n));
    for (auto& f : v) {
      std::uint32_t bits = 0;
      if (!u32(bits)) return false;
      std::memcpy(&f, &bits, sizeof f);
    }
    return true;
  }
  /// Bytes not yet read.
  std::size_t remaining() const { return n_ - pos_; }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

}  // namespace tessera::train::detail
