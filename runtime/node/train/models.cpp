#include "runtime/node/train/models.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "runtime/core/detail/text.hpp"
#include "runtime/node/train/detail/bytes.hpp"
#include "runtime/node/train/detail/random.hpp"

namespace tessera::train {

namespace {

namespace text = ::tessera::detail;  // the shared text helpers (runtime/core/detail/text.hpp)

/// Opening bytes of a built-in model's saved state.
constexpr char state_magic[8] = {'T', 'S', 'R', 'S', 'T', 'A', 'T', 'E'};
/// Layout version of a built-in model's saved state.
constexpr std::uint32_t state_version = 1;
/// Salts that separate the streams derived from one seed.
constexpr std::uint64_t salt_init = 0x696e6974ULL;   // "init"
constexpr std::uint64_t salt_batch = 0x62617463ULL;  // "batc"
/// Largest model accepted, in parameters.
constexpr double max_params = 1e8;

/// Optimizer and architecture settings read from the configuration.
struct settings {
  double lr = 0.1;
  double momentum = 0.9;
  int batch_size = 32;
  int hidden = 0;  // mlp only; 0 for softmax regression
};

/// What a configuration resolves to.
struct parsed_config {
  settings train;
  blobs_options blobs;
  std::uint64_t data_seed = 0;
};

/// Keys that describe generated data; rejected when the data is passed in.
const std::vector<std::string>& data_keys() {
  static const std::vector<std::string> keys = {"classes",       "dim",          "train_size",
                                                "held_out_size", "clusters_per_class",
                                                "separation",    "spread",       "data_seed"};
  return keys;
}

/// Reads numeric settings from a trainable_config, with range checks and messages of the form
/// "<kind> config: field '<key>': <what>".
class config_reader {
 public:
  config_reader(const trainable_config& config, const std::string& kind)
      : config_(config), src_(kind + " config") {}

  /// Reads a real number in [lo, hi] (lo excluded when `lo_open`), or `def` when absent.
  std::optional<error> number(const std::string& key, double def, double lo, bool lo_open,
                              double hi, double& out) const {
    const auto it = config_.find(key);
    out = def;
    if (it == config_.end()) return std::nullopt;
    const double v = it->second;
    const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
    if (!ok)
      return input_error(src_, 0, key,
                         "expected a number in " + std::string(lo_open ? "(" : "[") +
                             text::format_shortest(lo) + ", " + text::format_shortest(hi) +
                             "], got " + text::format_shortest(v));
    out = v;
    return std::nullopt;
  }

  /// Reads an integer in [lo, hi], or `def` when absent.
  std::optional<error> integer(const std::string& key, double def, double lo, double hi,
                               double& out) const {
    const auto it = config_.find(key);
    out = def;
    if (it == config_.end()) return std::nullopt;
    const double v = it->second;
    if (!std::isfinite(v) || v != std::floor(v) || v < lo || v > hi)
      return input_error(src_, 0, key,
                         "expected an integer in [" + text::format_count(lo) + ", " +
                             text::format_count(hi) + "], got " + text::format_shortest(v));
    out = v;
    return std::nullopt;
  }

  /// An error for the first key not in `allowed` (or, with data given, a data key).
  std::optional<error> unknown_keys(std::vector<std::string> allowed, bool data_given) const {
    std::sort(allowed.begin(), allowed.end());
    for (const auto& [key, value] : config_) {
      (void)value;
      const bool is_data = std::find(data_keys().begin(), data_keys().end(), key) != data_keys().end();
      if (is_data && data_given)
        return input_error(src_, 0, key,
                           "sets the generated data, but this trainable was given its data");
      if (!std::binary_search(allowed.begin(), allowed.end(), key)) {
        std::string list;
        for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
        return input_error(src_, 0, key, "unknown key; valid keys: " + list);
      }
    }
    return std::nullopt;
  }

  /// The source name used in messages ("mlp config").
  const std::string& source() const { return src_; }

 private:
  const trainable_config& config_;
  std::string src_;
};

/// Resolves a configuration for `kind`; `with_hidden` adds the mlp's "hidden" key.
result<parsed_config> parse_config(const std::string& kind, std::uint64_t seed,
                                   const trainable_config& config, bool data_given,
                                   bool with_hidden) {
  const config_reader r(config, kind);
  std::vector<std::string> allowed = {"lr", "momentum", "batch_size"};
  if (with_hidden) allowed.emplace_back("hidden");
  if (!data_given) allowed.insert(allowed.end(), data_keys().begin(), data_keys().end());
  if (auto e = r.unknown_keys(allowed, data_given)) return *e;

  parsed_config p;
  double v = 0;
  if (auto e = r.number("lr", 0.1, 0, true, 1e3, p.train.lr)) return *e;
  if (auto e = r.number("momentum", 0.9, 0, false, 0.999, p.train.momentum)) return *e;
  if (auto e = r.integer("batch_size", 32, 1, 1 << 20, v)) return *e;
  p.train.batch_size = static_cast<int>(v);
  if (with_hidden) {
    if (auto e = r.integer("hidden", 32, 1, 1 << 16, v)) return *e;
    p.train.hidden = static_cast<int>(v);
  }
  if (data_given) return p;

  auto& b = p.blobs;
  if (auto e = r.integer("classes", 4, 2, 100000, v)) return *e;
  b.num_classes = static_cast<int>(v);
  if (auto e = r.integer("dim", 8, 1, 1 << 20, v)) return *e;
  b.dim = static_cast<int>(v);
  if (auto e = r.integer("train_size", 512, 1, 1 << 24, v)) return *e;
  b.train_size = static_cast<int>(v);
  if (auto e = r.integer("held_out_size", 256, 1, 1 << 24, v)) return *e;
  b.held_out_size = static_cast<int>(v);
  if (auto e = r.integer("clusters_per_class", 1, 1, 1024, v)) return *e;
  b.clusters_per_class = static_cast<int>(v);
  if (auto e = r.number("separation", 1, 0, false, 1e6, b.separation)) return *e;
  if (auto e = r.number("spread", 1, 0, false, 1e6, b.spread)) return *e;
  if (auto e = r.integer("data_seed", 0, 0, 9007199254740992.0, v)) return *e;
  p.data_seed = config.count("data_seed") ? static_cast<std::uint64_t>(v) : seed;
  return p;
}

/// Checks that data passed in by a caller is well formed.
std::optional<error> check_data(const data_split& d) {
  auto bad = [](const std::string& what) { return error{error_kind::invalid_input, "dataset: " + what}; };
  const dataset& t = d.train;
  if (t.dim < 1) return bad("dim must be >= 1, got " + std::to_string(t.dim));
  if (t.num_classes < 2) return bad("num_classes must be >= 2, got " + std::to_string(t.num_classes));
  if (t.size() == 0) return bad("the training set is empty");
  for (const auto& [name, part] : {std::pair<const char*, const dataset*>{"training", &t},
                                   {"held-out", &d.held_out}}) {
    if (part->size() == 0) continue;
    if (part->dim != t.dim || part->num_classes != t.num_classes)
      return bad(std::string("the ") + name + " set's dim/num_classes differ from the training set's");
    if (part->x.size() != part->size() * static_cast<std::size_t>(t.dim))
      return bad(std::string("the ") + name + " set has " + std::to_string(part->x.size()) +
                 " feature values for " + std::to_string(part->size()) + " examples of dim " +
                 std::to_string(t.dim));
    for (std::size_t i = 0; i < part->size(); ++i)
      if (part->y[i] < 0 || part->y[i] >= t.num_classes)
        return bad(std::string("the ") + name + " set's example " + std::to_string(i) +
                   " has label " + std::to_string(part->y[i]) + " outside [0, " +
                   std::to_string(t.num_classes) + ")");
  }
  return std::nullopt;
}

/// Per-call working memory of a forward/backward pass.
struct scratch {
  std::vector<float> h_pre, h, z, p, dh;
};

/// Writes softmax(z) into p (max-subtracted; the normaliser sums in class order).
void softmax(const std::vector<float>& z, std::vector<float>& p) {
  const float m = *std::max_element(z.begin(), z.end());
  float s = 0.0f;
  for (std::size_t c = 0; c < z.size(); ++c) {
    p[c] = std::exp(z[c] - m);
    s += p[c];
  }
  for (auto& v : p) v /= s;
}

/// A softmax-cross-entropy classifier trained by SGD with momentum: everything but the
/// network itself, which subclasses supply (forward and per-example backward).
class classifier : public trainable {
 public:
  classifier(std::string kind, std::shared_ptr<const data_split> data, const settings& s,
             std::uint64_t seed, std::size_t n_params)
      : kind_(std::move(kind)),
        data_(std::move(data)),
        settings_(s),
        key_(detail::mix64(seed ^ salt_batch)),
        params_(n_params, 0.0f),
        velocity_(n_params, 0.0f) {
    detail::byte_writer w;
    w.str(kind_);
    w.raw(&settings_.lr, sizeof settings_.lr);
    w.raw(&settings_.momentum, sizeof settings_.momentum);
    w.u64(static_cast<std::uint64_t>(settings_.batch_size));
    w.u64(static_cast<std::uint64_t>(settings_.hidden));
    w.u64(n_params);
    w.u64(fingerprint(*data_));
    fingerprint_ = detail::fnv1a64(w.bytes().data(), w.bytes().size());
  }

  std::string kind() const override { return kind_; }
  std::vector<float>& params() override { return params_; }
  const std::vector<float>& params() const override { return params_; }
  std::int64_t step() const override { return step_; }
  void set_step(std::int64_t step) override { step_ = step; }
  std::vector<float>* optimizer_state() override { return &velocity_; }

  status compute_gradient(int shard_index, int num_shards, std::int64_t step,
                          std::vector<float>& grad_out) const override {
    auto rows = shard_rows(shard_index, num_shards, step);
    if (!rows) return rows.err();
    grad_out.assign(params_.size(), 0.0f);
    const dataset& train = data_->train;
    scratch s = make_scratch();
    for (const std::uint32_t i : *rows) add_example_gradient(train.row(i), train.y[i], grad_out.data(), s);
    // Mean over the global batch, times K: the mean of the K shard gradients is then the
    // gradient of the batch-mean loss.
    const auto scale = static_cast<float>(static_cast<double>(num_shards) /
                                          static_cast<double>(settings_.batch_size));
    for (auto& g : grad_out) g *= scale;
    return {};
  }

  /// The rows of shard `shard_index` of `num_shards` of step `step` (positions
  /// [i*B/K, (i+1)*B/K) of the batch, each drawn by counter_hash), or the argument error.
  result<std::vector<std::uint32_t>> shard_rows(int shard_index, int num_shards,
                                                std::int64_t step) const {
    if (num_shards < 1)
      return error{error_kind::invalid_input,
                   kind_ + ": compute_gradient: num_shards must be >= 1, got " + std::to_string(num_shards)};
    if (shard_index < 0 || shard_index >= num_shards)
      return error{error_kind::invalid_input, kind_ + ": compute_gradient: shard index " +
                                                  std::to_string(shard_index) + " is outside [0, " +
                                                  std::to_string(num_shards) + ")"};
    if (step < 0)
      return error{error_kind::invalid_input,
                   kind_ + ": compute_gradient: step must be >= 0, got " + std::to_string(step)};
    const std::int64_t b = settings_.batch_size;
    const std::int64_t begin = shard_index * b / num_shards;
    const std::int64_t end = (shard_index + 1) * b / num_shards;
    std::vector<std::uint32_t> rows;
    rows.reserve(static_cast<std::size_t>(end - begin));
    for (std::int64_t j = begin; j < end; ++j) {
      const auto draw = detail::counter_hash(key_, static_cast<std::uint64_t>(step),
                                             static_cast<std::uint64_t>(j));
      rows.push_back(static_cast<std::uint32_t>(detail::below(draw, data_->train.size())));
    }
    return rows;
  }

  /// The settings the model was made with.
  const settings& train_settings() const { return settings_; }
  /// The data it trains on.
  const std::shared_ptr<const data_split>& data_ptr() const { return data_; }

  status apply_gradient(const std::vector<float>& summed_grad, int k) override {
    if (k < 1)
      return error{error_kind::invalid_input,
                   kind_ + ": apply_gradient: k must be >= 1, got " + std::to_string(k)};
    if (summed_grad.size() != params_.size())
      return error{error_kind::invalid_input,
                   kind_ + ": apply_gradient: gradient has " + std::to_string(summed_grad.size()) +
                       " values, the model has " + std::to_string(params_.size()) + " parameters"};
    const auto kf = static_cast<float>(k);
    const auto lr = static_cast<float>(settings_.lr);
    const auto mu = static_cast<float>(settings_.momentum);
    for (std::size_t i = 0; i < params_.size(); ++i) {
      velocity_[i] = mu * velocity_[i] + summed_grad[i] / kf;
      params_[i] -= lr * velocity_[i];
    }
    ++step_;
    return {};
  }

  double loss() const override {
    const dataset& train = data_->train;
    scratch s = make_scratch();
    double total = 0.0;
    for (std::size_t i = 0; i < train.size(); ++i) {
      forward(train.row(i), s);
      const double m = *std::max_element(s.z.begin(), s.z.end());
      double sum = 0.0;
      for (float z : s.z) sum += std::exp(static_cast<double>(z) - m);
      total += m + std::log(sum) - static_cast<double>(s.z[static_cast<std::size_t>(train.y[i])]);
    }
    return total / static_cast<double>(train.size());
  }

  double held_out_accuracy() const override {
    const dataset& h = data_->held_out;
    if (h.size() == 0) return std::numeric_limits<double>::quiet_NaN();
    scratch s = make_scratch();
    std::size_t correct = 0;
    for (std::size_t i = 0; i < h.size(); ++i) {
      forward(h.row(i), s);
      const auto best = std::max_element(s.z.begin(), s.z.end()) - s.z.begin();
      if (best == h.y[i]) ++correct;
    }
    return static_cast<double>(correct) / static_cast<double>(h.size());
  }

  std::vector<std::uint8_t> save_state() const override {
    detail::byte_writer w;
    w.raw(state_magic, sizeof state_magic);
    w.u32(state_version);
    w.str(kind_);
    w.u64(fingerprint_);
    w.u64(key_);
    w.i64(step_);
    w.floats(params_);
    w.floats(velocity_);
    return std::move(w.bytes());
  }

  status load_state(const std::vector<std::uint8_t>& state) override {
    auto bad = [&](const std::string& what) {
      return error{error_kind::invalid_input, kind_ + " state: " + what};
    };
    detail::byte_reader r(state.data(), state.size());
    char magic[sizeof state_magic] = {};
    if (!r.raw(magic, sizeof magic) || std::memcmp(magic, state_magic, sizeof magic) != 0)
      return bad("not the saved state of a built-in model (bad magic)");
    std::uint32_t version = 0;
    if (!r.u32(version)) return bad("truncated");
    if (version != state_version)
      return bad("unsupported state version " + std::to_string(version) + " (this build reads " +
                 std::to_string(state_version) + ")");
    std::string kind;
    std::uint64_t fp = 0, key = 0;
    std::int64_t step = 0;
    std::vector<float> params, velocity;
    if (!r.str(kind) || !r.u64(fp) || !r.u64(key) || !r.i64(step) || !r.floats(params) ||
        !r.floats(velocity))
      return bad("truncated");
    if (r.remaining() != 0)
      return bad(std::to_string(r.remaining()) + " unexpected bytes after the state");
    if (kind != kind_) return bad("saved by a '" + kind + "', cannot load into a '" + kind_ + "'");
    if (params.size() != params_.size() || velocity.size() != params_.size())
      return bad("holds " + std::to_string(params.size()) + " parameters, this model has " +
                 std::to_string(params_.size()));
    if (fp != fingerprint_)
      return bad("saved with a different configuration or data (lr, momentum, batch size, "
                 "architecture or dataset differ)");
    if (step < 0) return bad("negative step counter " + std::to_string(step));
    key_ = key;
    step_ = step;
    params_ = std::move(params);
    velocity_ = std::move(velocity);
    return {};
  }

 protected:
  /// Working memory sized for this network.
  virtual scratch make_scratch() const = 0;
  /// Logits of one example into s.z (and hidden activations into s, where the net has them).
  virtual void forward(const float* x, scratch& s) const = 0;
  /// Adds the cross-entropy gradient of one example to `grad`.
  virtual void add_example_gradient(const float* x, int label, float* grad, scratch& s) const = 0;

  /// Sets s.p to softmax(s.z) minus the one-hot label: dLoss/dlogits.
  static void logit_gradient(int label, scratch& s) {
    softmax(s.z, s.p);
    s.p[static_cast<std::size_t>(label)] -= 1.0f;
  }

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
      : classifier("mlp", data, s, seed, count(s.hidden, data->train.dim, data->train.num_classes)) {
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

/// An error when a model of these settings on `dim` inputs and `classes` classes would have
/// more than max_params parameters.
std::optional<error> check_model_size(const std::string& kind, const settings& s, int dim,
                                      int classes, bool with_hidden) {
  const double n = with_hidden
                       ? static_cast<double>(s.hidden) * (dim + 1.0 + classes) + classes
                       : static_cast<double>(classes) * (dim + 1.0);
  if (n > max_params)
    return input_error(kind + " config", 0, with_hidden ? "hidden" : "dim",
                       "the model would have " + text::format_count(n) +
                           " parameters (at most 1e8)");
  return std::nullopt;
}

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
  if (auto e = check_model_size(kind, p->train, data->train.dim, data->train.num_classes,
                                with_hidden))
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
  return build<softmax_regression>("softmax_regression", seed, config, std::move(data), true, false);
}

status check_softmax_regression_config(const trainable_config& config) {
  return check_config("softmax_regression", config, false);
}

status check_mlp_config(const trainable_config& config) { return check_config("mlp", config, true); }

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
