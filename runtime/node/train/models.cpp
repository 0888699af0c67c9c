// The built-in models (models.hpp): softmax regression and the one-hidden-layer mlp, their
// networks' forward and backward passes, and the make_*/check_* entry points. The training
// they share is their base's (classifier.hpp); reading the configuration is model_config.cpp's.
#include "runtime/node/train/models.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "runtime/node/train/classifier.hpp"
#include "runtime/node/train/model_config.hpp"
#include "runtime/node/train/detail/random.hpp"

namespace tessera::train {

namespace {

using builtin::check_data;
using builtin::check_model_size;
using builtin::classifier;
using builtin::parse_config;
using builtin::salt_init;
using builtin::scratch;
using builtin::settings;

/// Multinomial logistic regression: logits = W x + b.
class softmax_regression final : public classifier {
 public:
  softmax_regression(std::uint64_t seed, std::shared_ptr<const data_split> data, const settings& s)
      : classifier("softmax_regression", data, s, seed,
                   static_cast<std::size_t>(data->train.num_classes) * (data->train.dim + 1)) {
    detail::rng r(detail::mix64(seed ^ salt_init));
    const std::size_t nw = static_cast<std::size_t>(classes()) * dim();
    for (std::size_t i = 0; i < nw; ++i) params_[i] = static_cast<float>(0.01 * r.normal());
  }

  std::unique_ptr<trainable> clone() const override {
    return std::make_unique<softmax_regression>(*this);
  }

 protected:
  scratch make_scratch() const override {
    scratch s;
    s.z.resize(static_cast<std::size_t>(classes()));
    s.p.resize(s.z.size());
    return s;
  }

  void forward(const float* x, scratch& s) const override {
    const int d_n = dim();
    const float* w = params_.data();
    const float* b = w + static_cast<std::size_t>(classes()) * d_n;
    for (int c = 0; c < classes(); ++c) {
      const float* wc = w + static_cast<std::size_t>(c) * d_n;
      float acc = 0.0f;
      for (int d = 0; d < d_n; ++d) acc += wc[d] * x[d];
      s.z[static_cast<std::size_t>(c)] = acc + b[c];
    }
  }

  void add_example_gradient(const float* x, int label, float* grad, scratch& s) const override {
    forward(x, s);
    logit_gradient(label, s);
    const int d_n = dim();
    float* gb = grad + static_cast<std::size_t>(classes()) * d_n;
    for (int c = 0; c < classes(); ++c) {
      const float dz = s.p[static_cast<std::size_t>(c)];
      float* gw = grad + static_cast<std::size_t>(c) * d_n;
      for (int d = 0; d < d_n; ++d) gw[d] += dz * x[d];
      gb[c] += dz;
    }
  }
};

/// One hidden layer with ReLU: logits = W2 relu(W1 x + b1) + b2.
class mlp final : public classifier {
 public:
  mlp(std::uint64_t seed, std::shared_ptr<const data_split> data, const settings& s)
      : classifier("mlp", data, s, seed,
                   count(s.hidden, data->train.dim, data->train.num_classes)) {
    detail::rng r(detail::mix64(seed ^ salt_init));
    const int h = settings_.hidden;
    const double s1 = std::sqrt(2.0 / dim());  // He initialisation for the ReLU layer
    const double s2 = std::sqrt(1.0 / h);
    float* w1 = params_.data();
    float* w2 = w1 + static_cast<std::size_t>(h) * dim() + h;
    for (std::size_t i = 0; i < static_cast<std::size_t>(h) * dim(); ++i)
      w1[i] = static_cast<float>(s1 * r.normal());
    for (std::size_t i = 0; i < static_cast<std::size_t>(classes()) * h; ++i)
      w2[i] = static_cast<float>(s2 * r.normal());
  }

  /// Number of parameters of an mlp with `h` hidden units, `d` inputs and `c` classes.
  static std::size_t count(int h, int d, int c) {
    return static_cast<std::size_t>(h) * d + h + static_cast<std::size_t>(c) * h + c;
  }

  std::unique_ptr<trainable> clone() const override { return std::make_unique<mlp>(*this); }

 protected:
  scratch make_scratch() const override {
    scratch s;
    const auto h = static_cast<std::size_t>(settings_.hidden);
    s.h_pre.resize(h);
    s.h.resize(h);
    s.dh.resize(h);
    s.z.resize(static_cast<std::size_t>(classes()));
    s.p.resize(s.z.size());
    return s;
  }

  void forward(const float* x, scratch& s) const override {
    const int d_n = dim(), h_n = settings_.hidden, c_n = classes();
    const float* w1 = params_.data();
    const float* b1 = w1 + static_cast<std::size_t>(h_n) * d_n;
    const float* w2 = b1 + h_n;
    const float* b2 = w2 + static_cast<std::size_t>(c_n) * h_n;
    for (int j = 0; j < h_n; ++j) {
      const float* wj = w1 + static_cast<std::size_t>(j) * d_n;
      float acc = 0.0f;
      for (int d = 0; d < d_n; ++d) acc += wj[d] * x[d];
      const float pre = acc + b1[j];
      s.h_pre[static_cast<std::size_t>(j)] = pre;
      s.h[static_cast<std::size_t>(j)] = pre > 0.0f ? pre : 0.0f;
    }
    for (int c = 0; c < c_n; ++c) {
      const float* wc = w2 + static_cast<std::size_t>(c) * h_n;
      float acc = 0.0f;
      for (int j = 0; j < h_n; ++j) acc += wc[j] * s.h[static_cast<std::size_t>(j)];
      s.z[static_cast<std::size_t>(c)] = acc + b2[c];
    }
  }

  void add_example_gradient(const float* x, int label, float* grad, scratch& s) const override {
    forward(x, s);
    logit_gradient(label, s);
    const int d_n = dim(), h_n = settings_.hidden, c_n = classes();
    const float* w2 = params_.data() + static_cast<std::size_t>(h_n) * d_n + h_n;
    float* gw1 = grad;
    float* gb1 = gw1 + static_cast<std::size_t>(h_n) * d_n;
    float* gw2 = gb1 + h_n;
    float* gb2 = gw2 + static_cast<std::size_t>(c_n) * h_n;
    std::fill(s.dh.begin(), s.dh.end(), 0.0f);
    for (int c = 0; c < c_n; ++c) {
      const float dz = s.p[static_cast<std::size_t>(c)];
      const float* wc = w2 + static_cast<std::size_t>(c) * h_n;
      float* gwc = gw2 + static_cast<std::size_t>(c) * h_n;
      for (int j = 0; j < h_n; ++j) {
        gwc[j] += dz * s.h[static_cast<std::size_t>(j)];
        s.dh[static_cast<std::size_t>(j)] += wc[j] * dz;
      }
      gb2[c] += dz;
    }
    for (int j = 0; j < h_n; ++j) {
      if (s.h_pre[static_cast<std::size_t>(j)] <= 0.0f) continue;  // ReLU passes no gradient
      const float dj = s.dh[static_cast<std::size_t>(j)];
      float* gwj = gw1 + static_cast<std::size_t>(j) * d_n;
      for (int d = 0; d < d_n; ++d) gwj[d] += dj * x[d];
      gb1[j] += dj;
    }
  }
};

/// Shared body of the make_* functions: `data` null means "generate blobs from the config".
template <class Model>
result<std::unique_ptr<trainable>> build(const std::string& kind, std::uint64_t seed,
                                         const trainable_config& config,
                                         std::shared_ptr<const data_split> data, bool given,
                                         bool with_hidden) {
  auto p = parse_config(kind, seed, config, given, with_hidden);
  if (!p) return p.err();
  if (given) {
    if (!data) return error{error_kind::invalid_input, kind + ": no data given (null data_split)"};
    if (auto e = check_data(*data)) return *e;
  } else {
    auto blobs = make_blobs(p->data_seed, p->blobs);
    if (!blobs) return blobs.err();
    data = std::make_shared<const data_split>(std::move(*blobs));
  }
  if (auto e =
          check_model_size(kind, p->train, data->train.dim, data->train.num_classes, with_hidden))
    return *e;
  return std::unique_ptr<trainable>(std::make_unique<Model>(seed, std::move(data), p->train));
}

/// The checks of build() on generated data, without generating it or any parameter.
status check_config(const std::string& kind, const trainable_config& config, bool with_hidden) {
  auto p = parse_config(kind, 0, config, false, with_hidden);
  if (!p) return p.err();
  if (auto st = check_blobs_options(p->blobs); !st) return st;
  if (auto e = check_model_size(kind, p->train, p->blobs.dim, p->blobs.num_classes, with_hidden))
    return *e;
  return {};
}

}  // namespace

result<std::unique_ptr<trainable>> make_softmax_regression(std::uint64_t seed,
                                                           const trainable_config& config) {
  return build<softmax_regression>("softmax_regression", seed, config, nullptr, false, false);
}

result<std::unique_ptr<trainable>> make_softmax_regression(std::uint64_t seed,
                                                           const trainable_config& config,
                                                           std::shared_ptr<const data_split> data) {
  return build<softmax_regression>("softmax_regression", seed, config, std::move(data), true,
                                   false);
}

status check_softmax_regression_config(const trainable_config& config) {
  return check_config("softmax_regression", config, false);
}

status check_mlp_config(const trainable_config& config) {
  return check_config("mlp", config, true);
}

result<std::unique_ptr<trainable>> make_mlp(std::uint64_t seed, const trainable_config& config) {
  return build<mlp>("mlp", seed, config, nullptr, false, true);
}

result<std::unique_ptr<trainable>> make_mlp(std::uint64_t seed, const trainable_config& config,
                                            std::shared_ptr<const data_split> data) {
  return build<mlp>("mlp", seed, config, std::move(data), true, true);
}

result<mlp_shape> mlp_shape_of(const trainable& t) {
  const auto* m = dynamic_cast<const mlp*>(&t);
  if (!m)
    return error{error_kind::invalid_input,
                 "mlp_shape_of: a '" + t.kind() + "' is not an mlp made by make_mlp"};
  mlp_shape s;
  s.data = m->data_ptr();
  s.dim = s.data->train.dim;
  s.classes = s.data->train.num_classes;
  s.hidden = m->train_settings().hidden;
  s.batch_size = m->train_settings().batch_size;
  s.lr = m->train_settings().lr;
  s.momentum = m->train_settings().momentum;
  return s;
}

result<std::vector<std::uint32_t>> shard_rows(const trainable& t, int shard_index, int num_shards,
                                              std::int64_t step) {
  const auto* c = dynamic_cast<const classifier*>(&t);
  if (!c)
    return error{error_kind::invalid_input,
                 "shard_rows: a '" + t.kind() + "' is not a built-in model"};
  return c->shard_rows(shard_index, num_shards, step);
}

}  // namespace tessera::train
