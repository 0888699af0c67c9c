#pragma once
/// @file cuda_mlp.hpp
/// The mlp model (models.hpp) trained on a CUDA GPU: parameters, gradients, optimizer state
/// and the training set live in device memory; the matrix products run in cuBLAS. Registry
/// name "mlp_cuda" (cuda_mlp_kind); docs/design.md, "CUDA trainable and device buffers".
///
/// Same model, same state: it keeps a CPU mlp of the same seed and configuration as its host
/// twin, which supplies the configuration checks, the data, the initial parameters, the batch
/// draws and the checkpoint format. Its kind() is "mlp" and save_state() is the twin's
/// save_state() after the device state is copied into it, so a checkpoint written on a GPU node
/// loads into a CPU "mlp" of the same configuration and the other way round.
///
/// Determinism: a shard gradient is a pure function of (parameters, step, shard, K): the rows
/// are the twin's counter-based draws, every kernel sums in a fixed order (one thread per
/// output, sequential loops), and cuBLAS runs with atomics disallowed, pedantic (no TF32) math,
/// a fixed workspace and one stream per object, so a GEMM of fixed shape gives the same bits
/// every call (cuBLAS documents reproducibility under exactly these conditions, on one GPU
/// architecture and library version). The shard-ordered sum of its shard gradients is therefore
/// bitwise reproducible. The bits differ from the CPU mlp's gradients (a GEMM sums in another
/// order than the CPU's per-example loop), but the momentum update is compiled without FMA
/// contraction, so one update of the same state with the same summed gradient gives the CPU's
/// bits.
///
/// Built only where CMake finds the CUDA toolkit (cuda_mlp.cu); elsewhere (cuda_mlp_none.cpp),
/// and on a machine without a usable GPU, make_cuda_mlp fails with a message saying why.

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/result.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train {

/// The registry name a job file gives for the CUDA MLP (`kind = "mlp_cuda"`).
inline const std::string cuda_mlp_kind = "mlp_cuda";

/// The configuration key that picks the GPU (a node sets it per copy; default 0). It is not
/// part of the model: the host twin never sees it, so the state does not depend on it.
inline const std::string cuda_device_key = "device";

/// Where a CUDA MLP runs.
struct cuda_mlp_options {
  int device = 0;  ///< CUDA device index
};

/// A trainable whose state lives on a GPU: besides the host interface it computes gradients
/// into, and applies them from, device memory, so an executor can sum shards with the
/// aggregator's device buffers (runtime/node/comm/aggregator.hpp) without a host copy.
class device_trainable : public trainable {
 public:
  /// The CUDA device index it runs on.
  virtual int device() const = 0;
  /// compute_gradient into `count` floats of device memory at `grad_out` (count must be
  /// num_params()). Same bits as compute_gradient.
  virtual status compute_gradient_device(int shard_index, int num_shards, std::int64_t step,
                                         float* grad_out, std::size_t count) const = 0;
  /// apply_gradient from device memory.
  virtual status apply_gradient_device(const float* summed_grad, std::size_t count, int k) = 0;
};

/// Splits the device key off a configuration: the GPU index (`fallback` when absent) and the
/// rest, which is the host twin's mlp configuration. Errors name the field when the index is
/// not an integer in [0, 1023].
result<std::pair<trainable_config, int>> split_device_key(const trainable_config& config,
                                                          int fallback);

/// Checks a configuration as make_cuda_mlp would, without a GPU: the mlp keys plus "device".
/// Errors (invalid_input) when this build has no CUDA, naming that.
status check_cuda_mlp_config(const trainable_config& config);

/// Makes a CUDA MLP on GPU `options.device` (overridden by the config's "device" key). Errors:
/// the mlp's configuration errors; solver_failed naming CUDA's reason when the build has no
/// CUDA or no usable GPU is present (never a crash).
result<std::unique_ptr<trainable>> make_cuda_mlp(std::uint64_t seed,
                                                 const trainable_config& config = {},
                                                 cuda_mlp_options options = {});

/// Loads cuBLAS into the process (once; make_cuda_mlp does it too). The library is opened on
/// first use rather than linked, so a process that never makes a CUDA MLP does not map it.
/// Errors name the library and the loader's reason; without CUDA, that this build has none.
status load_cublas();

/// Whether make_cuda_mlp can work here (CUDA built in, a device present); `why` says why not.
bool cuda_mlp_available(std::string* why);

}  // namespace tessera::train
