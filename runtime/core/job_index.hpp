#pragma once
/// @file job_index.hpp
/// Position of each job of a list by its id, rebuilt every round by the simulator's hot
/// paths (executor, mechanism, plan checks, progress) in place of per-round hash maps of the
/// active jobs. When the ids' range is at most 4x the jobs plus 2^20 (a trace's ids 0..N-1
/// seen through its active jobs, which span from the oldest unfinished job to the newest)
/// it is a flat table over the id range, looked up without hashing; otherwise a hash map.
/// Rebuilding in place (`assign`) reuses the table and clears only the entries it had set,
/// so a rebuild costs O(jobs), not O(range), and allocates nothing once the table is sized.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/core/model.hpp"

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
    clear();
    if (n == 0) return;
    job_id lo = id_at(0), hi = lo;
    for (std::size_t i = 1; i < n; ++i) {
      lo = std::min(lo, id_at(i));
      hi = std::max(hi, id_at(i));
    }
    const std::uint64_t range = offset(hi, lo);
    dense_ = range < 4 * static_cast<std::uint64_t>(n) + (1u << 20);
    if (!dense_) {
      hashed_.reserve(n);
      for (std::size_t i = 0; i < n; ++i) hashed_[id_at(i)] = i;
      return;
    }
    base_ = lo;
    if (flat_.size() <= range) flat_.resize(static_cast<std::size_t>(range) + 1, npos);
    set_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      set_[i] = static_cast<std::size_t>(offset(id_at(i), lo));
      flat_[set_[i]] = i;
    }
  }

  /// Position of job `id`, npos when it is not in the list.
  std::size_t find(job_id id) const {
    if (dense_) {
      if (id < base_) return npos;
      const std::uint64_t at = offset(id, base_);
      return at < flat_.size() ? flat_[static_cast<std::size_t>(at)] : npos;
    }
    auto it = hashed_.find(id);
    return it == hashed_.end() ? npos : it->second;
  }
  bool contains(job_id id) const { return find(id) != npos; }

 private:
  /// id - base without signed overflow (id >= base).
  static std::uint64_t offset(job_id id, job_id base) {
    return static_cast<std::uint64_t>(id) - static_cast<std::uint64_t>(base);
  }
  /// Empties the index, keeping its storage (flat_ all npos again).
  void clear() {
    for (std::size_t at : set_) flat_[at] = npos;
    set_.clear();
    hashed_.clear();
  }

  bool dense_ = true;
  job_id base_ = 0;
  std::vector<std::size_t> flat_;  ///< position by id - base_, npos where none
  std::vector<std::size_t> set_;   ///< the entries of flat_ set by the last assign
  std::unordered_map<job_id, std::size_t> hashed_;
};

}  // namespace tessera
