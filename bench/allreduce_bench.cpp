// MPI aggregator backend vs a raw MPI_Allreduce of the same buffers, in the same run.
//
//   mpirun -np 2 --oversubscribe build/bench_allreduce_bench [--reps N] [--sizes-mb 1,10,100]
//
// For each size: alternating repetitions of (a) MPI_Allreduce(MPI_IN_PLACE, MPI_SUM) on
// MPI_COMM_WORLD and (b) mpi_aggregator::allreduce(all ranks, sum, fastest) -- the backend's
// communicator thread, non-blocking collective and test loop -- and (c) the reproducible
// rank_order mode (allgather + ordered sum). Prints the median seconds and the ratio
// raw / backend (1.0 = no overhead; the target is >= 0.9 for (b)).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <mpi.h>

#include "runtime/comm/mpi_aggregator.hpp"

using namespace tessera::comm;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Max over ranks of a duration measured between barriers.
double max_over_ranks(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
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
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      if (rank == 0)
        std::printf("usage: mpirun -np N bench_allreduce_bench [--reps N] [--sizes-mb 1,10,100]\n"
                    "Median time of MPI_Allreduce vs the tessera MPI aggregator backend.\n");
      MPI_Finalize();
      return 0;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--sizes-mb" && i + 1 < argc) {
      sizes_mb.clear();
      std::stringstream ss(argv[++i]);
      std::string tok;
      while (std::getline(ss, tok, ',')) sizes_mb.push_back(std::atof(tok.c_str()));
    } else {
      if (rank == 0) std::fprintf(stderr, "bench_allreduce_bench: unknown argument '%s'\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
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
    // Warm-up: communicator creation and first-touch of buffers stay out of the figures.
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (auto st = agg.allreduce(all, buf, fast); !st) {
      std::fprintf(stderr, "%s\n", st.err().message.c_str());
      MPI_Abort(MPI_COMM_WORLD, 1);
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
  MPI_Finalize();
  return 0;
}
