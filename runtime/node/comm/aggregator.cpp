#include "runtime/node/comm/aggregator.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

namespace tessera::comm {

status check_group(const group& members, int rank, int world) {
  auto bad = [&](const std::string& what) {
    return error{error_kind::invalid_input,
                 "aggregator group " + describe(members, 0) + ": " + what};
  };
  if (members.empty()) return bad("no members");
  bool has_self = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= world)
      return bad("rank " + std::to_string(members[i]) + " is outside 0.." +
                 std::to_string(world - 1));
    if (i > 0 && members[i] <= members[i - 1])
      return bad("ranks must be distinct and in increasing order");
    if (members[i] == rank) has_self = true;
  }
  if (!has_self) return bad("does not contain the caller's rank " + std::to_string(rank));
  return {};
}

void reference_reduce(const std::vector<const float*>& inputs, std::size_t count, reduce_op op,
                      float* out) {
  if (inputs.empty()) return;
  const float n = static_cast<float>(inputs.size());
  for (std::size_t i = 0; i < count; ++i) {
    float acc = inputs[0][i];
    for (std::size_t k = 1; k < inputs.size(); ++k) acc += inputs[k][i];
    out[i] = op == reduce_op::mean ? acc / n : acc;
  }
}

void reduce_gathered(const float* gathered, std::size_t n, std::size_t count, reduce_op op,
                     float* out) {
  std::vector<const float*> parts;
  parts.reserve(n);
  for (std::size_t k = 0; k < n; ++k) parts.push_back(gathered + k * count);
  reference_reduce(parts, count, op, out);
}

const char* to_string(memory_kind m) { return m == memory_kind::device ? "device" : "host"; }

device_path mpi_device_path(memory_kind memory, bool mpi_cuda_aware, reduce_order order) {
  if (memory == memory_kind::host) return device_path::host;
  // rank_order sums on the host (reference_reduce), so its inputs must be there anyway.
  if (mpi_cuda_aware && order == reduce_order::fastest) return device_path::direct;
  return device_path::staged;
}

status aggregator::allreduce(const group& members, buffer_view data, const reduce_options& opt) {
  if (data.memory == memory_kind::device)
    return error{error_kind::invalid_input,
                 "aggregator backend '" + backend() +
                     "' does not take device buffers; copy the data to host memory (or use the "
                     "nccl or mpi backend)"};
  if (data.count > 0 && !data.data)
    return error{error_kind::invalid_input,
                 "aggregator: a buffer_view of " + std::to_string(data.count) + " floats at null"};
  std::vector<float> v(data.data, data.data + data.count);
  auto st = allreduce(members, v, opt);
  if (st)
    std::copy(v.begin(), v.end(), data.data);
  else
    std::fill(data.data, data.data + data.count, std::numeric_limits<float>::quiet_NaN());
  return st;
}

std::uint64_t group_key(const group& members, std::uint64_t channel) {
  // FNV-1a over the ranks and the channel: the same in every process.
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(members.size());
  for (int r : members) mix(static_cast<std::uint64_t>(r));
  mix(channel);
  return h;
}

std::string describe(const group& members, std::uint64_t channel) {
  std::ostringstream s;
  s << '{';
  for (std::size_t i = 0; i < members.size(); ++i) s << (i ? "," : "") << members[i];
  s << "}/ch " << channel;
  return s.str();
}

}  // namespace tessera::comm
