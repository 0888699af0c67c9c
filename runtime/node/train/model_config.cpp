// The configuration of the built-in models (model_config.hpp): reading a trainable_config with
// range checks, checking data passed in, and the model-size limit.
#include "runtime/node/train/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "runtime/core/detail/text.hpp"

namespace tessera::train::builtin {

namespace {

namespace text = ::tessera::detail;  // the shared text helpers (runtime/core/detail/text.hpp)

/// Largest model accepted, in parameters.
constexpr double max_params = 1e8;

/// Keys that describe generated data; rejected when the data is passed in.
const std::vector<std::string>& data_keys() {
  static const std::vector<std::string> keys = {
      "classes",    "dim",    "train_size", "held_out_size", "clusters_per_class",
      "separation", "spread", "data_seed"};
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
      const bool is_data =
          std::find(data_keys().begin(), data_keys().end(), key) != data_keys().end();
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

}  // namespace

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
  auto bad = [](const std::string& what) {
    return error{error_kind::invalid_input, "dataset: " + what};
  };
  const dataset& t = d.train;
  if (t.dim < 1) return bad("dim must be >= 1, got " + std::to_string(t.dim));
  if (t.num_classes < 2)
    return bad("num_classes must be >= 2, got " + std::to_string(t.num_classes));
  if (t.size() == 0) return bad("the training set is empty");
  for (const auto& [name, part] :
       {std::pair<const char*, const dataset*>{"training", &t}, {"held-out", &d.held_out}}) {
    if (part->size() == 0) continue;
    if (part->dim != t.dim || part->num_classes != t.num_classes)
      return bad(std::string("the ") + name +
                 " set's dim/num_classes differ from the training set's");
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

/// An error when a model of these settings on `dim` inputs and `classes` classes would have
/// more than max_params parameters.
std::optional<error> check_model_size(const std::string& kind, const settings& s, int dim,
                                      int classes, bool with_hidden) {
  const double n = with_hidden ? static_cast<double>(s.hidden) * (dim + 1.0 + classes) + classes
                               : static_cast<double>(classes) * (dim + 1.0);
  if (n > max_params)
    return input_error(
        kind + " config", 0, with_hidden ? "hidden" : "dim",
        "the model would have " + text::format_count(n) + " parameters (at most 1e8)");
  return std::nullopt;
}

}  // namespace tessera::train::builtin
