#pragma once
/// @file random.hpp
/// Portable, seeded random numbers for runtime/node/train. The standard distributions are
/// implementation-defined, so the generators here are spelled out (splitmix64 and
/// Box-Muller): the same seed gives the same numbers with any standard library.
/// Internal to runtime/node/train: not part of the public API.

#include <cmath>
#include <cstdint>

namespace tessera::train::detail {

/// The splitmix64 finaliser: a bijective 64-bit mix with good avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A counter-based draw: a 64-bit value that is a pure function of (key, a, b). Training uses
/// it for everything decided per step (which examples form the step's batch), so a shard's
/// gradient depends only on the step and never on which object or thread computed it.
inline std::uint64_t counter_hash(std::uint64_t key, std::uint64_t a, std::uint64_t b) {
  return mix64(mix64(mix64(key ^ 0x6a09e667f3bcc909ULL) + a) ^ (b * 0x9e3779b97f4a7c15ULL));
}

/// A value in [0, n) from a 64-bit draw (multiply-shift; exact for n < 2^32).
inline std::uint64_t below(std::uint64_t draw, std::uint64_t n) { return ((draw >> 32) * n) >> 32; }

/// A sequential splitmix64 generator for data synthesis and parameter initialisation.
class rng {
 public:
  /// A generator whose stream is a pure function of `seed`.
  explicit rng(std::uint64_t seed) : state_(seed) {}

  /// The next 64-bit value.
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }
  /// A double uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// A standard normal draw (Box-Muller; the second value of each pair is discarded so the
  /// stream has no hidden state beyond `state_`).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// A value in [0, n).
  std::uint64_t below_n(std::uint64_t n) { return below(next(), n); }

 private:
  std::uint64_t state_;
};

}  // namespace tessera::train::detail
