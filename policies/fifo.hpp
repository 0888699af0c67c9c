#pragma once
/// @file fifo.hpp
/// First in, first out (Gavel, OSDI'20, section 4.2 "Other Policies as Optimization
/// Problems", FIFO; the `_perf` variant picks the fastest GPU type). Not an LP.
///
/// Rule: walk the jobs in arrival order (the snapshot's order) and give each x = 1 on one GPU
/// type j with T[m][j] > 0 and at least scale_m GPUs still unallocated, chosen by a
/// `fifo_choice`: aware, the fastest such type for the job (T = policy_throughputs, ties by
/// type index); agnostic, the such type with the most unallocated GPUs (ties by type index).
/// Unlike the LP policies, agnostic FIFO is not the aware rule on the type-blind pooled view
/// (policies/type_blind.hpp): Gavel's agnostic FIFO places whole jobs by free GPUs, which
/// that view cannot express. The first job that fits nowhere
/// *right now* stops the walk and it and all later jobs get 0 (head-of-line blocking, as
/// Gavel's FIFO: no job jumps the queue). A job that can never fit (no type with T > 0 and
/// at least scale_m GPUs in total) is skipped rather than blocking the queue forever.
/// Constraints met by construction: x in {0, 1}; one type per job; sum_m scale_m x[m][j] <=
/// gpus_j; x = 0 where T = 0.
///
/// Complexity: O(M K). Recomputed when the job set changes. Stateless: unlike Gavel's base
/// FIFO, which remembers a random type per job, the agnostic choice is deterministic.

#include <memory>
#include <vector>

#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Which of the GPU types with room for a job FIFO gives it.
enum class fifo_choice {
  most_free,  ///< heterogeneity-agnostic (Gavel's FIFO): the type with most unallocated GPUs
  fastest,    ///< heterogeneity-aware (`_perf`): the job's fastest type
};

/// FIFO allocation: whole GPU types to jobs in arrival order.
class fifo final : public allocation_policy {
 public:
  /// A FIFO that picks each job's type by `choice`.
  explicit fifo(fifo_choice choice) : choice_(choice) {}
  /// One type per job in arrival order until the first job that does not fit.
  result<allocation> allocate(const snapshot& s) override;

 private:
  fifo_choice choice_;
};

/// Options of fifo (none).
std::vector<option_spec> fifo_options();

/// Builds FIFO with the given type choice.
std::unique_ptr<allocation_policy> make_fifo(const options& o, fifo_choice choice);

}  // namespace tessera
