#pragma once
/// @file least_squares.hpp
/// A researcher's own trainable: linear least squares on synthetic data, written against the
/// elastic job API (runtime/node/train/trainable.hpp) only. It shows what a job must provide for
/// the runtime to step it, checkpoint it and move it between nodes bit for bit.

#include <cstdint>
#include <memory>

#include "runtime/core/result.hpp"
#include "runtime/node/train/trainable.hpp"

namespace example {

/// Makes a least-squares job: y = w . x + b + noise, D features (config "dim", default 8),
/// trained by plain SGD (config "lr", default 0.05, "batch_size", default 16).
tessera::result<std::unique_ptr<tessera::train::trainable>> make_least_squares(
    std::uint64_t seed, const tessera::train::trainable_config& config);

}  // namespace example
