// make_cuda_mlp in a build without the CUDA toolkit: a clear error, never a crash.
#include "runtime/node/train/cuda_mlp.hpp"

namespace tessera::train {

result<std::unique_ptr<trainable>> make_cuda_mlp(std::uint64_t, const trainable_config& config,
                                                 cuda_mlp_options) {
  if (auto st = check_cuda_mlp_config(config); !st) return st.err();
  return error{error_kind::internal, cuda_mlp_kind + ": built without CUDA"};  // not reached
}

status load_cublas() {
  return error{error_kind::invalid_input, cuda_mlp_kind + ": built without CUDA, so no cuBLAS"};
}

}  // namespace tessera::train
