#include "runtime/node/train/trainable.hpp"

#include <utility>

#include "runtime/node/train/cuda_mlp.hpp"
#include "runtime/node/train/models.hpp"

namespace tessera::train {

status trainable::train_step_on(int k, std::int64_t data_step) {
  if (k < 1)
    return error{error_kind::invalid_input,
                 kind() + ": train_step: k must be >= 1, got " + std::to_string(k)};
  return step_on(k, data_step);
}

status trainable::step_on(int k, std::int64_t data_step) {
  std::vector<std::vector<float>> grads(static_cast<std::size_t>(k));
  const std::int64_t s = data_step;
  for (int i = 0; i < k; ++i)
    if (auto st = compute_gradient(i, k, s, grads[static_cast<std::size_t>(i)]); !st) return st;
  std::vector<float> summed;
  if (auto st = sum_shard_gradients(grads, summed); !st) return st;
  return apply_gradient(summed, k);
}

status sum_shard_gradients(const std::vector<std::vector<float>>& shard_grads,
                           std::vector<float>& out) {
  if (shard_grads.empty())
    return error{error_kind::invalid_input, "sum_shard_gradients: no shard gradients"};
  const std::size_t n = shard_grads.front().size();
  for (std::size_t i = 1; i < shard_grads.size(); ++i)
    if (shard_grads[i].size() != n)
      return error{error_kind::invalid_input, "sum_shard_gradients: shard " + std::to_string(i) +
                                                  " has " + std::to_string(shard_grads[i].size()) +
                                                  " values, shard 0 has " + std::to_string(n)};
  out = shard_grads.front();
  for (std::size_t i = 1; i < shard_grads.size(); ++i) {
    const auto& g = shard_grads[i];
    for (std::size_t j = 0; j < n; ++j) out[j] += g[j];
  }
  return {};
}

status trainable_registry::add(const std::string& kind, std::string description,
                               trainable_factory factory, trainable_check check) {
  if (kind.empty()) return error{error_kind::invalid_input, "trainable registry: empty kind name"};
  if (kind.find_first_of(" \t\r\n") != std::string::npos)
    return error{error_kind::invalid_input,
                 "trainable registry: kind name '" + kind + "' contains blanks"};
  if (!factory)
    return error{error_kind::invalid_input,
                 "trainable registry: kind '" + kind + "' has no factory"};
  if (entries_.count(kind))
    return error{error_kind::invalid_input,
                 "trainable registry: kind '" + kind + "' is already registered"};
  entries_.emplace(kind, entry{std::move(description), std::move(factory), std::move(check)});
  return {};
}

result<const trainable_registry::entry*> trainable_registry::find(const std::string& kind) const {
  const auto it = entries_.find(kind);
  if (it != entries_.end()) return &it->second;
  std::string list;
  for (const auto& [name, e] : entries_) {
    (void)e;
    list += (list.empty() ? "" : ", ") + name;
  }
  return error{error_kind::not_found, "unknown trainable kind '" + kind + "'; valid kinds: " +
                                          (list.empty() ? "(none registered)" : list)};
}

result<std::unique_ptr<trainable>> trainable_registry::make(const std::string& kind,
                                                            std::uint64_t seed,
                                                            const trainable_config& config) const {
  const auto e = find(kind);
  if (!e) return e.err();
  auto made = (*e)->factory(seed, config);
  if (made && !*made)
    return error{error_kind::internal,
                 "the factory of trainable kind '" + kind + "' returned null"};
  return made;
}

status trainable_registry::check(const std::string& kind, std::uint64_t seed,
                                 const trainable_config& config) const {
  const auto e = find(kind);
  if (!e) return e.err();
  if ((*e)->check) return (*e)->check(seed, config);
  auto made = make(kind, seed, config);
  if (!made) return made.err();
  return {};
}

bool trainable_registry::contains(const std::string& kind) const {
  return entries_.count(kind) != 0;
}

std::vector<std::string> trainable_registry::kinds() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) {
    (void)e;
    out.push_back(name);
  }
  return out;
}

std::string trainable_registry::description(const std::string& kind) const {
  const auto it = entries_.find(kind);
  return it == entries_.end() ? std::string() : it->second.description;
}

trainable_registry builtin_trainables() {
  trainable_registry r;
  // The built-in names are distinct and non-empty, so these cannot fail.
  (void)r.add(
      "softmax_regression",
      "multinomial logistic regression on Gaussian blobs (CPU, SGD with momentum)",
      [](std::uint64_t seed, const trainable_config& c) {
        return make_softmax_regression(seed, c);
      },
      [](std::uint64_t, const trainable_config& c) { return check_softmax_regression_config(c); });
  (void)r.add(
      "mlp", "one-hidden-layer ReLU MLP on Gaussian blobs (CPU, SGD with momentum)",
      [](std::uint64_t seed, const trainable_config& c) { return make_mlp(seed, c); },
      [](std::uint64_t, const trainable_config& c) { return check_mlp_config(c); });
  (void)r.add(
      cuda_mlp_kind,
      "the mlp on a CUDA GPU (cuBLAS; needs a build with CUDA and a GPU; its state "
      "loads into an \"mlp\" and back; config key \"device\" picks the GPU)",
      [](std::uint64_t seed, const trainable_config& c) { return make_cuda_mlp(seed, c); },
      [](std::uint64_t, const trainable_config& c) { return check_cuda_mlp_config(c); });
  return r;
}

}  // namespace tessera::train
