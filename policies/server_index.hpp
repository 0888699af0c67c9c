#pragma once
/// @file server_index.hpp
/// Finding free GPUs without scanning every server. A greedy placement policy asks, for each
/// job, "which server with free GPUs is best for this job"; answered by a scan of all S
/// servers it costs O(S) per job and O(M S) per round, which dominates at 10,000 GPUs with
/// tens of thousands of queued jobs. Most servers are interchangeable for every job: same GPU
/// type, speed and size. This index groups them into *classes* and, within a round, keeps
/// each class's servers bucketed by free GPU count in id order, so a policy looks at a few
/// (class, free count) buckets and takes the lowest id it may use.
///
/// Classes are data-driven: they start from a key per server (e.g. a pricing pool) and are
/// split by `refine` whenever a job's per-server values (task times, rates) differ inside a
/// class, so two servers share a class only if every job seen so far values them equally.
/// A policy refines with each per-(job type, scale) value vector it builds, and an answer
/// drawn from a class's buckets is then the same as a scan of its servers in id order would
/// give. Cost: `refine` O(S) when nothing splits (O(S log S) when something does); per
/// round, `free_buckets` costs O(S) to build and O(log S) per change.

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace tessera {

/// A partition of servers 0..S-1 into classes of servers every job has valued equally.
class server_classes {
 public:
  server_classes() = default;
  /// One class per distinct value of `key` (servers with equal keys share a class).
  explicit server_classes(const std::vector<int>& key);
  /// Splits classes so that the servers of each class have equal a[u] and equal b[u]
  /// (compared exactly). Returns true when some class split (the version then changes).
  bool refine(const std::vector<double>& a, const std::vector<double>& b);
  /// The class of server u.
  int of(int u) const { return class_of_[static_cast<std::size_t>(u)]; }
  /// Number of classes.
  int count() const { return static_cast<int>(first_.size()); }
  /// Number of servers.
  int servers() const { return static_cast<int>(class_of_.size()); }
  /// The lowest server id of class c: any member stands for the class's values.
  int first(int c) const { return first_[static_cast<std::size_t>(c)]; }
  /// Changes whenever the partition does.
  std::uint64_t version() const { return version_; }

 private:
  void number_by(const std::vector<std::size_t>& group);
  std::vector<int> class_of_;
  std::vector<int> first_;
  std::uint64_t version_ = 0;
};

/// One round's free GPUs per server, bucketed by (class, free count); servers with no free
/// GPU are in no bucket.
class free_buckets {
 public:
  free_buckets() = default;
  /// Buckets for `free` (GPUs free per server) under `classes`.
  free_buckets(const server_classes& classes, const std::vector<int>& free);
  /// Server u's free count changed from `from` to `to`.
  void update(int u, int c, int from, int to);
  /// The servers of class c with exactly f free GPUs, ids ascending (empty when none).
  const std::set<int>& at(int c, int f) const;
  /// The largest free count any server had when built (bucket counts run 1..max_free()).
  int max_free() const { return max_free_; }
  /// The lowest id in at(c, f) for which skip(id) is false; -1 when there is none.
  template <class Skip>
  int first(int c, int f, Skip skip) const {
    for (const int u : at(c, f))
      if (!skip(u)) return u;
    return -1;
  }
  /// Calls take(u) for the servers of the classes `cls` with f free GPUs, ids ascending
  /// across the classes, skipping those skip(u) rejects, until take returns true; returns
  /// whether it did.
  template <class Skip, class Take>
  bool walk(const std::vector<int>& cls, int f, Skip skip, Take take) const {
    std::vector<std::pair<std::set<int>::const_iterator, std::set<int>::const_iterator>> it;
    for (const int c : cls) it.emplace_back(at(c, f).begin(), at(c, f).end());
    for (;;) {
      std::size_t low = it.size();
      for (std::size_t i = 0; i < it.size(); ++i)
        if (it[i].first != it[i].second && (low == it.size() || *it[i].first < *it[low].first))
          low = i;
      if (low == it.size()) return false;
      const int u = *it[low].first++;
      if (!skip(u) && take(u)) return true;
    }
  }

 private:
  std::vector<std::vector<std::set<int>>> buckets_;  ///< [class][free count]
  int max_free_ = 0;
};

}  // namespace tessera
