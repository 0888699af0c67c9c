#pragma once
/// @file models.hpp
/// The built-in trainables: CPU classifiers with real arithmetic, trained by SGD with
/// momentum on softmax cross-entropy.
///
/// - softmax_regression: logits = W x + b (W is C x D). Parameters [W row-major, b].
/// - mlp: one hidden layer, logits = W2 relu(W1 x + b1) + b2 (W1 is H x D, W2 is C x H).
///   Parameters [W1, b1, W2, b2].
///
/// Step s's global batch is `batch_size` training examples drawn with replacement by a
/// counter-based hash of (key, s, position); shard i of K is positions
/// [i*B/K, (i+1)*B/K). Every sum runs in a fixed order, so the same seed and configuration
/// give bitwise-identical parameters after N steps. An update is
///   v = momentum * v + summed/K;  p = p - lr * v.
///
/// Configuration keys (trainable_config), with defaults:
///   lr 0.1, momentum 0.9, batch_size 32, hidden 32 (mlp only);
///   and for the generated data (see blobs_options; not allowed when data is passed in):
///   classes 4, dim 8, train_size 512, held_out_size 256, clusters_per_class 1,
///   separation 1, spread 1, data_seed (defaults to the seed).
/// The seed also sets the initial parameters and the batch-sampling key.

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/node/train/dataset.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train {

/// Makes a softmax regression on Gaussian blobs generated from the configuration.
result<std::unique_ptr<trainable>> make_softmax_regression(std::uint64_t seed,
                                                           const trainable_config& config = {});

/// Makes a softmax regression on the given data (e.g. from load_csv_split); copies made by
/// clone() share it.
result<std::unique_ptr<trainable>> make_softmax_regression(std::uint64_t seed,
                                                           const trainable_config& config,
                                                           std::shared_ptr<const data_split> data);

/// Checks a configuration as make_softmax_regression(seed, config) would (keys, ranges, data
/// and model size) without generating data or parameters: cheap enough to check every job of
/// a run before it starts.
status check_softmax_regression_config(const trainable_config& config);

/// Checks a configuration as make_mlp(seed, config) would, without building anything.
status check_mlp_config(const trainable_config& config);

/// Makes a one-hidden-layer MLP on Gaussian blobs generated from the configuration.
result<std::unique_ptr<trainable>> make_mlp(std::uint64_t seed,
                                            const trainable_config& config = {});

/// Makes a one-hidden-layer MLP on the given data; copies made by clone() share it.
result<std::unique_ptr<trainable>> make_mlp(std::uint64_t seed, const trainable_config& config,
                                            std::shared_ptr<const data_split> data);

/// What another executor of the mlp model needs to reproduce its steps (the CUDA MLP,
/// runtime/node/train/cuda_mlp.hpp, keeps a CPU mlp as its host twin and reads these from it).
struct mlp_shape {
  int dim = 0;                             ///< inputs
  int hidden = 0;                          ///< hidden units
  int classes = 0;                         ///< outputs
  int batch_size = 0;                      ///< examples per step (global batch)
  double lr = 0;                           ///< learning rate
  double momentum = 0;                     ///< momentum
  std::shared_ptr<const data_split> data;  ///< the training and held-out sets
};

/// The shape of `t`; errors (invalid_input) when `t` was not made by make_mlp.
result<mlp_shape> mlp_shape_of(const trainable& t);

/// The training-set rows of shard `shard_index` of `num_shards` of step `step`'s global batch,
/// in the order compute_gradient of the built-in models adds them (the same draws from the
/// model's batch key). Errors (invalid_input) as compute_gradient's for bad arguments, and for
/// a `t` not made by make_mlp or make_softmax_regression.
result<std::vector<std::uint32_t>> shard_rows(const trainable& t, int shard_index, int num_shards,
                                              std::int64_t step);

}  // namespace tessera::train
