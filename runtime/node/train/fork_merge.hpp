#pragma once
/// @file fork_merge.hpp
/// The round-end merge of a forked job's copies (HadarE): n copies started the round from one
/// state (theta_0, optimizer state s_0, step t_0), copy c made n_c steps on its own batches and
/// reached (theta_c, s_c). The merge makes every copy hold the same state again; the job has
/// then made N = sum_c n_c steps (HadarE counts a job's progress as the sum of its copies').
///
/// Rules (`fork_merge_rule`, a job setting: `merge` in the job-set file):
/// - `mean` (default): theta = (1/n) sum_c theta_c, s = (1/n) sum_c s_c. The plain average of
///   the copies' models, as HadarE aggregates them.
/// - `weighted`: theta = sum_c (n_c / N) theta_c, s = sum_c (n_c / N) s_c. Federated averaging
///   weighted by the data each copy processed; a copy that made no step has no say.
///
/// What to expect (bench/fork_merge_bench.cpp; figures in docs/benchmarks/runtime.md, "Which
/// merge rule: rounds to a target loss, in one process"): a round of averaged copies moves
/// the model no further along the gradient than its fastest copy (weighted: sum n_c^2 / N of
/// its steps), but the average of n copies' independent batch noise has 1/n of the variance.
/// So forking saves rounds for jobs whose progress is limited by gradient noise (small
/// batches, late training), and costs rounds where the gradient dominates; `mean` gives the
/// lowest variance, `weighted` follows the fastest copy more closely. A third rule, the sum of
/// the copies' updates (theta_0 + sum_c (theta_c - theta_0)), would credit all N steps, but it
/// is delayed SGD with a delay of a whole round, which diverges (same section), so it is not
/// offered.
///
/// Why the optimizer state is merged too: each copy's momentum describes its own trajectory;
/// keeping one copy's (copy 0's) after averaging the parameters pushes the merged model along
/// a direction none of the copies now has. It is merged with the parameters' weights.
///
/// Determinism: all sums run in rank order through the aggregator (reduce_order::rank_order),
/// so the merged bits are the same on every copy and equal `fork_merge_reference` computed in
/// one process over the same inputs.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/node/comm/aggregator.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/merge_rule.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train {

/// What one copy brings to the merge.
struct fork_merge_input {
  std::int64_t start_step = 0;  ///< t_0: step counter the round started from
  std::int64_t steps = 0;       ///< n_c: steps this copy made this round
};

/// Merges this copy's `model` with its sibling copies (the other `members` of the aggregator,
/// each calling with the same members, options and rule) in place: afterwards every copy's
/// model holds the merged parameters and optimizer state and step counter t_0 + N. `opt`
/// gives the channel and timeout (its op and order are set here). Errors: what the aggregator
/// reports (a timeout, a member that never came); then the model may be partly merged and
/// must not be checkpointed.
status fork_merge(trainable& model, const fork_merge_input& in, fork_merge_rule rule,
                  comm::aggregator& agg, const comm::group& members, comm::reduce_options opt);

/// One copy's state for `fork_merge_reference`.
struct fork_copy_state {
  std::vector<float> params;     ///< theta_c
  std::vector<float> optimizer;  ///< s_c (empty when the model has none)
  std::int64_t steps = 0;        ///< n_c
};

/// The merge computed in one process, copies in member order: the definition `fork_merge`
/// matches bit for bit. Returns (parameters, optimizer state); empty optimizer state when the
/// copies have none. `copies` must not be empty.
std::pair<std::vector<float>, std::vector<float>> fork_merge_reference(
    const std::vector<fork_copy_state>& copies, fork_merge_rule rule);

}  // namespace tessera::train
