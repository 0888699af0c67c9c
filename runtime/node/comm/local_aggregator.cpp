#include "runtime/node/comm/local_aggregator.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace tessera::comm {

status local_aggregator::collective(const group& members, const reduce_options& opt,
                                    const float* data, std::size_t count, const combine_fn& combine,
                                    std::vector<float>& result, std::vector<std::size_t>* counts) {
  if (auto ok = check_group(members, rank_, world_->size()); !ok) return ok;
  const std::uint64_t key = group_key(members, opt.channel);
  std::uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> g(seq_mu_);
    seq = next_seq_[key]++;
  }
  auto& w = *world_;
  const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
  std::unique_lock<std::mutex> lock(w.mu_);
  if (w.broken_.count(key))
    return error{error_kind::io, "local aggregator: " + describe(members, opt.channel) +
                                     " is broken by an earlier timeout"};
  const auto id = std::make_pair(key, seq);
  auto& o = w.ops_[id];
  o.buffers[rank_] = {data, count};
  if (!o.failed && !o.done && o.buffers.size() == members.size()) {
    std::vector<std::pair<const float*, std::size_t>> in;
    for (int r : members) in.push_back(o.buffers[r]);
    o.why = combine(in, o);
    if (o.why.empty())
      o.done = true;
    else
      o.failed = true;
    w.cv_.notify_all();
  }
  const bool arrived = w.cv_.wait_until(lock, deadline, [&] { return o.done || o.failed; });
  status st;
  if (o.done) {
    result = o.result;
    if (counts) *counts = o.counts;
  } else if (o.failed) {
    st = error{error_kind::io, o.why};
  } else if (!arrived) {
    o.failed = true;
    o.why = "local aggregator: " + describe(members, opt.channel) + " timed out after " +
            std::to_string(opt.timeout.count()) + " ms waiting for the other members";
    w.broken_.insert(key);
    w.cv_.notify_all();
    st = error{error_kind::io, o.why};
  }
  o.buffers.erase(rank_);
  if (++o.served == static_cast<int>(members.size()) || (o.failed && o.buffers.empty()))
    w.ops_.erase(id);
  return st;
}

status local_aggregator::allreduce(const group& members, std::vector<float>& vec,
                                   const reduce_options& opt) {
  if (members.size() == 1 && check_group(members, rank_, world_->size())) {
    reference_reduce({vec.data()}, vec.size(), opt.op, vec.data());
    // Keep the sequence numbers of the (one-member) group in step with other backends.
    std::lock_guard<std::mutex> g(seq_mu_);
    ++next_seq_[group_key(members, opt.channel)];
    return {};
  }
  const reduce_op op = opt.op;
  auto combine = [&](const std::vector<std::pair<const float*, std::size_t>>& in,
                     local_world::op& o) -> std::string {
    for (const auto& b : in)
      if (b.second != in.front().second)
        return "local aggregator: members of " + describe(members, opt.channel) +
               " passed different element counts (" + std::to_string(in.front().second) + " and " +
               std::to_string(b.second) + ")";
    std::vector<const float*> ptrs;
    for (const auto& b : in) ptrs.push_back(b.first);
    o.result.resize(in.front().second);
    reference_reduce(ptrs, o.result.size(), op, o.result.data());
    return "";
  };
  std::vector<float> out;
  auto st = collective(members, opt, vec.data(), vec.size(), combine, out, nullptr);
  if (st)
    vec = std::move(out);
  else
    std::fill(vec.begin(), vec.end(), std::numeric_limits<float>::quiet_NaN());
  return st;
}

status local_aggregator::allgather(const group& members, const std::vector<float>& mine,
                                   std::vector<float>& all, std::vector<std::size_t>* counts,
                                   const reduce_options& opt) {
  auto combine = [](const std::vector<std::pair<const float*, std::size_t>>& in,
                    local_world::op& o) -> std::string {
    o.result.clear();
    o.counts.clear();
    for (const auto& b : in) {
      o.result.insert(o.result.end(), b.first, b.first + b.second);
      o.counts.push_back(b.second);
    }
    return "";
  };
  all.clear();
  auto st = collective(members, opt, mine.data(), mine.size(), combine, all, counts);
  if (!st) all.clear();
  return st;
}

}  // namespace tessera::comm
