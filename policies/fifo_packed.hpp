#pragma once
/// @file fifo_packed.hpp
/// FIFO with space sharing: Gavel's `fifo_packed` (OSDI'20, section 3.1 "Space sharing" with
/// the FIFO policy of section 4.2). Not an LP.
///
/// Rule: first the heterogeneity-aware FIFO (policies/fifo.hpp, `fifo_choice::fastest`): jobs
/// in arrival order, each on its fastest type with room, until the first that fits nowhere.
/// Then the jobs left waiting are taken in arrival order; the head of that queue is paired with
/// the running job (alone, same scale factor) whose GPUs it would share best, measured as the
/// pair's normalised throughput sum_i T^co_i / T_i on the running job's type (T^co from the
/// throughput table's co-location entries, server_throughput::colocated_table, times the
/// type's mean speed; T each job's throughput alone there, a term left out where it is 0).
/// The pair is made only when that sum exceeds `packing_threshold` (default 1.5, Gavel's):
/// sharing must beat time-slicing by a clear margin. The first waiting job that finds no such
/// partner stops the packing, so no job jumps the queue (Gavel's rule). A pair takes the
/// running job's GPUs for the whole round (x = 1 on that type); a job already in a pair takes
/// no second partner.
///
/// Cost per round: O(M K) for FIFO, then O(W R) table lookups for W waiting jobs against R
/// running ones. Recomputed when the job set changes. Without rates (snapshot::rates) or
/// co-location entries it is fifo_perf.

#include <memory>
#include <vector>

#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Gavel's FIFO with space sharing.
class fifo_packed final : public allocation_policy {
 public:
  /// Pairs are made only when their normalised throughput exceeds `packing_threshold`.
  explicit fifo_packed(double packing_threshold) : threshold_(packing_threshold) {}
  /// The aware FIFO allocation, then waiting jobs paired with running ones in arrival order.
  result<allocation> allocate(const snapshot& s) override;

 private:
  double threshold_;
};

/// Options of fifo_packed: `packing_threshold` (default 1.5).
std::vector<option_spec> fifo_packed_options();

/// Builds FIFO with space sharing from validated options.
std::unique_ptr<allocation_policy> make_fifo_packed(const options& o);

}  // namespace tessera
