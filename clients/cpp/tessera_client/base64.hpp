#pragma once
/// @file base64.hpp
/// The float buffers of `average` on the wire for the C++ lease client (tessera_client.hpp,
/// which includes this part): little-endian float32 values as standard base64.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tessera_client {
namespace detail {

inline const char* base64_alphabet() {
  return "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

/// The buffers' float32 values, little-endian and concatenated, as standard base64.
inline std::string encode_floats(const std::vector<std::vector<float>>& buffers) {
  std::vector<unsigned char> raw;
  for (const auto& b : buffers)
    for (float f : b) {
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int k = 0; k < 4; ++k) raw.push_back(static_cast<unsigned char>(u >> (8 * k)));
    }
  const char* abc = base64_alphabet();
  std::string out;
  out.reserve((raw.size() + 2) / 3 * 4);
  for (std::size_t k = 0; k < raw.size(); k += 3) {
    std::uint32_t n = std::uint32_t(raw[k]) << 16;
    if (k + 1 < raw.size()) n |= std::uint32_t(raw[k + 1]) << 8;
    if (k + 2 < raw.size()) n |= raw[k + 2];
    out += abc[(n >> 18) & 63];
    out += abc[(n >> 12) & 63];
    out += k + 1 < raw.size() ? abc[(n >> 6) & 63] : '=';
    out += k + 2 < raw.size() ? abc[n & 63] : '=';
  }
  return out;
}

/// Decodes canonical base64 (padded, unused bits zero) of little-endian float32 values;
/// nullopt when it is not that.
inline std::optional<std::vector<float>> decode_floats(const std::string& text) {
  std::size_t n = text.size();
  if (n % 4) return std::nullopt;
  std::size_t pad = n >= 1 && text[n - 1] == '=' ? (n >= 2 && text[n - 2] == '=' ? 2 : 1) : 0;
  std::vector<unsigned char> raw;
  raw.reserve(n / 4 * 3);
  for (std::size_t k = 0; k < n; k += 4) {
    std::uint32_t group = 0;
    for (std::size_t j = k; j < k + 4; ++j) {
      const char* p = j < n - pad && text[j] ? std::strchr(base64_alphabet(), text[j]) : nullptr;
      if (!p && j < n - pad) return std::nullopt;
      group = (group << 6) | std::uint32_t(p ? p - base64_alphabet() : 0);
    }
    for (int b = 0; b < 3; ++b) raw.push_back(static_cast<unsigned char>(group >> (16 - 8 * b)));
  }
  for (std::size_t k = 0; k < pad; ++k) {
    if (raw.back() != 0) return std::nullopt;  // bits after the last byte must be zero
    raw.pop_back();
  }
  if (raw.size() % 4) return std::nullopt;
  std::vector<float> out(raw.size() / 4);
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::uint32_t u = 0;
    for (int j = 0; j < 4; ++j) u |= std::uint32_t(raw[4 * k + std::size_t(j)]) << (8 * j);
    std::memcpy(&out[k], &u, 4);
  }
  return out;
}

}  // namespace detail
}  // namespace tessera_client
