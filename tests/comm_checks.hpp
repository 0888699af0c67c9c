#pragma once
// Checks shared by the aggregator tests of every backend (local threads in the unit suite,
// MPI and NCCL ranks under mpirun): each member builds every member's input from the seed, so
// it can compute the expected result in its own process with reference_reduce and compare bit
// for bit.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/comm/aggregator.hpp"

namespace tessera::testing {

/// Member `rank`'s input: `n` floats from (seed, rank). `grid` values are multiples of 2^-10 in
/// [-64, 64], so every partial sum of a few of them is exact in float and any summation order
/// gives the same bits; otherwise values spread over many magnitudes, where order matters.
inline std::vector<float> member_input(int rank, std::size_t n, std::uint64_t seed, bool grid) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(rank));
  std::vector<float> v(n);
  std::uniform_int_distribution<int> q(-65536, 65536);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-20, 20);
  for (auto& x : v)
    x = grid ? static_cast<float>(q(rng)) / 1024.0f
             : static_cast<float>(std::ldexp(mant(rng), ex(rng)));
  return v;
}

/// The expected result of a collective over `members`, computed in this process.
inline std::vector<float> expected_result(const comm::group& members, std::size_t n,
                                          std::uint64_t seed, bool grid, comm::reduce_op op) {
  std::vector<std::vector<float>> in;
  for (int r : members) in.push_back(member_input(r, n, seed, grid));
  std::vector<const float*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<float> out(n);
  comm::reference_reduce(ptrs, n, op, out.data());
  return out;
}

/// Runs one allreduce on `agg` as member agg.rank() of `members` and compares the result with
/// expected_result bit for bit. Returns "" when equal, else what differs.
inline std::string check_allreduce(comm::aggregator& agg, const comm::group& members,
                                   std::size_t n, std::uint64_t seed, bool grid,
                                   const comm::reduce_options& opt) {
  auto data = member_input(agg.rank(), n, seed, grid);
  auto st = agg.allreduce(members, data, opt);
  std::ostringstream why;
  if (!st) {
    why << agg.backend() << " rank " << agg.rank() << ": " << st.err().message;
    return why.str();
  }
  const auto want = expected_result(members, n, seed, grid, opt.op);
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(&data[i], &want[i], sizeof(float)) != 0) {
      why << agg.backend() << " rank " << agg.rank() << " group " << comm::describe(members, opt.channel)
          << ": element " << i << " is " << data[i] << ", expected " << want[i];
      return why.str();
    }
  return "";
}

/// Element count of member `rank`'s allgather input: from (seed, rank), 0 to `most`, so the
/// members pass different counts and some pass none.
inline std::size_t gather_count(int rank, std::uint64_t seed, std::size_t most) {
  return static_cast<std::size_t>((seed * 31u + static_cast<std::uint64_t>(rank) * 7u) %
                                  (most + 1));
}

/// Runs one allgather on `agg` as member agg.rank() of `members` (inputs of different sizes,
/// up to `most` floats) and compares the result with the concatenation of every member's
/// input in member order, bit for bit, and the reported counts. "" when equal.
inline std::string check_allgather(comm::aggregator& agg, const comm::group& members,
                                   std::size_t most, std::uint64_t seed,
                                   const comm::reduce_options& opt) {
  const auto mine = member_input(agg.rank(), gather_count(agg.rank(), seed, most), seed, false);
  std::vector<float> all;
  std::vector<std::size_t> counts;
  auto st = agg.allgather(members, mine, all, &counts, opt);
  std::ostringstream why;
  why << agg.backend() << " rank " << agg.rank() << " allgather "
      << comm::describe(members, opt.channel) << ": ";
  if (!st) return why.str() + st.err().message;
  std::vector<float> want;
  std::vector<std::size_t> want_counts;
  for (int r : members) {
    const auto v = member_input(r, gather_count(r, seed, most), seed, false);
    want.insert(want.end(), v.begin(), v.end());
    want_counts.push_back(v.size());
  }
  if (counts != want_counts) return why.str() + "counts differ";
  if (all.size() != want.size() ||
      (!all.empty() && std::memcmp(all.data(), want.data(), all.size() * sizeof(float)) != 0))
    return why.str() + "got " + std::to_string(all.size()) + " floats, expected " +
           std::to_string(want.size()) + " (or the bits differ)";
  return "";
}

}  // namespace tessera::testing
