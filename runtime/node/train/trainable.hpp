#pragma once
/// @file trainable.hpp
/// The elastic job API: what the runtime needs from a training job, and a registry that makes
/// jobs by kind name.
///
/// Execution model (docs/design.md, "Execution model of a job"): a job has a fixed scale K.
/// One training step is K gradient tasks over the K shards of the step's global batch; the K
/// shard gradients are summed in shard order 0..K-1 and applied once, as the mean of the K
/// (Hare's relaxed fixed-scale synchronisation: the same math as K-worker synchronous SGD).
/// A shard gradient is a pure function of (parameters, step, shard index, K), so where the K
/// tasks run -- one object, several copies loaded from the same state, any order -- does not
/// change the resulting parameters, bit for bit.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera::train {

/// A training job the runtime can step, checkpoint and move between nodes.
///
/// Contract for implementations:
/// - `compute_gradient` is const and deterministic: it reads only the parameters and the
///   arguments (any randomness is counter-based on the step), so it may run concurrently on
///   one object and gives the same bits on every copy holding the same state.
/// - `apply_gradient` is the only operation that advances training (parameters, optimizer
///   state, step counter).
/// - `save_state`/`load_state` carry everything that affects later steps (parameters, step
///   counter, optimizer state, random-number key), so a loaded object continues
///   bitwise-identically to the one that saved.
class trainable {
 public:
  /// Destroys the job object.
  virtual ~trainable() = default;

  /// The model family ("softmax_regression", "mlp", or a researcher's own); stored in saved
  /// state so state is never loaded into a different kind.
  virtual std::string kind() const = 0;

  /// The flat parameter buffer. The runtime may overwrite values (e.g. averaging copies) but
  /// must not resize it.
  virtual std::vector<float>& params() = 0;
  /// The flat parameter buffer, read-only.
  virtual const std::vector<float>& params() const = 0;
  /// Number of parameters (`params().size()`).
  std::size_t num_params() const { return params().size(); }

  /// Steps applied so far; the step the next `train_step` performs.
  virtual std::int64_t step() const = 0;

  /// Gradient of shard `shard_index` of `num_shards` of step `step`'s global batch, written
  /// to `grad_out` (resized to num_params()). Scaled so that the mean of the K shard
  /// gradients is the gradient of the mean loss over the global batch. Errors
  /// (invalid_input) for a shard index outside [0, num_shards) or num_shards < 1.
  virtual status compute_gradient(int shard_index, int num_shards, std::int64_t step,
                                  std::vector<float>& grad_out) const = 0;

  /// One optimizer update with the mean `summed_grad / k` of `k` shard gradients (summed in
  /// shard order, see sum_shard_gradients); advances the step counter by one. Errors
  /// (invalid_input) for k < 1 or a gradient of the wrong size; then nothing changes.
  virtual status apply_gradient(const std::vector<float>& summed_grad, int k) = 0;

  /// The optimizer's per-parameter state as one flat buffer (e.g. momentum), or null when the
  /// optimizer keeps none. The runtime may overwrite values (merging forked copies,
  /// runtime/node/train/fork_merge.hpp) but must not resize it. Default: none.
  virtual std::vector<float>* optimizer_state() { return nullptr; }

  /// Sets the step counter without touching anything else. The runtime uses it when the
  /// copies of a forked job merge: the merged job has made the steps of all its copies.
  virtual void set_step(std::int64_t step) = 0;

  /// One full step at scale `k` on this object: the K shard gradients of step(), summed in
  /// shard order, applied. Bitwise-identical to computing the shards anywhere and calling
  /// sum_shard_gradients and apply_gradient.
  status train_step(int k) { return train_step_on(k, step()); }

  /// As train_step, but on the global batch of step `data_step` (the step counter still
  /// advances by one). A forked job's copies draw disjoint batches this way: copy c of n
  /// makes its i-th step of a round on batch `start + i * n + c`. Errors (invalid_input) for
  /// k < 1; the step itself is step_on's.
  status train_step_on(int k, std::int64_t data_step);

  /// Mean training loss (cross-entropy for the built-in models) at the current parameters.
  virtual double loss() const = 0;

  /// Fraction of held-out examples classified correctly, in [0, 1] (NaN without a held-out
  /// set).
  virtual double held_out_accuracy() const = 0;

  /// Serialises everything later steps depend on (see the class comment).
  virtual std::vector<std::uint8_t> save_state() const = 0;

  /// Restores state made by `save_state` of a trainable of the same kind, configuration and
  /// data. All or nothing: on error (invalid_input, naming what does not match or is
  /// truncated) this object is unchanged.
  virtual status load_state(const std::vector<std::uint8_t>& state) = 0;

  /// An independent copy with the same state (and shared read-only data).
  virtual std::unique_ptr<trainable> clone() const = 0;

 protected:
  /// One step at scale `k` >= 1 on batch `data_step` (train_step_on checked k). The default
  /// goes through compute_gradient, sum_shard_gradients and apply_gradient; a kind may
  /// override it to keep the step where its state lives (the CUDA MLP stays on its GPU), with
  /// the same bits.
  virtual status step_on(int k, std::int64_t data_step);
};

/// Sums shard gradients elementwise in shard order: out = ((g0 + g1) + g2) + ... . The one
/// summation order every executor must use, so results do not depend on where shards ran.
/// Errors (invalid_input) when `shard_grads` is empty or the sizes differ.
status sum_shard_gradients(const std::vector<std::vector<float>>& shard_grads,
                           std::vector<float>& out);

/// Configuration of a trainable: numeric settings by name (e.g. "lr", "batch_size"). Each
/// kind documents its keys; an unknown key is an error naming the valid ones.
using trainable_config = std::map<std::string, double>;

/// Makes a trainable from a seed and a configuration, or says why it cannot.
using trainable_factory =
    std::function<result<std::unique_ptr<trainable>>(std::uint64_t seed, const trainable_config&)>;

/// Checks a seed and configuration as the kind's factory would, without building the
/// trainable (no data, no parameters), so every job of a run can be checked before it starts.
using trainable_check = std::function<status(std::uint64_t seed, const trainable_config& config)>;

/// Kind name -> factory. A plain value: a program makes one (usually from
/// builtin_trainables()), adds its own kinds, and passes it to whatever creates jobs.
class trainable_registry {
 public:
  /// Registers `kind`. Errors (invalid_input) for an empty name, a name with blanks, a null
  /// factory, or a kind already registered. `check`, when given, validates a configuration
  /// cheaply (see check()).
  status add(const std::string& kind, std::string description, trainable_factory factory,
             trainable_check check = {});

  /// Checks that `kind` exists and takes `seed` and `config`: through the kind's check when it
  /// registered one, else by making the trainable and dropping it (as costly as a node's
  /// start of the job). Errors as make's.
  status check(const std::string& kind, std::uint64_t seed,
               const trainable_config& config = {}) const;

  /// Makes a trainable of `kind`. Errors: not_found naming the registered kinds; otherwise
  /// whatever the factory reports (e.g. a bad configuration key); internal when it returns null.
  result<std::unique_ptr<trainable>> make(const std::string& kind, std::uint64_t seed,
                                          const trainable_config& config = {}) const;

  /// True when `kind` is registered.
  bool contains(const std::string& kind) const;

  /// The registered kinds, sorted.
  std::vector<std::string> kinds() const;

  /// The one-line description given at registration ("" for an unknown kind).
  std::string description(const std::string& kind) const;

 private:
  struct entry {
    std::string description;
    trainable_factory factory;
    trainable_check check;
  };
  /// The entry of `kind`, or the not_found error listing the registered kinds.
  result<const entry*> find(const std::string& kind) const;
  std::map<std::string, entry> entries_;
};

/// A registry holding the built-in kinds ("softmax_regression", "mlp", and
/// "mlp_cuda", which fails to make without CUDA: runtime/node/train/cuda_mlp.hpp); a fresh value
/// each call, which the caller may extend.
trainable_registry builtin_trainables();

}  // namespace tessera::train
