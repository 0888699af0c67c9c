#pragma once
/// @file program_average.hpp
/// The merge of a forked program job's copies (HadarE; actors/program_round.hpp): each copy's
/// leader node holds its program's buffers in the program's own shared memory
/// (runtime/node/program/shared_floats.hpp) and the leaders reduce them there, in place,
/// through the node's aggregator: a small allgather says who brings what, then one allreduce
/// sums the copies' (weighted) buffers, and each leader divides by the weights' sum. No copy
/// of the buffers is made on the way and nothing caps their size but memory.
///
/// Who is in the mean: the copies whose program asked (`present`) with as many values as the
/// lowest such copy; a copy that brings another count is left out, and told why. A copy that
/// did not ask (it failed, or never called average) takes part in the collective with zeros,
/// so the others carry on. Under the "mean" rule each copy in the mean weighs 1; under
/// "weighted" its steps (1 each when no copy made a step). The sum is the backend's own
/// (reduce_order::fastest): exact whenever every partial sum is representable, else it may
/// differ from a sum in copy order in the last bits; every leader gets the same bits.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/node/comm/aggregator.hpp"

namespace tessera::actors {

/// What one copy's leader brings to the merge.
struct copy_offer {
  std::int32_t copy = 0;   ///< copy index
  bool present = false;    ///< its program asked to average
  std::int64_t steps = 0;  ///< steps its program made this lease
  std::size_t count = 0;   ///< float32 values it brings (0 when absent)
};

/// Who is in the mean, with what weight (by offer index).
struct merge_plan {
  std::size_t count = 0;              ///< values every leader passes to the sum
  std::vector<double> weight;         ///< 0: not in the mean
  double total = 0;                   ///< the weights' sum (the divisor)
  std::int32_t copies = 0;            ///< copies in the mean
  std::int64_t steps = 0;             ///< their steps, summed
  std::vector<std::string> left_out;  ///< why a present copy is not in the mean ("" = it is)
};

/// The plan of a merge from every leader's offer (see the file comment); `job` names the job
/// in the reasons.
merge_plan plan_merge(const std::vector<copy_offer>& offers, const std::string& rule,
                      std::int64_t job);

/// What a leader's merge did.
struct merge_outcome {
  std::int32_t copies = 0;  ///< copies in the mean (0: none brought buffers)
  std::int64_t steps = 0;   ///< their steps, summed
  std::string left_out;     ///< why this copy's buffers are not in the mean ("" = they are)
};

/// This leader's part of the merge over `leaders` (every copy's leader node, sorted): `me`
/// says what it brings; `data` holds `me.count` values (null when absent), replaced by the
/// mean when this copy is in it; `owner` keeps that storage alive for a timed-out collective.
/// Errors: the aggregator's (the merge is then lost for every copy), naming the job, the copy
/// and the size.
result<merge_outcome> merge_copies(comm::aggregator& agg, const comm::group& leaders,
                                   const copy_offer& me, float* data,
                                   const std::shared_ptr<void>& owner, const std::string& rule,
                                   std::int64_t job, comm::reduce_options opt);

}  // namespace tessera::actors
