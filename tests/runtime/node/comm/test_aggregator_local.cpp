// The local (threads) aggregator backend, and the pieces every backend shares
// (reference_reduce, check_group, group_key). The MPI and NCCL backends run the same checks
// (tests/support.hpp) under mpirun in tests/mpi/test_aggregator_mpi.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <thread>

#include "runtime/node/comm/local_aggregator.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::comm;

namespace {

/// One collective of a scripted sequence: its members, channel and options.
struct scripted_op {
  group members;
  reduce_options opt;
  std::size_t n = 0;
  bool grid = false;
  bool gather = false;  ///< an allgather (inputs of up to n floats) instead of an allreduce
};

/// Runs `ops` on a local world of `world` threads: each thread takes part, in list order, in
/// the ops that contain it. Returns the first failure ("" when all matched).
std::string run_script(int world, const std::vector<scripted_op>& ops, std::uint64_t seed) {
  auto w = std::make_shared<local_world>(world);
  std::vector<std::string> failures(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      local_aggregator agg(w, r);
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& o = ops[i];
        if (std::find(o.members.begin(), o.members.end(), r) == o.members.end()) continue;
        auto f = o.gather ? test::check_allgather(agg, o.members, o.n, seed + i, o.opt)
                          : test::check_allreduce(agg, o.members, o.n, seed + i, o.grid, o.opt);
        if (!f.empty() && failures[r].empty()) failures[r] = f;
      }
    });
  for (auto& t : threads) t.join();
  for (auto& f : failures)
    if (!f.empty()) return f;
  return "";
}

}  // namespace

TEST_CASE("reference_reduce sums in member order, then divides for the mean", "[comm]") {
  // 1e8 + 1 - 1e8: in order ((1e8 + 1) - 1e8) the 1 is lost in float (spacing 8 at 1e8).
  const float a[] = {1e8f, 2.0f};
  const float b[] = {1.0f, 4.0f};
  const float c[] = {-1e8f, 6.0f};
  float out[2];
  reference_reduce({a, b, c}, 2, reduce_op::sum, out);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 12.0f);
  reference_reduce({a, c, b}, 2, reduce_op::sum, out);
  CHECK(out[0] == 1.0f);
  reference_reduce({a, b, c}, 2, reduce_op::mean, out);
  CHECK(out[1] == 4.0f);
}

TEST_CASE("check_group rejects bad member sets with the reason", "[comm]") {
  CHECK(check_group({0, 2, 3}, 2, 4).ok());
  CHECK_FALSE(check_group({}, 0, 4).ok());
  auto unsorted = check_group({2, 0}, 0, 4);
  REQUIRE_FALSE(unsorted.ok());
  CHECK(unsorted.err().message.find("increasing") != std::string::npos);
  CHECK_FALSE(check_group({0, 0}, 0, 4).ok());
  auto outside = check_group({0, 4}, 0, 4);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.err().message.find("outside 0..3") != std::string::npos);
  auto self = check_group({1, 2}, 0, 4);
  REQUIRE_FALSE(self.ok());
  CHECK(self.err().message.find("caller's rank 0") != std::string::npos);
}

TEST_CASE("group_key separates member sets and channels", "[comm]") {
  CHECK(group_key({0, 1}, 0) == group_key({0, 1}, 0));
  CHECK(group_key({0, 1}, 0) != group_key({0, 1}, 1));
  CHECK(group_key({0, 1}, 0) != group_key({0, 2}, 0));
  CHECK(group_key({0, 1}, 0) != group_key({0, 1, 2}, 0));
}

TEST_CASE("local backend: exact mean, sum and gather over the whole world and over subsets",
          "[comm]") {
  std::vector<scripted_op> ops;
  for (auto op : {reduce_op::mean, reduce_op::sum})
    for (auto order : {reduce_order::rank_order, reduce_order::fastest}) {
      reduce_options o;
      o.op = op;
      o.order = order;
      ops.push_back({{0, 1, 2, 3}, o, 1000, false});
      ops.push_back({{1, 3}, o, 17, false});
      ops.push_back({{0, 2, 3}, o, 1, true});
      ops.push_back({{2}, o, 5, false});
      ops.push_back({{0, 1, 2, 3}, o, 40, false, true});
      ops.push_back({{1, 2}, o, 3, false, true});
    }
  CHECK(run_script(4, ops, 11) == "");
}

TEST_CASE("local backend: random scripts of overlapping groups and channels (property)", "[comm]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int world = 2 + static_cast<int>(rng() % 5);
    std::vector<scripted_op> ops;
    const int count = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < count; ++i) {
      scripted_op o;
      for (int r = 0; r < world; ++r)
        if (rng() % 2) o.members.push_back(r);
      if (o.members.empty()) o.members.push_back(static_cast<int>(rng() % world));
      o.opt.channel = rng() % 3;
      o.opt.op = rng() % 2 ? reduce_op::mean : reduce_op::sum;
      o.n = 1 + rng() % 300;
      o.gather = rng() % 3 == 0;
      ops.push_back(o);
    }
    INFO("trial " << trial << " world " << world);
    CHECK(run_script(world, ops, 100 + static_cast<std::uint64_t>(trial)) == "");
  }
}

TEST_CASE("local backend: a member that never comes times out, and the group stays broken",
          "[comm]") {
  auto w = std::make_shared<local_world>(3);
  local_aggregator a0(w, 0);
  reduce_options o;
  o.timeout = std::chrono::milliseconds(150);
  std::vector<float> v{1, 2, 3};
  const auto t0 = std::chrono::steady_clock::now();
  auto st = a0.allreduce({0, 1}, v, o);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(st.ok());
  CHECK(st.err().kind == error_kind::io);
  CHECK(st.err().message.find("timed out") != std::string::npos);
  CHECK(waited >= 0.14);
  CHECK(waited < 5.0);
  CHECK(std::isnan(v[0]));
  // Rank 1 arriving late finds the group broken at once instead of waiting.
  local_aggregator a1(w, 1);
  std::vector<float> u{1, 2, 3};
  auto late = a1.allreduce({0, 1}, u, o);
  REQUIRE_FALSE(late.ok());
  CHECK(late.err().message.find("broken") != std::string::npos);
  // Other channels of the same members are unaffected.
  o.channel = 9;
  std::vector<float> x{2}, y{4};
  std::thread t([&] { CHECK(a1.allreduce({0, 1}, y, o).ok()); });
  CHECK(a0.allreduce({0, 1}, x, o).ok());
  t.join();
  CHECK(x[0] == 3.0f);
  CHECK(y[0] == 3.0f);
}

TEST_CASE("local backend: members disagreeing on the size fail instead of corrupting", "[comm]") {
  auto w = std::make_shared<local_world>(2);
  local_aggregator a0(w, 0), a1(w, 1);
  reduce_options o;
  o.timeout = std::chrono::milliseconds(2000);
  std::vector<float> x(3, 1.0f), y(4, 1.0f);
  status s1;
  std::thread t([&] { s1 = a1.allreduce({0, 1}, y, o); });
  auto s0 = a0.allreduce({0, 1}, x, o);
  t.join();
  CHECK_FALSE(s0.ok());
  CHECK_FALSE(s1.ok());
  CHECK(s0.err().message.find("different element counts") != std::string::npos);
}

TEST_CASE("local backend: a bad group is refused without waiting", "[comm]") {
  auto w = std::make_shared<local_world>(2);
  local_aggregator a0(w, 0);
  std::vector<float> v{1};
  auto st = a0.allreduce({1}, v, {});
  REQUIRE_FALSE(st.ok());
  CHECK(st.err().kind == error_kind::invalid_input);
}
