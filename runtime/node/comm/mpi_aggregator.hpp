#pragma once
/// @file mpi_aggregator.hpp
/// The MPI backend: participants are the ranks of MPI_COMM_WORLD (one per process). MPI must be
/// initialised with MPI_THREAD_MULTIPLE before the aggregator is made and finalised after it is
/// destroyed.
///
/// Each (member set, channel) gets its own communicator, made on first use with
/// MPI_Comm_create_group (collective over the members only, so other ranks carry on with other
/// work) with a tag derived from group_key(), and cached. Each communicator is driven by one
/// thread of its own, which runs that communicator's collectives (blocking MPI calls) in the
/// order they were submitted, while the caller waits for the result with the timeout. The
/// blocking collectives are MPI's tuned ones, faster than polling a non-blocking collective
/// (docs/benchmarks/runtime.md, "MPI backend allreduce vs raw MPI_Allreduce", compares
/// them). An MPI collective cannot be cancelled: on timeout the caller returns an error, the
/// communicator is marked broken (later calls on it fail at once), the caller's buffer moves
/// to a graveyard the stuck thread may still write to, and the thread is detached at
/// destruction if it is still inside MPI. The caller decides what to do (a node reports the
/// copy as failed; the scheduler replans from checkpoints).
///
/// rank_order: every member's buffer is gathered (MPI_Allgather) and each member sums them in
/// member order with reference_reduce -- members x count floats of traffic, reproducible bits.
/// fastest: MPI_Allreduce(MPI_SUM) in place, divided by the member count for mean.
/// allgather: the counts (MPI_Allgather), then MPI_Allgatherv into a buffer the operation
/// owns, moved to the caller on success (so a timed-out call never writes caller memory).
/// Device buffers: see allreduce(group, buffer_view, ...) and mpi_device_path().

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/node/comm/aggregator.hpp"

namespace tessera::comm {

/// Whether the MPI library takes CUDA device pointers: Open MPI's MPIX_Query_cuda_support when
/// it was built with CUDA support (<mpi-ext.h>), else false.
bool mpi_cuda_aware();

class mpi_channel;  // one communicator and its thread (mpi_aggregator.cpp)

/// This process's participant in MPI_COMM_WORLD.
class mpi_aggregator final : public aggregator {
 public:
  /// Reads rank and size of MPI_COMM_WORLD. Errors (solver_failed) when MPI is not initialised
  /// or was initialised below MPI_THREAD_MULTIPLE.
  static result<std::unique_ptr<mpi_aggregator>> create();
  /// Stops the communicator threads (detaching any stuck in a timed-out collective) and frees
  /// the communicators that are not broken.
  ~mpi_aggregator() override;

  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  status allreduce(const group& members, std::vector<float>& data,
                   const reduce_options& opt) override;
  /// Device buffers follow mpi_device_path(): handed to a CUDA-aware MPI (through a device
  /// copy the operation owns), or staged through pinned host memory. Host views with an
  /// owner are reduced in place (MPI_IN_PLACE, no copy); without one, as vectors.
  status allreduce(const group& members, buffer_view data, const reduce_options& opt) override;
  /// Whether this MPI takes device pointers (MPIX_Query_cuda_support at create()).
  bool cuda_aware() const { return cuda_aware_; }
  status allgather(const group& members, const std::vector<float>& mine, std::vector<float>& all,
                   std::vector<std::size_t>* counts, const reduce_options& opt) override;

  /// Runs `fn(comm)` on the communicator thread of (members, channel) with that communicator
  /// (an MPI_Comm passed as void* so this header needs no mpi.h), waiting at most `timeout`.
  /// The NCCL backend sends its unique id through this. Errors as allreduce.
  status run_on(const group& members, std::uint64_t channel, std::chrono::milliseconds timeout,
                const std::function<status(void* comm)>& fn);

  /// Communicators made so far (cache size), for tests.
  std::size_t communicators() const;

 private:
  /// A host view with an owner, reduced where it lies.
  status allreduce_in_place(const group& members, const buffer_view& data,
                            const reduce_options& opt);
  mpi_aggregator(int rank, int size, bool cuda_aware)
      : rank_(rank), size_(size), cuda_aware_(cuda_aware) {}
  /// The cached channel of (members, channel), made (and its thread started) on first use.
  std::shared_ptr<mpi_channel> channel_for(const group& members, std::uint64_t channel);
  int rank_;
  int size_;
  bool cuda_aware_;
  mutable std::mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<mpi_channel>> channels_;
};

}  // namespace tessera::comm
