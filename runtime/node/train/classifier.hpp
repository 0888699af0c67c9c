#pragma once
/// @file classifier.hpp
/// The base of the built-in models (models.hpp): a softmax-cross-entropy classifier trained by
/// SGD with momentum, with the batch draws, the update, the loss and accuracy, and the saved
/// state; each model supplies only its network (forward and per-example backward). Internal to
/// the built-in models (models.cpp, classifier.cpp): not part of the public API.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/node/train/dataset.hpp"
#include "runtime/node/train/model_config.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train::builtin {

/// Salts that separate the streams derived from one seed.
constexpr std::uint64_t salt_init = 0x696e6974ULL;   // "init"
constexpr std::uint64_t salt_batch = 0x62617463ULL;  // "batc"

/// Per-call working memory of a forward/backward pass.
struct scratch {
  std::vector<float> h_pre, h, z, p, dh;
};

/// A softmax-cross-entropy classifier trained by SGD with momentum: everything but the
/// network itself, which subclasses supply (forward and per-example backward).
class classifier : public trainable {
 public:
  classifier(std::string kind, std::shared_ptr<const data_split> data, const settings& s,
             std::uint64_t seed, std::size_t n_params);

  std::string kind() const override { return kind_; }
  std::vector<float>& params() override { return params_; }
  const std::vector<float>& params() const override { return params_; }
  std::int64_t step() const override { return step_; }
  void set_step(std::int64_t step) override { step_ = step; }
  std::vector<float>* optimizer_state() override { return &velocity_; }

  status compute_gradient(int shard_index, int num_shards, std::int64_t step,
                          std::vector<float>& grad_out) const override;

  /// The rows of shard `shard_index` of `num_shards` of step `step` (positions
  /// [i*B/K, (i+1)*B/K) of the batch, each drawn by counter_hash), or the argument error.
  result<std::vector<std::uint32_t>> shard_rows(int shard_index, int num_shards,
                                                std::int64_t step) const;

  /// The settings the model was made with.
  const settings& train_settings() const { return settings_; }
  /// The data it trains on.
  const std::shared_ptr<const data_split>& data_ptr() const { return data_; }

  status apply_gradient(const std::vector<float>& summed_grad, int k) override;
  double loss() const override;
  double held_out_accuracy() const override;
  std::vector<std::uint8_t> save_state() const override;
  status load_state(const std::vector<std::uint8_t>& state) override;

 protected:
  /// Working memory sized for this network.
  virtual scratch make_scratch() const = 0;
  /// Logits of one example into s.z (and hidden activations into s, where the net has them).
  virtual void forward(const float* x, scratch& s) const = 0;
  /// Adds the cross-entropy gradient of one example to `grad`.
  virtual void add_example_gradient(const float* x, int label, float* grad, scratch& s) const = 0;

  /// Sets s.p to softmax(s.z) minus the one-hot label: dLoss/dlogits.
  static void logit_gradient(int label, scratch& s);

  const data_split& data() const { return *data_; }
  int dim() const { return data_->train.dim; }
  int classes() const { return data_->train.num_classes; }

  std::string kind_;
  std::shared_ptr<const data_split> data_;
  settings settings_;
  std::uint64_t key_;          // batch-sampling key: the RNG state of training
  std::uint64_t fingerprint_;  // configuration + data, checked on load
  std::int64_t step_ = 0;
  std::vector<float> params_;
  std::vector<float> velocity_;  // momentum buffer: the optimizer state
};

}  // namespace tessera::train::builtin
