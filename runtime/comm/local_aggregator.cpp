#include "runtime/comm/local_aggregator.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace tessera::comm {

status local_aggregator::allreduce(const group& members, std::vector<float>& vec,
                                   const reduce_options& opt) {
  float* data = vec.data();
  const std::size_t count = vec.size();
  if (auto ok = check_group(members, rank_, world_->size()); !ok) return ok;
  const std::uint64_t key = group_key(members, opt.channel);
  std::uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> g(seq_mu_);
    seq = next_seq_[key]++;
  }
  if (members.size() == 1) {
    reference_reduce({data}, count, opt.op, data);
    return {};
  }
  auto& w = *world_;
  const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
  std::unique_lock<std::mutex> lock(w.mu_);
  if (w.broken_.count(key))
    return error{error_kind::io, "local aggregator: " + describe(members, opt.channel) +
                                     " is broken by an earlier timeout"};
  const auto id = std::make_pair(key, seq);
  auto& o = w.ops_[id];
  if (o.buffers.empty() && o.served == 0 && !o.done) o.count = count;
  if (o.count != count && !o.failed) {
    o.failed = true;
    o.why = "local aggregator: members of " + describe(members, opt.channel) +
            " passed different element counts (" + std::to_string(o.count) + " and " +
            std::to_string(count) + ")";
    w.cv_.notify_all();
  }
  o.buffers[rank_] = data;
  if (!o.failed && !o.done && static_cast<std::size_t>(o.buffers.size()) == members.size()) {
    std::vector<const float*> in;
    for (int r : members) in.push_back(o.buffers[r]);
    o.result.resize(count);
    reference_reduce(in, count, opt.op, o.result.data());
    o.done = true;
    w.cv_.notify_all();
  }
  const bool arrived = w.cv_.wait_until(lock, deadline, [&] { return o.done || o.failed; });
  status st;
  if (o.done) {
    std::copy(o.result.begin(), o.result.end(), data);
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
  if (!st) std::fill(vec.begin(), vec.end(), std::numeric_limits<float>::quiet_NaN());
  o.buffers.erase(rank_);
  if (++o.served == static_cast<int>(members.size()) || (o.failed && o.buffers.empty()))
    w.ops_.erase(id);
  return st;
}

}  // namespace tessera::comm
