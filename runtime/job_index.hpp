#pragma once
/// @file job_index.hpp
/// Position of each job of a list by its id, rebuilt every round by the simulator's hot
/// paths (executor, mechanism, plan checks) in place of per-round hash maps of the active
/// jobs. When the ids are dense (their range at most 4x the jobs, plus 64: a trace's ids
/// 0..N-1 seen through its active jobs) it is a flat table over the id range, built in O(n)
/// with no per-job allocation and looked up without hashing; otherwise a hash map.
/// A job_index may be rebuilt in place (`assign`), reusing its storage across rounds.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/model.hpp"

namespace tessera {

class job_index {
 public:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  job_index() = default;
  /// Indexes `n` jobs whose ids are `id_at(0..n-1)`; on repeated ids the last one wins.
  template <class IdAt>
  job_index(std::size_t n, IdAt id_at) {
    assign(n, id_at);
  }

  /// As the constructor, reusing this index's storage.
  template <class IdAt>
  void assign(std::size_t n, IdAt id_at) {
    hashed_.clear();
    flat_.clear();
    if (n == 0) return;
    job_id lo = id_at(0), hi = lo;
    for (std::size_t i = 1; i < n; ++i) {
      lo = std::min(lo, id_at(i));
      hi = std::max(hi, id_at(i));
    }
    const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    dense_ = range < 4 * static_cast<std::uint64_t>(n) + 64;
    if (dense_) {
      base_ = lo;
      flat_.assign(static_cast<std::size_t>(range) + 1, npos);
      for (std::size_t i = 0; i < n; ++i) flat_[static_cast<std::size_t>(static_cast<std::uint64_t>(id_at(i)) -
                                     static_cast<std::uint64_t>(lo))] = i;
      return;
    }
    hashed_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) hashed_[id_at(i)] = i;
  }

  /// Position of job `id`, npos when it is not in the list.
  std::size_t find(job_id id) const {
    if (dense_) {
      if (id < base_) return npos;
      const std::uint64_t at = static_cast<std::uint64_t>(id) - static_cast<std::uint64_t>(base_);
      return at < flat_.size() ? flat_[static_cast<std::size_t>(at)] : npos;
    }
    auto it = hashed_.find(id);
    return it == hashed_.end() ? npos : it->second;
  }
  bool contains(job_id id) const { return find(id) != npos; }

 private:
  bool dense_ = true;
  job_id base_ = 0;
  std::vector<std::size_t> flat_;
  std::unordered_map<job_id, std::size_t> hashed_;
};

}  // namespace tessera
