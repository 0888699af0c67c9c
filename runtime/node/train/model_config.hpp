#pragma once
/// @file model_config.hpp
/// The configuration of the built-in models (models.hpp): a trainable_config read into
/// optimizer, architecture and generated-data settings, the checks of data passed in, and the
/// limit on a model's size. Internal to the built-in models (models.cpp, classifier.cpp): not
/// part of the public API.

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/core/result.hpp"
#include "runtime/node/train/dataset.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train::builtin {

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

/// Resolves a configuration for `kind`; `with_hidden` adds the mlp's "hidden" key. Messages
/// have the form "<kind> config: field '<key>': <what>".
result<parsed_config> parse_config(const std::string& kind, std::uint64_t seed,
                                   const trainable_config& config, bool data_given,
                                   bool with_hidden);

/// Checks that data passed in by a caller is well formed.
std::optional<error> check_data(const data_split& d);

/// An error when a model of these settings on `dim` inputs and `classes` classes would have
/// more than 1e8 parameters.
std::optional<error> check_model_size(const std::string& kind, const settings& s, int dim,
                                      int classes, bool with_hidden);

}  // namespace tessera::train::builtin
