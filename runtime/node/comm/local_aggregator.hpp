#pragma once
/// @file local_aggregator.hpp
/// The local backend: participants are threads of one process sharing a `local_world`. Each
/// collective is a rendezvous: members deposit their buffers, the last to arrive computes
/// reference_reduce over them (so `fastest` and `rank_order` give the same bits here), and
/// every member copies the result back (allgather: the concatenation). Used by single-process
/// clusters (the node actors of the actor unit tests) and as the reference the other backends are
/// tested against.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/node/comm/aggregator.hpp"

namespace tessera::comm {

/// Shared state of the participants of one process. Make it with make_shared and give each
/// participant a local_aggregator on it.
class local_world {
 public:
  /// A world of `size` participants (ranks 0..size-1).
  explicit local_world(int size) : size_(size) {}
  /// Participants.
  int size() const { return size_; }

 private:
  friend class local_aggregator;
  /// One collective in progress, identified by (group key, sequence number).
  struct op {
    /// Deposited by members not yet served: (data, element count).
    std::map<int, std::pair<const float*, std::size_t>> buffers;
    std::vector<float> result;        ///< computed by the last to arrive
    std::vector<std::size_t> counts;  ///< allgather: each member's count, in member order
    bool done = false;                ///< result is ready
    bool failed = false;              ///< a member gave up (timeout) or disagreed on count
    std::string why;                  ///< why it failed
    int served = 0;                   ///< members that copied the result
  };
  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, op> ops_;
  std::set<std::uint64_t> broken_;  ///< group keys that timed out
};

/// One participant of a local_world.
class local_aggregator final : public aggregator {
 public:
  /// Participant `rank` of `world`.
  local_aggregator(std::shared_ptr<local_world> world, int rank)
      : world_(std::move(world)), rank_(rank) {}
  std::string backend() const override { return "local"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_->size(); }
  using aggregator::allreduce;  // buffer views: host ones through the vector path, device refused
  status allreduce(const group& members, std::vector<float>& data,
                   const reduce_options& opt) override;
  status allgather(const group& members, const std::vector<float>& mine, std::vector<float>& all,
                   std::vector<std::size_t>* counts, const reduce_options& opt) override;

 private:
  /// Combines the members' deposited buffers (in member order) into the op's result, or
  /// says why it cannot ("" = done).
  using combine_fn = std::function<std::string(
      const std::vector<std::pair<const float*, std::size_t>>& in, local_world::op& o)>;
  /// One rendezvous on (members, channel): deposits (data, count), the last member to arrive
  /// runs `combine`, every member waits for the result at most opt.timeout. On success the
  /// op's result and counts are copied to `result` / `counts`.
  status collective(const group& members, const reduce_options& opt, const float* data,
                    std::size_t count, const combine_fn& combine, std::vector<float>& result,
                    std::vector<std::size_t>* counts);

  std::shared_ptr<local_world> world_;
  int rank_;
  std::mutex seq_mu_;
  std::map<std::uint64_t, std::uint64_t> next_seq_;  ///< per group key: calls made so far
};

}  // namespace tessera::comm
