#include "runtime/node/train/fork_merge.hpp"

#include <algorithm>

namespace tessera::train {

namespace {

/// This copy's contribution to the one collective of `rule`: its parameters followed by its
/// optimizer state, scaled by `weight` under `weighted`.
std::vector<float> contribution(const std::vector<float>& params, const std::vector<float>* opt,
                                float weight, fork_merge_rule rule) {
  std::vector<float> out;
  out.reserve(params.size() + (opt ? opt->size() : 0));
  const bool scale = rule == fork_merge_rule::weighted;
  for (float p : params) out.push_back(scale ? p * weight : p);
  if (opt)
    for (float s : *opt) out.push_back(scale ? s * weight : s);
  return out;
}

/// The collective that combines contributions: a mean, or the sum of weighted values.
comm::reduce_op combine_op(fork_merge_rule rule) {
  return rule == fork_merge_rule::mean ? comm::reduce_op::mean : comm::reduce_op::sum;
}

/// Writes the collective's result back into parameters and optimizer state.
void unpack(const std::vector<float>& merged, std::vector<float>& params, std::vector<float>* opt) {
  std::copy(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(params.size()),
            params.begin());
  if (opt)
    std::copy(merged.begin() + static_cast<std::ptrdiff_t>(params.size()), merged.end(),
              opt->begin());
}

}  // namespace

status fork_merge(trainable& model, const fork_merge_input& in, fork_merge_rule rule,
                  comm::aggregator& agg, const comm::group& members, comm::reduce_options opt) {
  opt.order = comm::reduce_order::rank_order;
  opt.op = comm::reduce_op::sum;
  // Steps are small integers: exact in float, so every member gets the same N.
  std::vector<float> total{static_cast<float>(in.steps)};
  if (auto st = agg.allreduce(members, total, opt); !st) return st;
  const float n_total = total[0];
  if (n_total > 0) {  // else no copy moved: they all still hold the round's start state
    std::vector<float>* state = model.optimizer_state();
    auto buf = contribution(model.params(), state, static_cast<float>(in.steps) / n_total, rule);
    opt.op = combine_op(rule);
    if (auto st = agg.allreduce(members, buf, opt); !st) return st;
    unpack(buf, model.params(), state);
  }
  model.set_step(in.start_step + static_cast<std::int64_t>(n_total));
  return {};
}

std::pair<std::vector<float>, std::vector<float>> fork_merge_reference(
    const std::vector<fork_copy_state>& copies, fork_merge_rule rule) {
  std::vector<float> params = copies.front().params;
  std::vector<float> state = copies.front().optimizer;
  float n_total = 0;
  for (const auto& c : copies) n_total += static_cast<float>(c.steps);
  if (n_total <= 0) return {params, state};
  std::vector<std::vector<float>> parts;
  for (const auto& c : copies)
    parts.push_back(contribution(c.params, c.optimizer.empty() ? nullptr : &c.optimizer,
                                 static_cast<float>(c.steps) / n_total, rule));
  std::vector<const float*> in;
  for (const auto& p : parts) in.push_back(p.data());
  std::vector<float> merged(parts.front().size());
  comm::reference_reduce(in, merged.size(), combine_op(rule), merged.data());
  unpack(merged, params, state.empty() ? nullptr : &state);
  return {params, state};
}

}  // namespace tessera::train
