// The base of the built-in models (classifier.hpp): the batch draws, the SGD-with-momentum
// update, the loss and held-out accuracy, and the saved state's format.
#include "runtime/node/train/classifier.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "runtime/node/train/detail/bytes.hpp"
#include "runtime/node/train/detail/random.hpp"

namespace tessera::train::builtin {

namespace {

/// Opening bytes of a built-in model's saved state.
constexpr char state_magic[8] = {'T', 'S', 'R', 'S', 'T', 'A', 'T', 'E'};
/// Layout version of a built-in model's saved state.
constexpr std::uint32_t state_version = 1;

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

}  // namespace

classifier::classifier(std::string kind, std::shared_ptr<const data_split> data, const settings& s,
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

status classifier::compute_gradient(int shard_index, int num_shards, std::int64_t step,
                                    std::vector<float>& grad_out) const {
  auto rows = shard_rows(shard_index, num_shards, step);
  if (!rows) return rows.err();
  grad_out.assign(params_.size(), 0.0f);
  const dataset& train = data_->train;
  scratch s = make_scratch();
  for (const std::uint32_t i : *rows)
    add_example_gradient(train.row(i), train.y[i], grad_out.data(), s);
  // Mean over the global batch, times K: the mean of the K shard gradients is then the
  // gradient of the batch-mean loss.
  const auto scale = static_cast<float>(static_cast<double>(num_shards) /
                                        static_cast<double>(settings_.batch_size));
  for (auto& g : grad_out) g *= scale;
  return {};
}

result<std::vector<std::uint32_t>> classifier::shard_rows(int shard_index, int num_shards,
                                                          std::int64_t step) const {
  if (num_shards < 1)
    return error{
        error_kind::invalid_input,
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
    const auto draw =
        detail::counter_hash(key_, static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(j));
    rows.push_back(static_cast<std::uint32_t>(detail::below(draw, data_->train.size())));
  }
  return rows;
}

status classifier::apply_gradient(const std::vector<float>& summed_grad, int k) {
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

double classifier::loss() const {
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

double classifier::held_out_accuracy() const {
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

std::vector<std::uint8_t> classifier::save_state() const {
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

status classifier::load_state(const std::vector<std::uint8_t>& state) {
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
    return bad(
        "saved with a different configuration or data (lr, momentum, batch size, "
        "architecture or dataset differ)");
  if (step < 0) return bad("negative step counter " + std::to_string(step));
  key_ = key;
  step_ = step;
  params_ = std::move(params);
  velocity_ = std::move(velocity);
  return {};
}

void classifier::logit_gradient(int label, scratch& s) {
  softmax(s.z, s.p);
  s.p[static_cast<std::size_t>(label)] -= 1.0f;
}

}  // namespace tessera::train::builtin
