#pragma once
/// @file aggregator.hpp
/// Parameter aggregation between the copies of a forked job (HadarE) and between the tasks of
/// a job spread over processes (Hare): an allreduce, and an allgather, over a subset of the
/// participants.
///
/// Backends (one class each, same interface, same tests: tests/runtime/node/comm/
/// test_aggregator_local.cpp, and under mpirun tests/mpi/test_aggregator_mpi.cpp):
/// - `local_aggregator` (local_aggregator.hpp): threads of one process; a node actor's worker
///   threads in single-process clusters and tests.
/// - `mpi_aggregator` (mpi_aggregator.hpp): ranks of MPI_COMM_WORLD; one communicator per member
///   set and channel (MPI_Comm_create_group), cached, each driven by a thread of its own.
/// - `nccl_aggregator` (nccl_aggregator.hpp, built with WITH_NCCL): NCCL communicators over the
///   same member sets, the unique id sent through the MPI backend.
///
/// Rules every backend keeps:
/// - A call blocks only the calling thread (never call it on a CAF scheduler thread) and
///   returns within the timeout: on expiry it fails with error_kind::io and the (group,
///   channel) it used is marked broken, later calls on it fail at once.
/// - All members of a group call with the same group, channel, count and options, and the
///   members issue their calls on one (group, channel) in the same order. Different channels
///   are independent, so two jobs whose copies share a member set do not have to agree on the
///   order of their aggregations: give each job its own channel.
/// - `reduce_order::rank_order` gives the same bits as reference_reduce() over the members'
///   buffers in member order, wherever the members run. `reduce_order::fastest` leaves the
///   summation order to the backend (MPI's or NCCL's own allreduce); the result is exact when
///   every partial sum is representable (e.g. values on a coarse binary grid), otherwise it
///   may differ from rank_order in the last bits.
///
/// Device buffers (`buffer_view` with memory_kind::device; docs/design.md, "CUDA trainable and
/// device buffers"): the NCCL backend reduces them in place on the GPU (no host copy); the MPI
/// backend passes them to MPI when it is CUDA-aware and the order allows, else stages them
/// through pinned host memory (mpi_device_path); the local backend refuses them. Host views
/// take the same path as the vector overload.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera::comm {

/// The participants of one collective: distinct ranks in increasing order.
using group = std::vector<int>;

/// What the collective computes elementwise.
enum class reduce_op {
  sum,   ///< sum over members
  mean,  ///< sum over members, then divided by the member count (in float)
};

/// Summation order (see the file comment).
enum class reduce_order {
  rank_order,  ///< ((x_0 + x_1) + x_2) + ... in member order: reproducible bits
  fastest,     ///< whatever order the backend's native allreduce uses
};

/// Options of one collective.
struct reduce_options {
  reduce_op op = reduce_op::mean;                 ///< sum or mean
  reduce_order order = reduce_order::rank_order;  ///< reproducible or fastest
  std::chrono::milliseconds timeout{30000};       ///< the call fails after this long
  std::uint64_t channel = 0;                      ///< independent stream of collectives
};

/// Where a buffer's memory lives.
enum class memory_kind {
  host,    ///< ordinary (or pinned) host memory
  device,  ///< CUDA device memory (cudaMalloc) of GPU `buffer_view::device`
};

/// A float buffer a collective reads and writes in place: pointer, element count, and where
/// the memory lives. The caller keeps the memory alive until the call returns; after a
/// timeout a backend never touches it again (it works on copies it owns, or aborts).
struct buffer_view {
  float* data = nullptr;                   ///< first element (host or device address)
  std::size_t count = 0;                   ///< elements
  memory_kind memory = memory_kind::host;  ///< host or device memory
  int device = 0;                          ///< CUDA device index (device memory only)
  /// Host memory only: the owner of the storage (a program's shared buffer, say). With one, a
  /// backend that can reduces the buffer in place, without a copy, and keeps the owner alive
  /// for as long as a timed-out collective may still write it.
  std::shared_ptr<void> owner;
};

/// "host" or "device".
const char* to_string(memory_kind m);

/// How the MPI backend handles a buffer (chosen by mpi_device_path).
enum class device_path {
  host,    ///< a host buffer: the host algorithm as for vectors
  direct,  ///< device pointer handed to MPI (CUDA-aware MPI; sum order left to MPI)
  staged,  ///< copied to pinned host memory, reduced there, copied back
};

/// The MPI backend's path for a buffer in `memory`: device buffers go straight to a CUDA-aware
/// MPI for reduce_order::fastest only; rank_order sums on the host in member order, so a device
/// buffer is staged through pinned host memory (as every device buffer is without CUDA-aware
/// MPI).
device_path mpi_device_path(memory_kind memory, bool mpi_cuda_aware, reduce_order order);

/// An allreduce endpoint of one participant (one per process for MPI/NCCL, one per thread for
/// the local backend). Thread-safe: several threads may call concurrently on different
/// (group, channel) pairs.
class aggregator {
 public:
  virtual ~aggregator() = default;

  /// Backend name: "local", "mpi" or "nccl".
  virtual std::string backend() const = 0;
  /// This participant's rank.
  virtual int rank() const = 0;
  /// Number of participants (ranks 0 .. world_size()-1).
  virtual int world_size() const = 0;

  /// Reduces `data` elementwise over `members` (which must contain rank()), in place:
  /// afterwards every member holds the same result. Errors: invalid_input for a bad group
  /// (empty, unsorted, duplicates, out of range, without this rank) or members passing
  /// different sizes; io on timeout or a broken (group, channel); solver_failed when the
  /// backend library reports an error. After a timeout `data` holds NaNs: a backend whose
  /// collective cannot be cancelled keeps the original storage alive for it (a vector, not a
  /// raw pointer, for that reason).
  virtual status allreduce(const group& members, std::vector<float>& data,
                           const reduce_options& opt) = 0;

  /// As the vector overload, on a buffer that may live in device memory (see the file
  /// comment). This default serves host views through the vector overload (a copy in, a copy
  /// out) and refuses device views with invalid_input naming the backend; backends that take
  /// device memory override it. After an error the buffer holds NaNs (host) or is unspecified
  /// (device).
  virtual status allreduce(const group& members, buffer_view data, const reduce_options& opt);

  /// Gathers every member's `mine` into `all`: the members' buffers concatenated in member
  /// order, the same bits on every member. Members may pass different counts; `counts`, when
  /// given, receives each member's count in member order. `opt.op` and `opt.order` are not
  /// used. The task executor gathers the K shard gradients of a step with it (a member holds
  /// the shards of its tasks) and a copy's leader sends its state to the copy's other members
  /// with it (they pass empty buffers). Errors as allreduce; on error `all` is empty.
  virtual status allgather(const group& members, const std::vector<float>& mine,
                           std::vector<float>& all, std::vector<std::size_t>* counts,
                           const reduce_options& opt) = 0;
};

/// Checks that `members` is a valid group for participant `rank` of `world` (see
/// aggregator::allreduce); the error names the problem.
status check_group(const group& members, int rank, int world);

/// The reproducible reduction in one process: out[i] = ((in[0][i] + in[1][i]) + ...) for sum,
/// that divided by inputs.size() for mean. The definition every backend's rank_order mode
/// matches bit for bit. `out` may alias one of the inputs.
void reference_reduce(const std::vector<const float*>& inputs, std::size_t count, reduce_op op,
                      float* out);

/// reference_reduce over `n` buffers of `count` floats laid end to end in `gathered` (an
/// allgather's output): out[i] = ((gathered[i] + gathered[count + i]) + ...). The host
/// definition the device kernel of the same name (device_memory.hpp) matches bit for bit.
void reduce_gathered(const float* gathered, std::size_t n, std::size_t count, reduce_op op,
                     float* out);

/// A stable identifier of (group, channel), equal in every process; backends key their caches
/// and MPI tags with it.
std::uint64_t group_key(const group& members, std::uint64_t channel);

/// "{0,2,3}/ch 5", for messages.
std::string describe(const group& members, std::uint64_t channel);

}  // namespace tessera::comm
