// The MPI (and, where a GPU exists, NCCL) aggregator backends under mpirun: every rank runs the
// same test cases in the same order (each is a sequence of collectives). Run as
//   mpirun -np 4 --oversubscribe tessera_mpi_aggregator_tests
// (ctest entry mpi:aggregator). The checks are the ones the local backend passes in the unit
// suite (tests/support.hpp): each rank computes the expected result in its own process.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include <mpi.h>

#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"
#ifdef TESSERA_WITH_NCCL
#include "runtime/node/comm/nccl_aggregator.hpp"
#endif
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::comm;

namespace {

std::unique_ptr<mpi_aggregator> g_mpi;

/// True on every rank when `ok` holds on every rank (so all ranks take the same branch).
bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// The shared checks on one backend: whole world and subsets, both orders, mean and sum, a
/// range of sizes, then a random script of overlapping groups on three channels.
void shared_checks(aggregator& agg) {
  const int world = agg.world_size();
  group all;
  for (int r = 0; r < world; ++r) all.push_back(r);
  for (auto op : {reduce_op::mean, reduce_op::sum})
    for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{100003}}) {
      reduce_options o;
      o.op = op;
      o.order = reduce_order::rank_order;
      INFO("rank_order, arbitrary values, n=" << n);
      CHECK(test::check_allreduce(agg, all, n, 1 + n, false, o) == "");
      o.order = reduce_order::fastest;
      INFO("fastest, grid values, n=" << n);
      CHECK(test::check_allreduce(agg, all, n, 2 + n, true, o) == "");
    }
  for (std::size_t most : {std::size_t{0}, std::size_t{5}, std::size_t{70001}}) {
    INFO("allgather, up to " << most << " floats per member");
    CHECK(test::check_allgather(agg, all, most, 3 + most, {}) == "");
  }
  std::mt19937 rng(12345);  // same script on every rank
  for (int i = 0; i < 30; ++i) {
    group g;
    for (int r = 0; r < world; ++r)
      if (rng() % 2) g.push_back(r);
    if (g.empty()) g.push_back(static_cast<int>(rng() % world));
    reduce_options o;
    o.channel = rng() % 3;
    o.op = rng() % 2 ? reduce_op::mean : reduce_op::sum;
    const std::size_t n = 1 + rng() % 5000;
    const bool in = std::find(g.begin(), g.end(), agg.rank()) != g.end();
    if (!in) continue;
    INFO("script op " << i << " group " << describe(g, o.channel));
    if (i % 4 == 3)  // allgathers interleaved on the same channels
      CHECK(test::check_allgather(agg, g, n % 700, 1000 + static_cast<std::uint64_t>(i), o) == "");
    else
      CHECK(test::check_allreduce(agg, g, n, 1000 + static_cast<std::uint64_t>(i), false, o) == "");
  }
}

/// The allreduce checks with every member's input in device memory on GPU `device` (and once
/// through a host view): the same bits as the host path, both orders, mean and sum.
void device_checks(aggregator& agg, int device) {
  group all;
  for (int r = 0; r < agg.world_size(); ++r) all.push_back(r);
  for (auto op : {reduce_op::mean, reduce_op::sum})
    for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{100003}}) {
      reduce_options o;
      o.op = op;
      o.order = reduce_order::rank_order;
      INFO(agg.backend() << " device buffers, rank_order, arbitrary values, n=" << n);
      CHECK(test::check_allreduce_on(agg, all, n, 7 + n, false, o, memory_kind::device, device) ==
            "");
      o.order = reduce_order::fastest;
      INFO(agg.backend() << " device buffers, fastest, grid values, n=" << n);
      CHECK(test::check_allreduce_on(agg, all, n, 8 + n, true, o, memory_kind::device, device) ==
            "");
    }
  CHECK(test::check_allreduce_on(agg, all, 999, 9, false, {}, memory_kind::host) == "");
}

/// This rank's GPU (its node-local rank modulo the GPUs), when every rank has one and, with
/// `own_gpu`, a GPU of its own (NCCL takes one rank per GPU); -1 after printing (rank 0) why
/// not, on every rank alike.
int gpu_per_rank_or_skip(const char* what, bool own_gpu) {
  std::string why;
  bool here = cuda_device_present(&why);
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = local_size ? std::atoi(local_size) : 1;
  if (here && own_gpu && ranks_here > cuda_device_count()) {
    here = false;
    why = std::to_string(ranks_here) + " ranks on a node with " +
          std::to_string(cuda_device_count()) + " GPUs (run one rank per GPU)";
  }
  if (!all_ranks(here)) {
    if (g_mpi->rank() == 0)
      std::cout << "SKIPPED " << what << ": they need a CUDA GPU " << (own_gpu ? "per" : "on every")
                << " rank (" << why << ")\n";
    return -1;
  }
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return (local_rank ? std::atoi(local_rank) : 0) % cuda_device_count();
}

}  // namespace

TEST_CASE("mpi backend: exact mean and sum against a mean computed in one process", "[mpi]") {
  REQUIRE(g_mpi);
  REQUIRE(g_mpi->world_size() >= 2);
  shared_checks(*g_mpi);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi backend: a communicator over a rank subset works while the others do other work",
          "[mpi]") {
  REQUIRE(g_mpi->world_size() >= 4);
  const int me = g_mpi->rank();
  const std::size_t before = g_mpi->communicators();
  reduce_options o;
  o.channel = 77;
  if (me == 1 || me == 3) {
    // 20 collectives on {1,3}; ranks 0 and 2 are busy meanwhile and never call into MPI on
    // this communicator.
    for (int i = 0; i < 20; ++i)
      CHECK(test::check_allreduce(*g_mpi, {1, 3}, 4096, 500 + i, false, o) == "");
    CHECK(g_mpi->communicators() == before + 1);  // made once, then reused
  } else {
    // Other work: local computation, then a pair collective of their own on another group.
    double acc = 0;
    for (int i = 0; i < 2000000; ++i) acc += std::sqrt(static_cast<double>(i));
    CHECK(acc > 0);
    CHECK(test::check_allreduce(*g_mpi, {0, 2}, 100, 900, false, o) == "");
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi backend: a late member makes the call time out and the channel stay broken",
          "[mpi]") {
  const int me = g_mpi->rank();
  if (me == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    auto st = g_mpi->run_on({0, 1}, 4242, std::chrono::milliseconds(300), [](void* c) {
      MPI_Barrier(*static_cast<MPI_Comm*>(c));
      return status{};
    });
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE_FALSE(st.ok());
    CHECK(st.err().kind == error_kind::io);
    CHECK(st.err().message.find("timed out") != std::string::npos);
    CHECK(waited < 1.2);  // rank 1 arrives after 1.5 s
    std::vector<float> v{1.0f};
    reduce_options o;
    o.channel = 4242;
    auto again = g_mpi->allreduce({0, 1}, v, o);
    REQUIRE_FALSE(again.ok());
    CHECK(again.err().message.find("broken") != std::string::npos);
  } else if (me == 1) {
    // Comes late (but comes, so rank 0's communicator thread is released).
    auto st = g_mpi->run_on({0, 1}, 4242, std::chrono::milliseconds(10000), [](void* c) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      MPI_Barrier(*static_cast<MPI_Comm*>(c));
      return status{};
    });
    CHECK(st.ok());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("mpi backend: a bad group is refused before any communication", "[mpi]") {
  std::vector<float> v{1.0f};
  auto st = g_mpi->allreduce({g_mpi->world_size()}, v, {});
  REQUIRE_FALSE(st.ok());
  CHECK(st.err().kind == error_kind::invalid_input);
}

TEST_CASE(
    "mpi backend: device buffers give the host path's bits (staged through pinned memory, "
    "or direct to a CUDA-aware MPI)",
    "[mpi][gpu]") {
  if (g_mpi->rank() == 0)
    std::cout << "mpi backend: CUDA-aware MPI: " << (g_mpi->cuda_aware() ? "yes" : "no") << "\n";
  const int device = gpu_per_rank_or_skip("mpi backend device-buffer checks", false);
  if (device < 0) {
    // Without GPUs a host view still takes the vector path.
    group all;
    for (int r = 0; r < g_mpi->world_size(); ++r) all.push_back(r);
    CHECK(test::check_allreduce_on(*g_mpi, all, 999, 9, false, {}, memory_kind::host) == "");
    return;
  }
  device_checks(*g_mpi, device);
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("nccl backend: the shared checks where a GPU exists", "[nccl]") {
#ifdef TESSERA_WITH_NCCL
  if (gpu_per_rank_or_skip("nccl backend checks", true) < 0) return;
  auto nccl = nccl_aggregator::create(*g_mpi);
  REQUIRE(nccl.ok());
  std::cout << "nccl backend: rank " << g_mpi->rank() << " on GPU " << (*nccl)->device() << "\n";
  shared_checks(**nccl);
  device_checks(**nccl, (*nccl)->device());
  MPI_Barrier(MPI_COMM_WORLD);
#else
  if (g_mpi->rank() == 0)
    std::cout << "SKIPPED nccl backend checks: built without NCCL (CUDA/NCCL not found)\n";
#endif
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int code = 1;
  {
    auto made = mpi_aggregator::create();
    if (!made) {
      std::cerr << made.err().message << '\n';
    } else {
      g_mpi = std::move(made.value());
      code = Catch::Session().run(argc, argv);
      g_mpi.reset();
    }
  }
  // Every rank reports; the run fails if any rank failed.
  int worst = 0;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
