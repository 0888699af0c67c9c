#pragma once
/// @file histogram.hpp
/// A cumulative histogram of durations with fixed bucket bounds, as the Prometheus text
/// format exposes one (`_bucket{le=...}`, `_sum`, `_count`): the scheduler keeps one for its
/// round planning time and one for dispatch latency.

#include <cstdint>
#include <vector>

namespace tessera {

struct latency_histogram {
  /// Upper bounds of the buckets in seconds, increasing (+Inf is implied).
  std::vector<double> bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
  /// Observations at most bounds[i], for each i (cumulative, as Prometheus counts them).
  std::vector<std::uint64_t> counts = std::vector<std::uint64_t>(bounds.size(), 0);
  double sum = 0;           ///< of every observation
  std::uint64_t count = 0;  ///< observations

  /// Adds one observation of `seconds`.
  void observe(double seconds) {
    for (std::size_t i = 0; i < bounds.size(); ++i)
      if (seconds <= bounds[i]) ++counts[i];
    sum += seconds;
    ++count;
  }
};

}  // namespace tessera
