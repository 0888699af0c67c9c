// The plain parts of the CUDA MLP (cuda_mlp.hpp): its configuration and whether it can run
// here. Built in every configuration; the device code is in cuda_mlp.cu.
#include <cmath>

#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/train/cuda_mlp.hpp"
#include "runtime/node/train/models.hpp"

namespace tessera::train {

result<std::pair<trainable_config, int>> split_device_key(const trainable_config& config,
                                                          int fallback) {
  trainable_config rest = config;
  int device = fallback;
  const auto it = rest.find(cuda_device_key);
  if (it != rest.end()) {
    const double v = it->second;
    if (!std::isfinite(v) || v != std::floor(v) || v < 0 || v > 1023)
      return input_error(cuda_mlp_kind + " config", 0, cuda_device_key,
                         "expected a CUDA device index, an integer in [0, 1023]");
    device = static_cast<int>(v);
    rest.erase(it);
  }
  return std::make_pair(std::move(rest), device);
}

status check_cuda_mlp_config(const trainable_config& config) {
  auto split = split_device_key(config, 0);
  if (!split) return split.err();
  if (!comm::built_with_cuda())
    return error{error_kind::invalid_input,
                 cuda_mlp_kind +
                     ": this tessera was built without CUDA (CMake did not find the "
                     "CUDA toolkit); use kind \"mlp\" or rebuild with CUDA"};
  return check_mlp_config(split->first);
}

bool cuda_mlp_available(std::string* why) {
  std::string reason;
  if (comm::cuda_device_present(&reason)) return true;
  if (why) *why = cuda_mlp_kind + " needs a CUDA GPU: " + reason;
  return false;
}

}  // namespace tessera::train
