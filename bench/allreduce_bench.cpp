// MPI aggregator backend vs a raw MPI_Allreduce of the same buffers, in the same run.
//
//   mpirun -np 2 --oversubscribe build/bench_allreduce_bench [--reps N] [--sizes-mb 1,10,100]
//       [--handoff | --handoff-only]
//
// For each size: alternating repetitions of (a) MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) on
// MPI_COMM_WORLD and (b) mpi_aggregator::allreduce(all ranks, sum, fastest) -- the same
// MPI_Allreduce, run on the backend's communicator thread (its own communicator from
// MPI_Comm_create_group) while the caller waits on a future with a timeout -- and (c) the
// reproducible rank_order mode (allgather + ordered sum). Each time is the maximum over ranks
// of one call between barriers; prints the medians and the ratio raw / backend (1.0 = no
// overhead; the target is >= 0.9 for (b)).
//
// Then, with --handoff (or alone with --handoff-only), the backend's fixed costs measured
// without any tessera code (docs/benchmarks/runtime.md, "MPI backend allreduce vs raw
// MPI_Allreduce"): the latency of the 16-byte MPI_Allreduce by which members agree on the
// element count before every call, and what it costs to run the same MPI_Allreduce on a
// thread other than the caller's: per size, medians of
//   caller -- on the calling thread;
//   worker -- handed to one persistent worker thread through a queue, the caller waiting on a
//             future (the backend's shape: one thread per communicator);
//   pinned -- the same, the worker first moved onto the caller's current CPU;
//   polled -- MPI_Iallreduce on the calling thread, completed by an MPI_Test loop (the
//             alternative that keeps timeouts without a second thread).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>
#include <pthread.h>
#include <sched.h>

#include "bench/bench_cli.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"
#include "runtime/node/comm/work_queue.hpp"

using namespace tessera::comm;

namespace {

using tessera::bench::median;

/// Max over ranks of a duration measured between barriers.
double max_over_ranks(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/// One persistent thread running submitted work in order.
class worker {
 public:
  worker() : thread_([this] { loop(); }) {}
  ~worker() {
    queue_.stop();
    thread_.join();
  }
  /// Runs `fn` on the worker and waits for it; `pin` first moves the worker onto this CPU.
  void run(const std::function<void()>& fn, bool pin) {
    if (pin) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(sched_getcpu(), &set);
      pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
    }
    auto task = std::make_shared<std::packaged_task<void()>>(fn);
    auto done = task->get_future();
    queue_.push([task] { (*task)(); });
    done.wait();
  }

 private:
  void loop() {
    while (auto next = queue_.pop()) next();
  }
  tessera::comm::work_queue queue_;
  std::thread thread_;
};

/// The hand-off table (see the file comment), printed by rank 0.
void handoff_table(int rank, int size, int reps, const std::vector<double>& sizes_mb) {
  worker w;
  auto agg = mpi_aggregator::create();
  if (!agg) MPI_Abort(MPI_COMM_WORLD, 1);
  group all;
  for (int r = 0; r < size; ++r) all.push_back(r);
  reduce_options fast;
  fast.op = reduce_op::sum;
  fast.order = reduce_order::fastest;
  // The backend's other fixed cost: agreeing on the element count (two 64-bit integers).
  std::vector<double> agree;
  for (int r = 0; r < std::max(reps, 15); ++r) {
    unsigned long long mine[2] = {1, 2}, got[2] = {0, 0};
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    MPI_Allreduce(mine, got, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    agree.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (rank == 0)
    std::printf("count agreement (16-byte MPI_Allreduce): %.6f s median\n", median(agree));
  if (rank == 0)
    std::printf(
        "hand-off: ranks %d, reps %d (median seconds, rank 0)\n%8s %10s %10s %10s %10s %10s\n",
        size, reps, "MB", "caller", "worker", "pinned", "polled", "backend");
  for (const double mb : sizes_mb) {
    const int n = static_cast<int>(mb * 1e6 / sizeof(float));
    std::vector<float> buf(static_cast<std::size_t>(n), 1.0f);
    auto allreduce = [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    std::vector<double> caller, handed, pinned, polled, backend;
    auto timed = [&](std::vector<double>& into, const std::function<void()>& op) {
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      op();
      into.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    allreduce();  // warm-up
    if (!(*agg)->allreduce(all, buf, fast)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int r = 0; r < reps; ++r) {
      timed(caller, allreduce);
      timed(backend, [&] { (*agg)->allreduce(all, buf, fast); });
      timed(handed, [&] { w.run(allreduce, false); });
      timed(pinned, [&] { w.run(allreduce, true); });
      timed(polled, [&] {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        for (int done = 0; !done;) MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      });
    }
    if (rank == 0)
      std::printf("%8.0f %10.5f %10.5f %10.5f %10.5f %10.5f\n", mb, median(caller), median(handed),
                  median(pinned), median(polled), median(backend));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int reps = 9;
  std::vector<double> sizes_mb{1, 10, 100};
  bool handoff = false, backend_table = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      if (rank == 0)
        std::printf(
            "usage: mpirun -np N bench_allreduce_bench [--reps N] [--sizes-mb 1,10,100]\n"
            "       [--handoff | --handoff-only]\n"
            "Median time of MPI_Allreduce vs the tessera MPI aggregator backend; with\n"
            "--handoff also the cost of running MPI_Allreduce on another thread.\n");
      MPI_Finalize();
      return 0;
    } else if (a == "--handoff") {
      handoff = true;
    } else if (a == "--handoff-only") {
      handoff = true;
      backend_table = false;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--sizes-mb" && i + 1 < argc) {
      sizes_mb.clear();
      std::stringstream ss(argv[++i]);
      std::string tok;
      while (std::getline(ss, tok, ',')) sizes_mb.push_back(std::atof(tok.c_str()));
    } else {
      if (rank == 0)
        std::fprintf(stderr, "bench_allreduce_bench: unknown argument '%s'\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  if (!backend_table) {
    handoff_table(rank, size, reps, sizes_mb);
    MPI_Finalize();
    return 0;
  }
  auto made = mpi_aggregator::create();
  if (!made) {
    std::fprintf(stderr, "%s\n", made.err().message.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  auto& agg = *made.value();
  group all;
  for (int r = 0; r < size; ++r) all.push_back(r);
  if (rank == 0)
    std::printf("ranks %d, reps %d (median, max over ranks)\n%8s %12s %12s %8s %14s %8s\n", size,
                reps, "MB", "raw s", "backend s", "ratio", "rank_order s", "ratio");
  for (double mb : sizes_mb) {
    const std::size_t n = static_cast<std::size_t>(mb * 1e6 / sizeof(float));
    std::vector<float> buf(n, 1.0f + static_cast<float>(rank));
    std::vector<double> raw, backend, ordered;
    reduce_options fast;
    fast.op = reduce_op::sum;
    fast.order = reduce_order::fastest;
    fast.timeout = std::chrono::milliseconds(120000);
    reduce_options ord = fast;
    ord.order = reduce_order::rank_order;
    // Warm-up, three calls of each mode: communicator creation, the transports' first
    // connections and first-touch of buffers stay out of the figures (measured: with one
    // warm-up call, the first size's median still carried them).
    for (int w = 0; w < 3; ++w) {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      for (const auto* o : {&fast, &ord})
        if (auto st = agg.allreduce(all, buf, *o); !st) {
          std::fprintf(stderr, "%s\n", st.err().message.c_str());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int r = 0; r < reps; ++r) {
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      raw.push_back(max_over_ranks(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = std::chrono::steady_clock::now();
      auto st = agg.allreduce(all, buf, fast);
      backend.push_back(max_over_ranks(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
      if (!st || buf[0] != static_cast<float>(size)) {
        std::fprintf(stderr, "rank %d: backend result wrong\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::fill(buf.begin(), buf.end(), 1.0f);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = std::chrono::steady_clock::now();
      st = agg.allreduce(all, buf, ord);
      ordered.push_back(max_over_ranks(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
      if (!st) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0) {
      const double r = median(raw), b = median(backend), o = median(ordered);
      std::printf("%8.0f %12.5f %12.5f %8.2f %14.5f %8.2f\n", mb, r, b, r / b, o, r / o);
      std::fflush(stdout);
    }
  }
  made.value().reset();
  if (handoff) handoff_table(rank, size, reps, sizes_mb);
  MPI_Finalize();
  return 0;
}
