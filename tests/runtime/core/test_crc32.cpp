// Tests of the CRC-32 the on-disk formats share (runtime/core/crc32.hpp).
#include <catch2/catch.hpp>

#include <string>

#include "runtime/core/crc32.hpp"

using tessera::crc32;

TEST_CASE("crc32 is the IEEE CRC-32 and can be continued", "[crc32]") {
  const std::string s = "123456789";
  CHECK(crc32(s.data(), s.size()) == 0xCBF43926U);
  CHECK(crc32(s.data() + 4, 5, crc32(s.data(), 4)) == 0xCBF43926U);
  CHECK(crc32(nullptr, 0) == 0U);
}

TEST_CASE("crc32 of known strings matches zlib's", "[crc32]") {
  // Reference values of zlib's crc32() (and Python's zlib.crc32).
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  CHECK(crc32(fox.data(), fox.size()) == 0x414FA339U);
  const std::string a = "a";
  CHECK(crc32(a.data(), a.size()) == 0xE8B7BE43U);
}
