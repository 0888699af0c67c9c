// Device buffers in the aggregators (runtime/node/comm/aggregator.hpp, device_memory.hpp): the
// decisions and host definitions that hold without a GPU, and the device kernels' equality
// with their host definitions where a GPU exists (skipped here with CUDA's reason). The MPI
// and NCCL backends' device-buffer cases run under mpirun in tests/mpi/test_aggregator_mpi.cpp.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <thread>

#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/comm/local_aggregator.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::comm;

namespace {

/// True (after saying why) when no GPU is usable here.
bool skip_without_gpu(const char* what) {
  std::string why;
  if (cuda_device_present(&why)) return false;
  WARN("SKIPPED " << what << ": needs a CUDA GPU (" << why << ")");
  return true;
}

}  // namespace

TEST_CASE(
    "mpi_device_path: host buffers stay on the host path, device buffers go to MPI only "
    "when it is CUDA-aware and the order is fastest",
    "[comm]") {
  for (bool aware : {false, true})
    for (auto order : {reduce_order::rank_order, reduce_order::fastest})
      CHECK(mpi_device_path(memory_kind::host, aware, order) == device_path::host);
  CHECK(mpi_device_path(memory_kind::device, false, reduce_order::fastest) == device_path::staged);
  CHECK(mpi_device_path(memory_kind::device, false, reduce_order::rank_order) ==
        device_path::staged);
  CHECK(mpi_device_path(memory_kind::device, true, reduce_order::fastest) == device_path::direct);
  // rank_order sums on the host in member order, so even a CUDA-aware MPI gets a staged copy.
  CHECK(mpi_device_path(memory_kind::device, true, reduce_order::rank_order) ==
        device_path::staged);
  CHECK(std::string(to_string(memory_kind::device)) == "device");
  CHECK(std::string(to_string(memory_kind::host)) == "host");
}

TEST_CASE("reduce_gathered sums the gathered parts in part order, as reference_reduce does",
          "[comm]") {
  // 1e8 + 1 - 1e8 in part order loses the 1 in float; another order would keep it.
  const std::vector<float> gathered = {1e8f, 2.0f, 1.0f, 4.0f, -1e8f, 6.0f};
  std::vector<float> out(2);
  reduce_gathered(gathered.data(), 3, 2, reduce_op::sum, out.data());
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 12.0f);
  reduce_gathered(gathered.data(), 3, 2, reduce_op::mean, out.data());
  CHECK(out[1] == 4.0f);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t n = 1 + rng() % 6, count = 1 + rng() % 50;
    std::vector<std::vector<float>> parts;
    std::vector<float> all;
    for (std::size_t k = 0; k < n; ++k) {
      parts.push_back(test::member_input(static_cast<int>(k), count, 40 + trial, false));
      all.insert(all.end(), parts.back().begin(), parts.back().end());
    }
    std::vector<const float*> ptrs;
    for (auto& p : parts) ptrs.push_back(p.data());
    const auto op = trial % 2 ? reduce_op::mean : reduce_op::sum;
    std::vector<float> want(count), got(count);
    reference_reduce(ptrs, count, op, want.data());
    reduce_gathered(all.data(), n, count, op, got.data());
    INFO("trial " << trial);
    CHECK(test::same_bits(got, want));
  }
}

TEST_CASE(
    "local backend: host buffer views give the vector path's bits, device views are "
    "refused naming the backend",
    "[comm]") {
  auto w = std::make_shared<local_world>(3);
  std::vector<std::string> failures(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      local_aggregator agg(w, r);
      reduce_options o;
      o.op = reduce_op::mean;
      failures[static_cast<std::size_t>(r)] =
          test::check_allreduce_on(agg, {0, 1, 2}, 257, 9, false, o, memory_kind::host);
      o.op = reduce_op::sum;
      if (failures[static_cast<std::size_t>(r)].empty() && r != 1)
        failures[static_cast<std::size_t>(r)] =
            test::check_allreduce_on(agg, {0, 2}, 33, 10, false, o, memory_kind::host);
    });
  for (auto& t : threads) t.join();
  for (const auto& f : failures) CHECK(f == "");

  local_aggregator solo(std::make_shared<local_world>(1), 0);
  float fake = 1.0f;  // never dereferenced: the view is refused first
  auto st = solo.allreduce({0}, buffer_view{&fake, 1, memory_kind::device, 0, nullptr}, {});
  REQUIRE_FALSE(st.ok());
  CHECK(st.err().kind == error_kind::invalid_input);
  CHECK(st.err().message.find("'local' does not take device buffers") != std::string::npos);
  CHECK(fake == 1.0f);
  auto null_view = solo.allreduce({0}, buffer_view{nullptr, 4, memory_kind::host, 0, nullptr}, {});
  REQUIRE_FALSE(null_view.ok());
  CHECK(null_view.err().message.find("at null") != std::string::npos);
}

TEST_CASE("device memory: without a GPU every operation fails with the reason", "[comm]") {
  std::string why;
  if (cuda_device_present(&why)) {
    WARN("the no-GPU checks do not apply: a CUDA GPU is present");
    CHECK(why.empty());
    return;
  }
  CHECK_FALSE(why.empty());
  auto dev = device_buffer::make(16, 0);
  REQUIRE_FALSE(dev);
  CHECK(dev.err().kind == error_kind::solver_failed);
  CHECK_FALSE(dev.err().message.empty());
  std::vector<float> host(4, 1.0f);
  auto copy = copy_to_device(host.data(), host.size(), 0, nullptr);
  REQUIRE_FALSE(copy.ok());
  CHECK(copy.err().kind == error_kind::solver_failed);
  // Without CUDA the message says so; with it, it carries the CUDA runtime's reason.
  CHECK(copy.err().message.find(built_with_cuda() ? "cuda" : "built without CUDA") !=
        std::string::npos);
}

TEST_CASE(
    "device memory on a GPU: the reduce kernel equals reduce_gathered bit for bit, NaN "
    "fill, pinned staging round trip",
    "[comm][gpu]") {
  if (skip_without_gpu("the device-kernel checks")) {
    CHECK_FALSE(device_buffer::make(1, 0));
    return;
  }
  const std::size_t n = 5, count = 100003;
  std::vector<float> all;
  for (std::size_t k = 0; k < n; ++k) {
    auto part = test::member_input(static_cast<int>(k), count, 77, false);
    all.insert(all.end(), part.begin(), part.end());
  }
  auto gathered = device_buffer::make(all.size(), 0);
  auto out = device_buffer::make(count, 0);
  REQUIRE(gathered);
  REQUIRE(out);
  REQUIRE(copy_to_device(all.data(), all.size(), 0, (*gathered)->data()));
  for (auto op : {reduce_op::sum, reduce_op::mean}) {
    std::vector<float> want(count), got(count);
    reduce_gathered(all.data(), n, count, op, want.data());
    REQUIRE(reduce_gathered_on_device((*gathered)->data(), n, count, op, (*out)->data(), nullptr));
    REQUIRE(synchronize_device(0));
    REQUIRE(copy_to_host((*out)->data(), count, 0, got.data()));
    CHECK(test::same_bits(got, want));
  }
  REQUIRE(fill_nan_on_device((*out)->data(), count, 0));
  std::vector<float> back(count, 0.0f);
  REQUIRE(copy_to_host((*out)->data(), count, 0, back.data()));
  CHECK(std::all_of(back.begin(), back.end(), [](float v) { return std::isnan(v); }));
  auto pinned = pinned_buffer::make(count);
  REQUIRE(pinned);
  REQUIRE(copy_to_host((*gathered)->data(), count, 0, (*pinned)->data()));
  CHECK(
      std::equal(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count), (*pinned)->data()));
}
