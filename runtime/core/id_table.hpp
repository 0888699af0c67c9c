#pragma once
/// @file id_table.hpp
/// Per-job state kept across rounds, by job id: a flat array over the small non-negative ids
/// traces and the runtime hand out (0..N-1), a hash map for any other id, and a list of the
/// ids present so a pass over them costs what is present, not the id range. Replaces
/// node-based hash maps that a 10,000-GPU simulation visited every round for every active job
/// (each visit a cache miss on a node of its own).
///
/// Iteration order is the list's (insertions, with removals swapped from the end): callers
/// use it only where order does not matter (clearing, pruning).

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/core/model.hpp"

namespace tessera {

template <class T>
class id_table {
 public:
  /// Ids in [0, flat_limit) live in the flat array (grown to the largest id seen).
  explicit id_table(job_id flat_limit = job_id{1} << 20) : flat_limit_(flat_limit) {}

  std::size_t size() const { return ids_.size(); }

  /// The value of `id`, or null when absent.
  const T* find(job_id id) const {
    if (flat(id)) {
      const auto i = static_cast<std::size_t>(id);
      return i < slot_.size() && slot_[i] != absent ? &flat_[i] : nullptr;
    }
    auto it = rest_.find(id);
    return it == rest_.end() ? nullptr : &it->second.first;
  }
  T* find(job_id id) { return const_cast<T*>(static_cast<const id_table&>(*this).find(id)); }

  /// The value of `id`, default-constructed when absent.
  T& operator[](job_id id) {
    if (T* v = find(id)) return *v;
    if (flat(id)) {
      const auto i = static_cast<std::size_t>(id);
      if (i >= slot_.size()) {
        slot_.resize(i + 1, absent);
        flat_.resize(i + 1);
      }
      slot_[i] = ids_.size();
      ids_.push_back(id);
      flat_[i] = T{};
      return flat_[i];
    }
    auto& entry = rest_[id];
    entry.second = ids_.size();
    ids_.push_back(id);
    return entry.first;
  }

  /// Calls f(id, value) for every id present.
  template <class F>
  void for_each(F&& f) {
    for (const job_id id : ids_) f(id, *find(id));
  }

  /// Removes every id for which pred(id, value) holds.
  template <class P>
  void erase_if(P&& pred) {
    for (std::size_t k = ids_.size(); k-- > 0;)
      if (pred(ids_[k], *find(ids_[k]))) erase_at(k);
  }

 private:
  static constexpr std::size_t absent = static_cast<std::size_t>(-1);
  bool flat(job_id id) const { return id >= 0 && id < flat_limit_; }
  std::size_t& position(job_id id) {
    return flat(id) ? slot_[static_cast<std::size_t>(id)] : rest_.find(id)->second.second;
  }
  /// Removes ids_[k]: the last id takes its place in the list.
  void erase_at(std::size_t k) {
    const job_id id = ids_[k];
    const job_id last = ids_.back();
    position(last) = k;
    ids_[k] = last;
    ids_.pop_back();
    if (flat(id)) {
      flat_[static_cast<std::size_t>(id)] = T{};  // releases what it held
      slot_[static_cast<std::size_t>(id)] = absent;
    } else {
      rest_.erase(id);
    }
  }

  job_id flat_limit_;
  std::vector<T> flat_;
  std::vector<std::size_t> slot_;  ///< per flat id: its place in ids_, or absent
  std::unordered_map<job_id, std::pair<T, std::size_t>> rest_;
  std::vector<job_id> ids_;  ///< the ids present
};

}  // namespace tessera
