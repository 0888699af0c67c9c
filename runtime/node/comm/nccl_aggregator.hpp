#pragma once
/// @file nccl_aggregator.hpp
/// The NCCL backend (compiled when CMake finds CUDA and NCCL: WITH_NCCL). Participants are the
/// MPI ranks; each process drives one GPU (its node-local rank modulo the device count).
///
/// Per (member set, channel) it makes one NCCL communicator: the first member calls
/// ncclGetUniqueId and the id is broadcast over the MPI backend's communicator of the same
/// members, then every member calls ncclCommInitRankConfig in non-blocking mode and polls it
/// against the deadline. A collective copies the host buffer to the device, runs ncclAllReduce
/// (fastest) or ncclAllGather + a host-side sum in member order (rank_order) on the
/// communicator's stream, copies back, and polls the stream; at the deadline it calls
/// ncclCommAbort and the channel is broken. Calls on one channel are serialised by a mutex.
/// Host buffers are staged through device memory, so the host vector is never referenced after
/// the call returns (no graveyard needed, unlike MPI).
///
/// Device buffers (buffer_view on this rank's GPU) are reduced in place with no host copy:
/// fastest is ncclAllReduce(sum) in place (then a division kernel for mean); rank_order is
/// ncclAllGather into the channel's device scratch, then reduce_gathered_on_device, which sums
/// in member order exactly as reference_reduce does, so rank_order gives the same bits on
/// device buffers as on host buffers.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/node/comm/aggregator.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"

namespace tessera::comm {

class nccl_channel;  // nccl_aggregator.cpp

/// This process's NCCL participant.
class nccl_aggregator final : public aggregator {
 public:
  /// Uses `mpi` (which must outlive this object) to exchange unique ids. Errors
  /// (solver_failed) when no CUDA device is usable: the message carries CUDA's reason, which
  /// tests print when they skip.
  static result<std::unique_ptr<nccl_aggregator>> create(mpi_aggregator& mpi);
  ~nccl_aggregator() override;

  std::string backend() const override { return "nccl"; }
  int rank() const override { return mpi_.rank(); }
  int world_size() const override { return mpi_.world_size(); }
  status allreduce(const group& members, std::vector<float>& data,
                   const reduce_options& opt) override;
  /// Device views must be on device(); see the file comment. Host views as vectors.
  status allreduce(const group& members, buffer_view data, const reduce_options& opt) override;
  /// The GPU this rank's communicators use.
  int device() const { return device_; }
  /// Counts are exchanged over the MPI backend, then ncclAllGather of buffers padded to the
  /// largest count (at most 2^24 floats per member).
  status allgather(const group& members, const std::vector<float>& mine, std::vector<float>& all,
                   std::vector<std::size_t>* counts, const reduce_options& opt) override;

 private:
  nccl_aggregator(mpi_aggregator& mpi, int device) : mpi_(mpi), device_(device) {}
  /// Runs `fn` on the (members, channel) communicator, made on first use (unique id over MPI,
  /// non-blocking init polled against the deadline), holding the channel's lock.
  status with_channel(
      const group& members, const reduce_options& opt,
      const std::function<status(nccl_channel&, int n, std::chrono::steady_clock::time_point)>& fn);
  mpi_aggregator& mpi_;
  int device_;
  std::mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<nccl_channel>> channels_;
};

/// Whether a usable CUDA device exists; when not, `why` says what CUDA reported.
bool cuda_device_available(std::string* why);

}  // namespace tessera::comm
