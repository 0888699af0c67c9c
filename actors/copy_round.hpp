#pragma once
/// @file copy_round.hpp
/// The executor of one job copy for one round on a node: plain C++ run on a worker thread
/// (never a CAF scheduler thread), called by the node actor and by tests.
///
/// Local copy (start_copy::part_ranks empty or one rank). Each step is train_step_on(K): the
/// K shard gradients computed here, summed in shard order, applied. On a node without real
/// GPUs the speed factor throttles it: a step takes task_times x step_time / speed seconds
/// (task_times = the tasks its busiest GPU runs back to back per step, 1 for a gang). On a
/// node with real GPUs (runtime/node/gpu/discovery.hpp) nothing throttles it: a step takes what it
/// takes, and the rate reported is what was measured.
///
/// Copy spread over nodes (several part_ranks; Hare's relaxed fixed-scale synchronisation, or
/// a gang spanning servers). Every part loads the same state and, each step:
///  1. computes the gradients of its shards (shard_begin .. shard_begin + shards - 1) of the
///     step's global batch on the current parameters, and waits out its task-times;
///  2. gathers all parts' gradients through the aggregator (allgather over part_ranks, whose
///     order is the shard order), with one flag per part saying whether it can run another
///     step within its round;
///  3. sums the K shard gradients in shard order (train::sum_shard_gradients) and applies
///     them (apply_gradient(sum, K)): the same arithmetic as one process running
///     train_step(K), so the state is bitwise the same wherever the tasks ran;
///  4. goes on while every part's flag says so, so all parts make the same number of steps.
/// A step thus lasts as long as its slowest part (step ends with its last task).
///
/// Forked jobs (HadarE, several fork_ranks). Copies draw disjoint batches; at the round end
/// the copies' leaders (first part of each) merge through train::fork_merge, then each leader
/// sends the merged state to its copy's other parts (an allgather in which only it
/// contributes).
///
/// Every collective has the order's aggregate_timeout; a failed one ends the round with
/// `retry` set (the job resumes from its checkpoint) and drops the in-memory model.
///
/// State and checkpoints. A copy starts from the model kept in memory when it is at the
/// order's resume_step, else from the order's resume_path; a file that cannot be used (missing,
/// truncated, corrupt, another job's, another step) is reported and the copy falls back to
/// fallback_path, else restarts at step 0: it never loads bad state and never fails for it.
/// The leader of copy 0 writes the round's checkpoint to checkpoint_path tagged with the
/// order's epoch, and publishes it only while the job's fence allows that epoch; a write that
/// fails (a full directory) is reported as checkpoint_error, a fenced one as a lost round.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/protocol.hpp"
#include "runtime/node/comm/aggregator.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::actors {

/// A program's processes parked between rounds on a warm lease (actors/program_round.hpp).
struct warm_program;

/// One copy of a job held by a node: its model (kept between rounds) and the round it runs.
/// The worker thread owns every field but `stop` while it runs; the actor reads the results
/// only after the worker has posted `copy_done` (the mailbox orders the two).
struct copy_slot {
  start_copy order;                         ///< what the current round asks for
  std::int64_t round = -1;                  ///< current round
  std::unique_ptr<train::trainable> model;  ///< in-memory state, null until loaded
  std::thread worker;                       ///< runs the round
  std::atomic<bool> stop{false};            ///< ends the round early (stop_copy, shutdown)
  std::atomic<bool> abort{false};           ///< a program's processes are ended now (shutdown)
  /// The node's GPUs this copy holds in the current round (runtime/node/gpu/devices.hpp's
  /// assign_devices, CUDA ordinals of the node process); empty on a node without real GPUs.
  std::vector<int> devices;
  /// The device a CUDA trainable of this copy runs on: the first it holds; -1 = none.
  int device_index() const { return devices.empty() ? -1 : devices.front(); }
  // Results of the round.
  std::int64_t start_step = 0;  ///< step the round started from
  std::int64_t steps = 0;       ///< steps made
  std::int64_t end_step = 0;    ///< the job's step after the round (its start on failure)
  double busy_seconds = 0;      ///< wall seconds from start to checkpoint
  double loss = 0;              ///< training loss after the round
  double accuracy = 0;          ///< held-out accuracy (computed when finished)
  bool finished = false;        ///< reached total_steps or the target loss
  bool reached_target = false;  ///< finished by reaching the target loss
  bool checkpointed = false;    ///< the checkpoint was written
  state_source source = state_source::fresh;  ///< where the round's state came from
  std::vector<std::string> bad_files;         ///< checkpoints found unusable at the start
  std::string source_why;                     ///< why they were unusable
  std::string checkpoint_error;  ///< why the checkpoint could not be written ("" = it was)
  bool fenced = false;           ///< the job's fence refused the checkpoint (a stale writer)
  std::string error;             ///< why the round failed, empty if it did not
  bool retry = false;            ///< the failure was a synchronisation with other nodes
  bool program_failed = false;   ///< a user's program failed (progress_report::program_failed)
  double startup_seconds = 0;    ///< a program: from its start to its hello (0 = not a program)
  double ema_throughput = 0;     ///< moving average of steps/s over rounds (0 = none yet)
  bool renewed = false;          ///< a program's processes went on from the round before
  /// A program's processes waiting, after their lease's end and checkpoint, for the next
  /// round to renew their lease in place (null: none wait). Dropping the last reference lets
  /// them go: each is told `exit` and reaped.
  std::shared_ptr<warm_program> warm;
};

/// Hooks into a copy's checkpoints for tests (fault injection); production leaves them empty.
struct copy_hooks {
  /// Asked before the round's checkpoint is written: a non-zero errno fails the write as the
  /// system would (train::write_options::inject_errno).
  std::function<int(const start_copy& order, std::int64_t round)> checkpoint_errno;
  /// Called once the temporary file is written, before the fence check and the rename.
  std::function<void(const start_copy& order, std::int64_t round)> before_checkpoint_rename;
  /// Called once the round's checkpoint is published at `path`.
  std::function<void(const start_copy& order, std::int64_t round, const std::string& path)>
      after_checkpoint;
  /// Called when a forked copy's leader is about to merge with the other copies.
  std::function<void(const start_copy& order, std::int64_t round)> before_merge;
  /// Every round loads the job's state from its checkpoint, never from the model in memory.
  bool always_load = false;
};

/// True when this node leads its copy (the copy runs here alone, or this is its first part):
/// it writes the checkpoint (copy 0) and takes part in a fork merge.
bool leads_copy(const start_copy& o, std::int32_t rank);

/// Runs one copy for one round on the calling thread (the worker's body); see the file
/// comment. `speed` is the node's speed factor, which throttles each step; nullopt on a node
/// with real GPUs: no throttling. `rank` is this node's rank (its aggregator rank); `agg` may be
/// null when the copy runs here alone and is not forked. Steps until `length` seconds have passed
/// since the call (a step that would end later is not begun), the step budget or total steps are
/// reached, or `slot.stop` is set; then merges (forked), and the leader of copy 0 writes the
/// checkpoint. `on_started` is called once the state is loaded, with the step it starts from
/// (the slot's source, bad_files and source_why are set by then). Fills the slot's results.
void run_copy_round(copy_slot& slot, const train::trainable_registry& kinds,
                    std::optional<double> speed, double length,
                    const std::function<void(std::int64_t)>& on_started,
                    comm::aggregator* agg = nullptr, std::int32_t rank = 0,
                    const copy_hooks& hooks = {});

}  // namespace tessera::actors
