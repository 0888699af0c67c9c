#include "runtime/node/comm/nccl_aggregator.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "runtime/node/comm/device_memory.hpp"

namespace tessera::comm {

namespace {

/// Channel-number offset for the MPI communicator that carries NCCL unique ids, so it never
/// shares a queue with an MPI-backend collective of the same channel.
constexpr std::uint64_t id_channel_salt = 0x6e63636c00000000ull;  // "nccl"

status cuda_fail(const char* what, cudaError_t e) {
  return error{error_kind::solver_failed,
               std::string("nccl aggregator: ") + what + ": " + cudaGetErrorString(e)};
}

status nccl_fail(const char* what, ncclResult_t r) {
  return error{error_kind::solver_failed,
               std::string("nccl aggregator: ") + what + ": " + ncclGetErrorString(r)};
}

}  // namespace

bool cuda_device_available(std::string* why) { return cuda_device_present(why); }

/// One NCCL communicator with its stream and device buffers.
class nccl_channel {
 public:
  ~nccl_channel() {
    if (comm_) {
      if (broken_)
        ncclCommAbort(comm_);
      else
        ncclCommDestroy(comm_);
    }
    if (dev_) cudaFree(dev_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::mutex mu;  ///< serialises calls on the channel
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* dev_ = nullptr;  ///< device staging buffer
  std::size_t dev_floats_ = 0;
  bool broken_ = false;
  std::vector<float> host_;  ///< host staging (outlives an aborted copy)

  /// Polls the communicator's asynchronous state until it is not in progress or the deadline.
  status wait_comm(std::chrono::steady_clock::time_point deadline, const char* what) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return {};
      if (state != ncclInProgress) return nccl_fail(what, state);
      if (std::chrono::steady_clock::now() > deadline) return timeout(what);
      std::this_thread::yield();
    }
  }

  /// Polls the stream until its work is done or the deadline.
  status wait_stream(std::chrono::steady_clock::time_point deadline, const char* what) {
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return {};
      if (e != cudaErrorNotReady) return cuda_fail(what, e);
      if (std::chrono::steady_clock::now() > deadline) return timeout(what);
      std::this_thread::yield();
    }
  }

  /// Aborts the communicator (pending work is cancelled) and marks the channel broken.
  status timeout(const char* what) {
    broken_ = true;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    return error{error_kind::io,
                 std::string("nccl aggregator: ") + what + " timed out; communicator aborted"};
  }

  /// Stages `count` floats from `data` to the device, runs ncclAllGather (`gather`) or
  /// ncclAllReduce(sum) into `total` floats, copies them to host_ and waits for the stream,
  /// all against `deadline`.
  status run(const float* data, std::size_t count, bool gather, std::size_t total,
             std::chrono::steady_clock::time_point deadline);

  status reserve(std::size_t floats) {
    if (dev_floats_ >= floats) return {};
    if (dev_) cudaFree(dev_);
    dev_ = nullptr;
    dev_floats_ = 0;
    if (auto e = cudaMalloc(reinterpret_cast<void**>(&dev_), floats * sizeof(float));
        e != cudaSuccess)
      return cuda_fail("cudaMalloc", e);
    dev_floats_ = floats;
    return {};
  }
};

result<std::unique_ptr<nccl_aggregator>> nccl_aggregator::create(mpi_aggregator& mpi) {
  std::string why;
  if (!cuda_device_available(&why))
    return error{error_kind::solver_failed, "nccl aggregator: " + why};
  int devices = 0;
  cudaGetDeviceCount(&devices);
  int local_rank = mpi.rank();
  if (const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank = std::atoi(l);
  return std::unique_ptr<nccl_aggregator>(new nccl_aggregator(mpi, local_rank % devices));
}

nccl_aggregator::~nccl_aggregator() {
  std::lock_guard<std::mutex> g(mu_);
  cudaSetDevice(device_);
  channels_.clear();
}

status nccl_aggregator::with_channel(
    const group& members, const reduce_options& opt,
    const std::function<status(nccl_channel&, int n, std::chrono::steady_clock::time_point)>& fn) {
  const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
  const std::uint64_t key = group_key(members, opt.channel);
  std::shared_ptr<nccl_channel> ch;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto& slot = channels_[key];
    if (!slot) slot = std::make_shared<nccl_channel>();
    ch = slot;
  }
  std::lock_guard<std::mutex> g(ch->mu);
  if (ch->broken_)
    return error{error_kind::io, "nccl aggregator: " + describe(members, opt.channel) +
                                     " is broken by an earlier timeout"};
  if (auto e = cudaSetDevice(device_); e != cudaSuccess) return cuda_fail("cudaSetDevice", e);
  const int n = static_cast<int>(members.size());
  int me = 0;
  while (members[me] != rank()) ++me;
  if (!ch->comm_) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (me == 0)
      if (auto r = ncclGetUniqueId(&id); r != ncclSuccess) return nccl_fail("ncclGetUniqueId", r);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto sent = mpi_.run_on(members, opt.channel ^ id_channel_salt, left, [&id](void* comm) {
      const int rc = MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, *static_cast<MPI_Comm*>(comm));
      if (rc != MPI_SUCCESS)
        return status(
            error{error_kind::solver_failed, "nccl aggregator: MPI_Bcast of the unique id failed"});
      return status{};
    });
    if (!sent) return sent;
    if (auto e = cudaStreamCreateWithFlags(&ch->stream_, cudaStreamNonBlocking); e != cudaSuccess)
      return cuda_fail("cudaStreamCreate", e);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&ch->comm_, n, id, me, &config);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail("ncclCommInitRankConfig", r);
    if (auto st = ch->wait_comm(deadline, "ncclCommInitRank"); !st) return st;
  }
  return fn(*ch, n, deadline);
}

status nccl_channel::run(const float* data, std::size_t count, bool gather, std::size_t total,
                         std::chrono::steady_clock::time_point deadline) {
  if (auto st = reserve(count + total); !st) return st;
  float* in = dev_;
  float* out = dev_ + count;
  if (auto e = cudaMemcpyAsync(in, data, count * sizeof(float), cudaMemcpyHostToDevice, stream_);
      e != cudaSuccess)
    return cuda_fail("cudaMemcpyAsync", e);
  ncclResult_t r = gather ? ncclAllGather(in, out, count, ncclFloat, comm_, stream_)
                          : ncclAllReduce(in, out, count, ncclFloat, ncclSum, comm_, stream_);
  if (r != ncclSuccess && r != ncclInProgress) return nccl_fail("collective", r);
  if (auto st = wait_comm(deadline, "collective launch"); !st) return st;
  host_.resize(total);
  if (auto e = cudaMemcpyAsync(host_.data(), out, total * sizeof(float), cudaMemcpyDeviceToHost,
                               stream_);
      e != cudaSuccess)
    return cuda_fail("cudaMemcpyAsync", e);
  return wait_stream(deadline, "collective");
}

status nccl_aggregator::allreduce(const group& members, std::vector<float>& data,
                                  const reduce_options& opt) {
  auto fail = [&](status st) {
    std::fill(data.begin(), data.end(), std::numeric_limits<float>::quiet_NaN());
    return st;
  };
  if (auto ok = check_group(members, rank(), world_size()); !ok) return fail(ok);
  const std::size_t count = data.size();
  if (members.size() == 1) {
    reference_reduce({data.data()}, count, opt.op, data.data());
    return {};
  }
  auto st = with_channel(members, opt, [&](nccl_channel& ch, int n, auto deadline) -> status {
    const bool gather = opt.order == reduce_order::rank_order;
    const std::size_t total = gather ? count * static_cast<std::size_t>(n) : count;
    if (auto run = ch.run(data.data(), count, gather, total, deadline); !run) return run;
    const std::vector<float>& host = ch.host_;
    if (gather) {
      std::vector<const float*> parts;
      for (int k = 0; k < n; ++k)
        parts.push_back(host.data() + static_cast<std::size_t>(k) * count);
      reference_reduce(parts, count, opt.op, data.data());
    } else {
      const float fn = static_cast<float>(n);
      for (std::size_t i = 0; i < count; ++i)
        data[i] = opt.op == reduce_op::mean ? host[i] / fn : host[i];
    }
    return {};
  });
  return st ? st : fail(st);
}

status nccl_aggregator::allreduce(const group& members, buffer_view data,
                                  const reduce_options& opt) {
  if (data.memory == memory_kind::host) return aggregator::allreduce(members, data, opt);
  if (data.device != device_)
    return error{error_kind::invalid_input,
                 "nccl aggregator: the buffer is on GPU " + std::to_string(data.device) +
                     ", this rank's communicators use GPU " + std::to_string(device_)};
  auto fail = [&](status st) {
    (void)fill_nan_on_device(data.data, data.count, data.device);
    return st;
  };
  if (auto ok = check_group(members, rank(), world_size()); !ok) return fail(ok);
  if (members.size() == 1) return {};  // x / 1 == x: the buffer is already the result
  const std::size_t count = data.count;
  auto st = with_channel(members, opt, [&](nccl_channel& ch, int n, auto deadline) -> status {
    // In non-blocking mode a collective is on the stream only once the communicator's state
    // leaves ncclInProgress, so the kernel that follows it is launched after wait_comm.
    const bool gather = opt.order == reduce_order::rank_order;
    if (gather)
      if (auto got = ch.reserve(count * static_cast<std::size_t>(n)); !got) return got;
    const ncclResult_t r =
        gather
            ? ncclAllGather(data.data, ch.dev_, count, ncclFloat, ch.comm_, ch.stream_)
            : ncclAllReduce(data.data, data.data, count, ncclFloat, ncclSum, ch.comm_, ch.stream_);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_fail("collective", r);
    if (auto launched = ch.wait_comm(deadline, "collective launch"); !launched) return launched;
    status post;
    if (gather)
      post = reduce_gathered_on_device(ch.dev_, static_cast<std::size_t>(n), count, opt.op,
                                       data.data, ch.stream_);
    else if (opt.op == reduce_op::mean)
      post = divide_on_device(data.data, count, static_cast<float>(n), ch.stream_);
    if (!post) return post;
    return ch.wait_stream(deadline, "collective");
  });
  return st ? st : fail(st);
}

status nccl_aggregator::allgather(const group& members, const std::vector<float>& mine,
                                  std::vector<float>& all, std::vector<std::size_t>* counts,
                                  const reduce_options& opt) {
  all.clear();
  if (counts) counts->clear();
  if (auto ok = check_group(members, rank(), world_size()); !ok) return ok;
  // ncclAllGather needs equal counts: agree on the counts over MPI, pad to the largest.
  std::vector<float> mine_count{static_cast<float>(mine.size())}, got;
  reduce_options o = opt;
  o.channel = opt.channel ^ id_channel_salt;
  if (mine.size() > (1u << 24))
    return error{error_kind::invalid_input,
                 "nccl aggregator: allgather of more than 2^24 floats per member"};
  if (auto st = mpi_.allgather(members, mine_count, got, nullptr, o); !st) return st;
  std::size_t widest = 0;
  std::vector<std::size_t> sizes;
  for (float c : got) {
    sizes.push_back(static_cast<std::size_t>(c));
    widest = std::max(widest, sizes.back());
  }
  if (members.size() == 1) {
    all = mine;
  } else {
    std::vector<float> padded(mine);
    padded.resize(widest, 0.0f);
    auto st = with_channel(members, opt, [&](nccl_channel& ch, int n, auto deadline) -> status {
      if (auto run =
              ch.run(padded.data(), widest, true, widest * static_cast<std::size_t>(n), deadline);
          !run)
        return run;
      for (int k = 0; k < n; ++k) {
        const float* from = ch.host_.data() + static_cast<std::size_t>(k) * widest;
        all.insert(all.end(), from, from + sizes[static_cast<std::size_t>(k)]);
      }
      return {};
    });
    if (!st) {
      all.clear();
      return st;
    }
  }
  if (counts) *counts = sizes;
  return {};
}

}  // namespace tessera::comm
