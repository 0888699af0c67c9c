#include "least_squares.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace example {

namespace {

using tessera::error;
using tessera::error_kind;
using tessera::status;

/// splitmix64: a counter-based generator, so a step's batch depends only on (seed, step, i).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A uniform float in [-1, 1) from a counter.
float uniform(std::uint64_t key) {
  return static_cast<float>(static_cast<double>(mix(key) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

class least_squares final : public tessera::train::trainable {
 public:
  least_squares(std::uint64_t seed, int dim, float lr, int batch)
      : seed_(seed), dim_(dim), lr_(lr), batch_(batch), params_(dim + 1, 0.0f) {}

  std::string kind() const override { return "least_squares"; }
  std::vector<float>& params() override { return params_; }
  const std::vector<float>& params() const override { return params_; }
  std::int64_t step() const override { return step_; }
  void set_step(std::int64_t step) override { step_ = step; }

  status compute_gradient(int shard, int shards, std::int64_t step,
                          std::vector<float>& grad) const override {
    if (shards < 1 || shard < 0 || shard >= shards)
      return error{error_kind::invalid_input, "least_squares: bad shard index"};
    grad.assign(params_.size(), 0.0f);
    const int begin = shard * batch_ / shards, end = (shard + 1) * batch_ / shards;
    std::vector<float> x(dim_);
    for (int i = begin; i < end; ++i) {
      const float y = example_at(static_cast<std::uint64_t>(step) * 1000003ULL + i, x);
      const float err = predict(x) - y;
      for (int d = 0; d < dim_; ++d) grad[d] += 2 * err * x[d];
      grad[dim_] += 2 * err;
    }
    // Scaled so the mean over the K shards is the gradient of the batch's mean loss.
    const float scale = static_cast<float>(shards) / static_cast<float>(batch_);
    for (auto& g : grad) g *= scale;
    return {};
  }

  status apply_gradient(const std::vector<float>& summed, int k) override {
    if (k < 1 || summed.size() != params_.size())
      return error{error_kind::invalid_input, "least_squares: bad gradient"};
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= lr_ * summed[i] / k;
    ++step_;
    return {};
  }

  double loss() const override {
    // Mean squared error on the first 256 training examples.
    std::vector<float> x(dim_);
    double sum = 0;
    for (int i = 0; i < 256; ++i) {
      const float err = predict_train(static_cast<std::uint64_t>(i), x);
      sum += static_cast<double>(err) * err;
    }
    return sum / 256;
  }

  double held_out_accuracy() const override {
    // Fraction of held-out examples predicted within 0.25 of their target.
    std::vector<float> x(dim_);
    int good = 0;
    for (int i = 0; i < 256; ++i) good += std::fabs(predict_held_out(i, x)) < 0.25f ? 1 : 0;
    return good / 256.0;
  }

  std::vector<std::uint8_t> save_state() const override {
    std::vector<std::uint8_t> out(sizeof(std::int64_t) + params_.size() * sizeof(float));
    std::memcpy(out.data(), &step_, sizeof step_);
    std::memcpy(out.data() + sizeof step_, params_.data(), params_.size() * sizeof(float));
    return out;
  }

  status load_state(const std::vector<std::uint8_t>& state) override {
    if (state.size() != sizeof(std::int64_t) + params_.size() * sizeof(float))
      return error{error_kind::invalid_input,
                   "least_squares: saved state has the wrong size for dim " + std::to_string(dim_)};
    std::memcpy(&step_, state.data(), sizeof step_);
    std::memcpy(params_.data(), state.data() + sizeof step_, params_.size() * sizeof(float));
    return {};
  }

  std::unique_ptr<trainable> clone() const override {
    return std::make_unique<least_squares>(*this);
  }

 private:
  float predict(const std::vector<float>& x) const {
    float y = params_[dim_];
    for (int d = 0; d < dim_; ++d) y += params_[d] * x[d];
    return y;
  }
  /// Fills x with example `i`'s features and returns its target (true w_d = d-th uniform).
  float example_at(std::uint64_t i, std::vector<float>& x) const {
    float y = 0.5f;
    for (int d = 0; d < dim_; ++d) {
      x[d] = uniform(mix(seed_ ^ (i * 131 + d)));
      y += uniform(mix(seed_ + 7919 * (d + 1))) * x[d];
    }
    return y + 0.01f * uniform(mix(seed_ ^ ~i));
  }
  /// Prediction error on training example `i`.
  float predict_train(std::uint64_t i, std::vector<float>& x) const {
    const float y = example_at(i, x);
    return predict(x) - y;
  }
  /// Prediction error on held-out example `i`.
  float predict_held_out(int i, std::vector<float>& x) const {
    const float y = example_at(0xfffffff000000000ULL + static_cast<std::uint64_t>(i), x);
    return predict(x) - y;
  }

  std::uint64_t seed_;
  int dim_;
  float lr_;
  int batch_;
  std::vector<float> params_;
  std::int64_t step_ = 0;
};

}  // namespace

tessera::result<std::unique_ptr<tessera::train::trainable>> make_least_squares(
    std::uint64_t seed, const tessera::train::trainable_config& config) {
  int dim = 8, batch = 16;
  float lr = 0.05f;
  for (const auto& [key, value] : config) {
    if (key == "dim" && value >= 1 && value <= 4096)
      dim = static_cast<int>(value);
    else if (key == "lr" && value > 0)
      lr = static_cast<float>(value);
    else if (key == "batch_size" && value >= 1)
      batch = static_cast<int>(value);
    else
      return error{error_kind::invalid_input, "least_squares: bad config key or value '" + key +
                                                  "' (keys: dim, lr, batch_size)"};
  }
  return std::unique_ptr<tessera::train::trainable>(
      std::make_unique<least_squares>(seed, dim, lr, batch));
}

}  // namespace example
