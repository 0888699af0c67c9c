// A forked program job's `average` end to end, beside a raw MPI_Allreduce of the same bytes in
// the same run (docs/benchmarks/programs.md):
//
//   mpirun -np 3 --oversubscribe build/bench_program_average_bench [--sizes 1048576,16777216]
//       [--reps 3]
//
// Each rank is one copy's node: a lease server (runtime/node/program/lease_server.hpp) and, on
// a thread of its own, the copy's program, which does what a client does for `average`: makes
// a sealed memfd, writes its float32 values into it (known ones: rank r writes (r + 1) x
// (i mod 7)) and sends the line with it; the rank's executor takes the request and merges the
// copies in place through the MPI aggregator (actors/program_average.hpp, as program_round
// does), then answers. The time is the program's, from its first value written to the reply,
// the maximum over ranks; `repeat` reuses the program's memfd (its pages already there), as a
// program averaging every lease may. The mean is checked exactly: 2 x (i mod 7) for 3 copies.
// Then MPI_Allreduce(MPI_IN_PLACE, SUM) of the same floats on MPI_COMM_WORLD, a touched buffer.
// Prints one JSON object per size: medians in seconds, and average / allreduce.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "actors/program_average.hpp"
#include "bench/bench_cli.hpp"
#include "bench/lease_line_client.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"
#include "runtime/node/program/lease_server.hpp"

using namespace tessera;
using bench_clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "program_average_bench: %s\n", what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

double max_over_ranks(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

using program_end = bench::lease_line_client;

/// A sealed memfd of `n` floats, mapped.
struct shared_memory {
  explicit shared_memory(std::size_t n) : count(n) {
    fd = program::make_sealed_memfd(n);
    if (fd < 0) die("memfd_create failed");
    data = static_cast<float*>(
        ::mmap(nullptr, 4 * n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0));
    if (data == MAP_FAILED) die("mmap failed");
  }
  ~shared_memory() {
    ::munmap(data, 4 * count);
    ::close(fd);
  }
  std::size_t count;
  int fd = -1;
  float* data = nullptr;
};

/// One average: the program (a thread) writes and sends, this thread merges and answers.
/// Returns the program's seconds; checks the mean.
double one_average(program::lease_server& server, comm::aggregator& agg, std::size_t n, int rank,
                   std::unique_ptr<shared_memory>& reuse, std::uint64_t round) {
  const std::string token = std::string(63, 'a') + static_cast<char>('a' + round % 26);
  auto slot = std::make_shared<program::lease_slot>(program::lease_terms{});
  server.add(token, slot);
  double seconds = 0;
  std::thread prog([&] {
    program_end c(server.path());
    c.call("{\"v\":2,\"op\":\"hello\",\"token\":\"" + token + "\",\"pid\":1}\n");
    const auto t0 = bench_clock::now();
    if (!reuse) reuse = std::make_unique<shared_memory>(n);
    const float scale = static_cast<float>(rank + 1);
    for (std::size_t i = 0; i < n; ++i) reuse->data[i] = scale * static_cast<float>(i % 7);
    const auto reply =
        c.call("{\"v\":2,\"op\":\"average\",\"sizes\":[" + std::to_string(n) + "]}\n", reuse->fd);
    seconds = std::chrono::duration<double>(bench_clock::now() - t0).count();
    if (reply.find("\"averaged\"") == std::string::npos) die("no averaged reply: " + reply);
    for (std::size_t i = 0; i < n; i += 997)
      if (reuse->data[i] != 2.0f * static_cast<float>(i % 7)) die("the mean is not exact");
  });
  std::vector<std::size_t> sizes;
  std::shared_ptr<program::shared_floats> shared;
  while (!slot->take_average(sizes, shared)) std::this_thread::yield();
  comm::reduce_options opt;
  opt.channel = 1;
  opt.timeout = std::chrono::milliseconds(120000);
  auto merged = actors::merge_copies(agg, {0, 1, 2}, {rank, true, 1, shared->size()},
                                     shared->data(), shared, "mean", 1, opt);
  if (!merged || merged->copies != 3) die("the merge failed");
  slot->answer_average(sizes, merged->copies, 3);
  prog.join();
  server.remove(token);
  return seconds;
}

/// Seconds of MPI_Allreduce(MPI_IN_PLACE, SUM) on `n` floats (chunks of INT_MAX).
double raw_allreduce(std::vector<float>& buf) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (std::size_t off = 0; off < buf.size(); off += INT_MAX) {
    const int c = static_cast<int>(std::min<std::size_t>(INT_MAX, buf.size() - off));
    MPI_Allreduce(MPI_IN_PLACE, buf.data() + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  return MPI_Wtime() - t0;
}

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoull(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes{1u << 20, 16u << 20, 100u << 20};
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes = parse_sizes(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: mpirun -np 3 %s [--sizes N,N,...] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 3) die("run it with mpirun -np 3 (one rank per copy)");
  auto agg = comm::mpi_aggregator::create();
  if (!agg) die(agg.err().message);
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-avg-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto server = program::lease_server::start((dir / "lease.sock").string());
  if (!server) die(server.err().message);
  std::uint64_t round = 0;
  for (const std::size_t n : sizes) {
    std::vector<double> first, repeat, raw;
    for (int r = 0; r < reps; ++r) {
      std::unique_ptr<shared_memory> memory;
      MPI_Barrier(MPI_COMM_WORLD);
      first.push_back(max_over_ranks(one_average(**server, **agg, n, rank, memory, round++)));
      MPI_Barrier(MPI_COMM_WORLD);
      repeat.push_back(max_over_ranks(one_average(**server, **agg, n, rank, memory, round++)));
      std::vector<float> buf(n, static_cast<float>(rank + 1));
      raw.push_back(max_over_ranks(raw_allreduce(buf)));
    }
    if (rank == 0)
      std::printf(
          "{\"floats\": %zu, \"copies\": 3, \"average_s\": %.4f, "
          "\"average_repeat_s\": %.4f, \"allreduce_s\": %.4f, "
          "\"average_over_allreduce\": %.2f, \"repeat_over_allreduce\": %.2f}\n",
          n, bench::median(first), bench::median(repeat), bench::median(raw),
          bench::median(first) / bench::median(raw), bench::median(repeat) / bench::median(raw));
    std::fflush(stdout);
  }
  server->reset();
  std::filesystem::remove_all(dir);
  agg->reset();
  MPI_Finalize();
  return 0;
}
