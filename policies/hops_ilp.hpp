#pragma once
/// @file hops_ilp.hpp
/// Hops' per-round placement ILP (step 4 of policies/hops.hpp), exposed for tests and the
/// bench: the instance (server classes, each window job's configurations and their values),
/// the fill patterns that enforce per-server capacity, and the CBC solve.
///
/// Model: one binary column per (job, configuration) with the configuration's value as its
/// objective; one integer column n[k][p] in [0, servers of class k] per class k and fill
/// pattern p. Rows: sum_c y[i][c] <= 1 per job; per class, whole servers used plus
/// sum_p n[k][p] <= servers of k; per class and share size d, shares of size d minus
/// sum_p mult_p(d) n[k][p] <= 0. Classes no configuration uses get no rows.

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/solver/milp.hpp"

namespace tessera {

/// Servers that are interchangeable for every job: same GPU type, speed factor and size.
struct hops_class {
  std::vector<int> servers;  ///< server ids, ascending
  int capacity = 0;          ///< GPUs per server
};

/// Sizes of a configuration's partial-server shares, kept inline (hops makes at most two:
/// {g}, {remainder} or two halves), so that configurations copy without allocating: a round
/// at 10,000 GPUs copies tens of thousands of them.
class share_sizes {
 public:
  static constexpr std::size_t max_size = 4;
  share_sizes() = default;
  share_sizes(std::initializer_list<int> v) {
    for (int d : v) push_back(d);
  }
  /// Appends a size; std::length_error past max_size.
  void push_back(int d) {
    if (n_ == max_size) throw std::length_error("hops_config: more than 4 partial shares");
    v_[n_++] = d;
  }
  const int* begin() const { return v_; }
  const int* end() const { return v_ + n_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::vector<int> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const share_sizes& a, const share_sizes& b) {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (a.v_[i] != b.v_[i]) return false;
    return true;
  }
  friend bool operator!=(const share_sizes& a, const share_sizes& b) { return !(a == b); }

 private:
  int v_[max_size] = {};
  std::size_t n_ = 0;
};

/// One configuration of one job.
struct hops_config {
  int cls = 0;            ///< index into the class list
  int gpus = 0;           ///< GPUs in total
  int whole_servers = 0;  ///< servers it fills entirely
  share_sizes pieces;     ///< sizes of its partial-server shares (each <= capacity)
  double throughput = 0;  ///< steps/s (estimate)
  bool stay = false;      ///< matches the job's placement in the previous round
};

/// An ILP instance: classes, and per job its configurations and objective weights (already
/// including G and the stay bonus).
struct hops_ilp_input {
  std::vector<hops_class> classes;
  std::vector<std::vector<hops_config>> configs;  ///< per job
  std::vector<std::vector<double>> value;         ///< per job and configuration, > 0
  /// 0: one binary column per (job, configuration). > 0: jobs with the same configurations
  /// and proportional values (value[i][c] = w_i u[c]) whose weights w_i = max_c value[i][c]
  /// fall in the same bin [(1+t)^b, (1+t)^(b+1)) share one integer column per configuration,
  /// valued at the bin's mean weight; see `solve_hops_ilp`.
  double group_tolerance = 0;
};

/// An ILP answer.
struct hops_ilp_result {
  std::vector<int> choice;  ///< configuration per job, -1 = none
  /// Per class: the chosen fill patterns, one multiset of share sizes per pattern copy.
  std::vector<std::vector<std::vector<int>>> patterns;
  milp_solution solution;                   ///< CBC's outcome and figures
  int columns = 0, rows = 0, integers = 0;  ///< model size
  int groups = 0;                           ///< job groups (jobs when not grouped)
};

/// Maximal multisets of `sizes` (distinct, positive) summing to at most `capacity`, each
/// sorted descending; empty when there are more than `limit`.
std::vector<std::vector<int>> fill_patterns(const std::vector<int>& sizes, int capacity,
                                            std::size_t limit = 5000);

/// Builds and solves the ILP. An error when the instance is inconsistent, CBC fails or a
/// class needs too many patterns.
///
/// Grouped (`group_tolerance` t > 0): the model holds one row and one integer column per
/// configuration per group, so its size follows the distinct job shapes (about 130 in a
/// 5,000-job window at 10,000 GPUs) rather than the jobs. The counts it chooses are handed to
/// jobs shape by shape: the shape's chosen configurations, best unit value first, to its
/// jobs, highest weight first (the best matching, by the rearrangement inequality, since
/// jobs of one shape are interchangeable for capacity). That plan's value is at least the
/// grouped optimum, which is at least the per-job optimum / (1 + t), since a bin's weights
/// are within 1 + t of its mean.
result<hops_ilp_result> solve_hops_ilp(const hops_ilp_input& in, const milp_settings& s);

}  // namespace tessera
