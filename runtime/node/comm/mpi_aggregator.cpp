#include "runtime/node/comm/mpi_aggregator.hpp"

#include <atomic>
#include <deque>
#include <future>
#include <limits>
#include <thread>

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_Query_cuda_support
#endif

#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/comm/work_queue.hpp"

namespace tessera::comm {

namespace {

/// "MPI_ERR_...: text" for an MPI return code.
std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<std::size_t>(len));
}

/// Largest element count per MPI call (counts are int).
constexpr std::size_t max_chunk = static_cast<std::size_t>(std::numeric_limits<int>::max()) / 4;

}  // namespace

/// One communicator over a member set (for one channel) and the thread that drives it.
class mpi_channel {
 public:
  /// What the thread runs: a collective on the communicator. `abandon` is set by a caller that
  /// timed out; the operation stops testing and returns (its request stays pending).
  using task = std::function<status(MPI_Comm, const std::atomic<bool>& abandon)>;

  mpi_channel(group members, std::uint64_t channel, int tag)
      : members_(std::move(members)), channel_(channel), tag_(tag) {
    thread_ = std::thread([this] { loop(); });
  }

  ~mpi_channel() {
    queue_.stop();
    if (broken_.load()) {
      thread_.detach();  // may be stuck in MPI forever; the graveyard keeps buffers alive
      leak_graveyard();
    } else {
      thread_.join();
      if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    }
  }

  /// Takes the storage a timed-out operation may still write to, for the graveyard.
  using keep_fn = std::function<std::shared_ptr<void>()>;

  /// Runs `t` on the thread; waits at most `timeout`. On timeout the channel becomes broken and
  /// what `keep_alive` returns (the storage the operation writes) moves to the graveyard.
  status run(const task& t, std::chrono::milliseconds timeout, const keep_fn& keep_alive) {
    if (broken_.load())
      return error{error_kind::io, "mpi aggregator: " + describe(members_, channel_) +
                                       " is broken by an earlier timeout"};
    auto abandon = std::make_shared<std::atomic<bool>>(false);
    auto job = std::make_shared<std::packaged_task<status()>>(
        [this, t, abandon] { return t(comm_, *abandon); });
    auto fut = job->get_future();
    queue_.push([job, abandon] { (*job)(); });
    if (fut.wait_for(timeout) == std::future_status::ready) return fut.get();
    abandon->store(true);
    broken_.store(true);
    {
      std::lock_guard<std::mutex> g(graveyard_mu_);
      if (keep_alive) graveyard_.push_back(keep_alive());
    }
    return error{error_kind::io, "mpi aggregator: " + describe(members_, channel_) +
                                     " timed out after " + std::to_string(timeout.count()) +
                                     " ms (a member did not take part); the communicator is "
                                     "now unusable"};
  }

  bool broken() const { return broken_.load(); }

 private:
  void loop() {
    while (auto next = queue_.pop()) {  // empty once stopped and drained
      if (comm_ == MPI_COMM_NULL && !create_failed_) create();
      next();
    }
  }

  /// MPI_Comm_create_group over the members; blocks until all of them call it.
  void create() {
    MPI_Group world = MPI_GROUP_NULL, sub = MPI_GROUP_NULL;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(members_.size()), members_.data(), &sub);
    const int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, tag_, &comm_);
    MPI_Group_free(&sub);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS) {
      create_failed_ = true;
      comm_ = MPI_COMM_NULL;
    }
  }

  /// The thread is detached and may still use these buffers: never free them.
  void leak_graveyard() {
    auto* keep = new std::deque<std::shared_ptr<void>>(std::move(graveyard_));
    (void)keep;
  }

  group members_;
  std::uint64_t channel_;
  int tag_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // owned by the thread
  bool create_failed_ = false;     // owned by the thread
  work_queue queue_;
  std::atomic<bool> broken_{false};
  std::mutex graveyard_mu_;
  std::deque<std::shared_ptr<void>> graveyard_;
  std::thread thread_;
};

namespace {

/// An error for a failed MPI call, else success.
status check_rc(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return {};
  return error{error_kind::solver_failed,
               std::string("mpi aggregator: ") + what + ": " + mpi_error_text(rc)};
}

/// The error for an operation whose caller gave up before it began.
status abandoned(const char* what) {
  return error{error_kind::io,
               std::string("mpi aggregator: ") + what + " abandoned (the caller timed out)"};
}

status no_comm(const group& members, std::uint64_t channel) {
  return error{error_kind::solver_failed,
               "mpi aggregator: MPI_Comm_create_group failed for " + describe(members, channel)};
}

}  // namespace

result<std::unique_ptr<mpi_aggregator>> mpi_aggregator::create() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (!initialised || finalised)
    return error{error_kind::solver_failed, "mpi aggregator: MPI is not initialised"};
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return error{error_kind::solver_failed,
                 "mpi aggregator: MPI was initialised without MPI_THREAD_MULTIPLE (level " +
                     std::to_string(provided) + "); call MPI_Init_thread with it"};
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<mpi_aggregator>(new mpi_aggregator(rank, size, mpi_cuda_aware()));
}

mpi_aggregator::~mpi_aggregator() {
  std::lock_guard<std::mutex> g(mu_);
  channels_.clear();
}

std::shared_ptr<mpi_channel> mpi_aggregator::channel_for(const group& members,
                                                         std::uint64_t channel) {
  const std::uint64_t key = group_key(members, channel);
  std::lock_guard<std::mutex> g(mu_);
  auto it = channels_.find(key);
  if (it != channels_.end()) return it->second;
  void* ub_ptr = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub_ptr, &flag);
  const long ub = flag && ub_ptr ? *static_cast<int*>(ub_ptr) : 32767;
  const int tag = static_cast<int>(key % static_cast<std::uint64_t>(ub));
  auto ch = std::make_shared<mpi_channel>(members, channel, tag);
  channels_.emplace(key, ch);
  return ch;
}

std::size_t mpi_aggregator::communicators() const {
  std::lock_guard<std::mutex> g(mu_);
  return channels_.size();
}

status mpi_aggregator::run_on(const group& members, std::uint64_t channel,
                              std::chrono::milliseconds timeout,
                              const std::function<status(void* comm)>& fn) {
  if (auto ok = check_group(members, rank_, size_); !ok) return ok;
  auto ch = channel_for(members, channel);
  return ch->run(
      [members, channel, fn](MPI_Comm comm, const std::atomic<bool>&) -> status {
        if (comm == MPI_COMM_NULL) return no_comm(members, channel);
        return fn(&comm);
      },
      timeout, nullptr);
}

namespace {

/// The collective of allreduce on `count` floats at `buf` over a communicator of `n` members.
/// `buf` is host memory, or device memory (`on_device`, CUDA-aware MPI, fastest order only:
/// the mean's division then runs on the device).
mpi_channel::task allreduce_task(float* buf, std::size_t count, int n, const reduce_options& o,
                                 const group& members, bool on_device, int device) {
  return [=](MPI_Comm comm, const std::atomic<bool>& abandon) -> status {
    if (comm == MPI_COMM_NULL) return no_comm(members, o.channel);
    // Every member must pass the same count: agree on it first (cheap, and a mismatch would
    // otherwise corrupt memory).
    unsigned long long both[2] = {count, ~static_cast<unsigned long long>(count)};
    unsigned long long agreed[2] = {0, 0};
    if (auto st = check_rc(MPI_Allreduce(both, agreed, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm),
                           "size check");
        !st)
      return st;
    const unsigned long long lo = agreed[0], hi = ~agreed[1];
    if (lo != hi)
      return error{error_kind::invalid_input,
                   "mpi aggregator: members of " + describe(members, o.channel) +
                       " passed different element counts (" + std::to_string(lo) + " to " +
                       std::to_string(hi) + ")"};
    if (o.order == reduce_order::fastest) {
      for (std::size_t off = 0; off < count; off += max_chunk) {
        const int c = static_cast<int>(std::min(max_chunk, count - off));
        if (abandon.load()) return abandoned("allreduce");
        if (auto st = check_rc(MPI_Allreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, MPI_SUM, comm),
                               "allreduce");
            !st)
          return st;
      }
      if (o.op != reduce_op::mean) return {};
      const float fn = static_cast<float>(n);
      if (on_device) {
        if (auto st = divide_on_device(buf, count, fn, nullptr); !st) return st;
        return synchronize_device(device);
      }
      for (std::size_t i = 0; i < count; ++i) buf[i] /= fn;
      return {};
    }
    if (on_device)
      return error{error_kind::internal, "mpi aggregator: rank_order on device memory"};
    // rank_order: gather everything, sum in member order here (comm rank i = members[i]).
    const std::size_t chunk = std::max<std::size_t>(1, max_chunk / static_cast<std::size_t>(n));
    std::vector<float> all;
    for (std::size_t off = 0; off < count; off += chunk) {
      const std::size_t c = std::min(chunk, count - off);
      all.resize(c * static_cast<std::size_t>(n));
      if (abandon.load()) return abandoned("allgather");
      if (auto st = check_rc(MPI_Allgather(buf + off, static_cast<int>(c), MPI_FLOAT, all.data(),
                                           static_cast<int>(c), MPI_FLOAT, comm),
                             "allgather");
          !st)
        return st;
      reduce_gathered(all.data(), static_cast<std::size_t>(n), c, o.op, buf + off);
    }
    return {};
  };
}

/// Sets a failed device buffer to NaNs (best effort: the device may be what failed).
void poison(const buffer_view& data) {
  (void)fill_nan_on_device(data.data, data.count, data.device);
}

}  // namespace

bool mpi_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;  // this MPI was built without CUDA support (or is not Open MPI)
#endif
}

status mpi_aggregator::allreduce(const group& members, std::vector<float>& data,
                                 const reduce_options& opt) {
  if (auto ok = check_group(members, rank_, size_); !ok) {
    std::fill(data.begin(), data.end(), std::numeric_limits<float>::quiet_NaN());
    return ok;
  }
  const std::size_t count = data.size();
  if (members.size() == 1) {
    reference_reduce({data.data()}, count, opt.op, data.data());
    return {};
  }
  auto ch = channel_for(members, opt.channel);
  const int n = static_cast<int>(members.size());
  auto keep = [&data]() -> std::shared_ptr<void> {
    auto kept = std::make_shared<std::vector<float>>(std::move(data));
    data.assign(kept->size(), std::numeric_limits<float>::quiet_NaN());
    return kept;
  };
  auto st =
      ch->run(allreduce_task(data.data(), count, n, opt, members, false, 0), opt.timeout, keep);
  if (!st && !ch->broken())
    std::fill(data.begin(), data.end(), std::numeric_limits<float>::quiet_NaN());
  return st;
}

status mpi_aggregator::allreduce_in_place(const group& members, const buffer_view& data,
                                          const reduce_options& opt) {
  const auto nan = std::numeric_limits<float>::quiet_NaN();
  if (auto ok = check_group(members, rank_, size_); !ok) {
    std::fill(data.data, data.data + data.count, nan);
    return ok;
  }
  if (members.size() == 1) {
    reference_reduce({data.data}, data.count, opt.op, data.data);
    return {};
  }
  // MPI works on the caller's storage itself; after a time-out its owner goes to the
  // graveyard with the communicator, so a late write never lands in freed memory.
  auto ch = channel_for(members, opt.channel);
  auto st = ch->run(allreduce_task(data.data, data.count, static_cast<int>(members.size()), opt,
                                   members, false, 0),
                    opt.timeout, [owner = data.owner] { return owner; });
  if (!st && !ch->broken()) std::fill(data.data, data.data + data.count, nan);
  return st;
}

status mpi_aggregator::allreduce(const group& members, buffer_view data,
                                 const reduce_options& opt) {
  const device_path path = mpi_device_path(data.memory, cuda_aware_, opt.order);
  if (path == device_path::host && data.owner) return allreduce_in_place(members, data, opt);
  if (path == device_path::host) return aggregator::allreduce(members, data, opt);
  if (auto ok = check_group(members, rank_, size_); !ok) {
    poison(data);
    return ok;
  }
  // The operation works on storage it owns (pinned host memory, or a device copy for a
  // CUDA-aware MPI), so a timed-out collective never writes the caller's buffer.
  const bool direct = path == device_path::direct;
  std::shared_ptr<void> owner;
  float* work = nullptr;
  if (direct) {
    auto copy = device_buffer::make(data.count, data.device);
    if (!copy) return copy.err();
    work = (*copy)->data();
    owner = std::shared_ptr<device_buffer>(std::move(*copy));
  } else {
    auto pinned = pinned_buffer::make(data.count);
    if (!pinned) return pinned.err();
    work = (*pinned)->data();
    owner = *pinned;
  }
  auto in = direct ? copy_between_devices(data.data, data.count, data.device, work)
                   : copy_to_host(data.data, data.count, data.device, work);
  if (!in) return in;
  status st;
  if (members.size() == 1) {
    if (!direct) reference_reduce({work}, data.count, opt.op, work);
  } else {
    auto ch = channel_for(members, opt.channel);
    st = ch->run(allreduce_task(work, data.count, static_cast<int>(members.size()), opt, members,
                                direct, data.device),
                 opt.timeout, [owner] { return owner; });
  }
  if (st)
    st = direct ? copy_between_devices(work, data.count, data.device, data.data)
                : copy_to_device(work, data.count, data.device, data.data);
  if (!st) poison(data);
  return st;
}

status mpi_aggregator::allgather(const group& members, const std::vector<float>& mine,
                                 std::vector<float>& all, std::vector<std::size_t>* counts,
                                 const reduce_options& opt) {
  all.clear();
  if (counts) counts->clear();
  if (auto ok = check_group(members, rank_, size_); !ok) return ok;
  if (members.size() == 1) {
    all = mine;
    if (counts) counts->assign(1, mine.size());
    return {};
  }
  // The operation owns its input copy and its output: after a timeout the communicator
  // thread may still be inside MPI with them.
  struct buffers {
    std::vector<float> send;
    std::vector<float> recv;
    std::vector<std::size_t> counts;
  };
  auto b = std::make_shared<buffers>();
  b->send = mine;
  const int n = static_cast<int>(members.size());
  auto body = [b, n, members, channel = opt.channel](MPI_Comm comm,
                                                     const std::atomic<bool>& abandon) -> status {
    if (comm == MPI_COMM_NULL) return no_comm(members, channel);
    std::vector<unsigned long long> got(static_cast<std::size_t>(n));
    unsigned long long mine_count = b->send.size();
    if (auto st = check_rc(MPI_Allgather(&mine_count, 1, MPI_UNSIGNED_LONG_LONG, got.data(), 1,
                                         MPI_UNSIGNED_LONG_LONG, comm),
                           "allgather counts");
        !st)
      return st;
    std::vector<int> cnt(static_cast<std::size_t>(n)), disp(static_cast<std::size_t>(n));
    unsigned long long total = 0;
    for (int k = 0; k < n; ++k) {
      disp[static_cast<std::size_t>(k)] = static_cast<int>(total);
      cnt[static_cast<std::size_t>(k)] = static_cast<int>(got[static_cast<std::size_t>(k)]);
      total += got[static_cast<std::size_t>(k)];
    }
    if (total > static_cast<unsigned long long>(std::numeric_limits<int>::max()))
      return error{error_kind::invalid_input,
                   "mpi aggregator: allgather of " + std::to_string(total) + " floats over " +
                       describe(members, channel) + " exceeds MPI's int counts"};
    b->recv.resize(static_cast<std::size_t>(total));
    if (abandon.load()) return abandoned("allgather");
    if (auto st =
            check_rc(MPI_Allgatherv(b->send.data(), static_cast<int>(b->send.size()), MPI_FLOAT,
                                    b->recv.data(), cnt.data(), disp.data(), MPI_FLOAT, comm),
                     "allgatherv");
        !st)
      return st;
    b->counts.assign(got.begin(), got.end());
    return {};
  };
  auto st = channel_for(members, opt.channel)->run(body, opt.timeout, nullptr);
  if (!st) return st;
  all = std::move(b->recv);
  if (counts) *counts = std::move(b->counts);
  return {};
}

}  // namespace tessera::comm
