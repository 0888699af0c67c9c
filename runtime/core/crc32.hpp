#pragma once
/// @file crc32.hpp
/// CRC-32 for the on-disk formats that carry checksums (checkpoints, the journal).

#include <cstddef>
#include <cstdint>

namespace tessera {

/// CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of `n` bytes at `data`, continuing from
/// `crc` (pass a previous result to checksum data in pieces; 0 to start).
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0);

}  // namespace tessera
