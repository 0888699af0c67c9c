#include "runtime/core/crc32.hpp"

#include <array>

namespace tessera {

namespace {

/// The CRC-32 lookup table for the reflected polynomial 0xEDB88320.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1U) ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto crc_table = make_crc_table();

}  // namespace

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = crc_table[(crc ^ p[i]) & 0xFFU] ^ (crc >> 8);
  return ~crc;
}

}  // namespace tessera
