#pragma once
/// @file node_actor.hpp
/// The node actor: one per server of the cluster (one per process under mpirun). It registers
/// with the scheduler, sends heartbeats, and runs the job copies of each round it is given.
///
/// Each copy of a round runs on its own worker thread (never on a CAF scheduler thread): it
/// brings the job's state to the step the scheduler expects (the model kept in memory from the
/// node's previous round, else the checkpoint in the shared directory, else a fresh model at
/// step 0), steps it until the round's length is used up, writes the checkpoint atomically
/// (train::save_trainable_checkpoint) and posts `copy_done` to the actor, which reports to the
/// scheduler. The server's speed factor throttles the executor: a step computes, then sleeps
/// until `step_time / speed` seconds have passed since it began.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/protocol.hpp"
#include "runtime/comm/aggregator.hpp"
#include "runtime/model.hpp"
#include "runtime/train/fork_merge.hpp"
#include "runtime/train/trainable.hpp"

namespace tessera::actors {

/// Settings of one node, passed down from the launcher.
struct node_config {
  std::int32_t rank = 0;                             ///< index of its server in the cluster
  server srv;                                        ///< its server (GPU type, GPUs, speed)
  std::string host;                                  ///< host name, for messages
  std::uint32_t version = protocol_version;          ///< version it claims (tests vary it)
  const train::trainable_registry* kinds = nullptr;  ///< must outlive the actor
  double register_timeout = 10;                      ///< seconds to wait for a welcome
  /// Fault injection for tests: at this round the process kills itself (SIGKILL) half way
  /// through the round; -1 = never. Only for a node in a process of its own.
  std::int64_t kill_at_round = -1;
  /// Benchmark: after registering, send this many heartbeats back to back (seq < 0).
  std::int64_t flood = 0;
  /// Merges forked copies (MPI backend under mpirun, local backend in one process); null when
  /// the launch has none, and then the scheduler does not fork jobs.
  std::shared_ptr<comm::aggregator> agg;
};

/// One copy of a job held by a node: its model (kept between rounds) and the round it runs.
/// The worker thread owns every field but `stop` while it runs; the actor reads the results
/// only after the worker has posted `copy_done` (the mailbox orders the two).
struct copy_slot {
  start_copy order;                          ///< what the current round asks for
  std::int64_t round = -1;                   ///< current round
  std::unique_ptr<train::trainable> model;   ///< in-memory state, null until loaded
  std::thread worker;                        ///< runs the round
  std::atomic<bool> stop{false};             ///< ends the round early (stop_copy, shutdown)
  // Results of the round.
  std::int64_t start_step = 0;   ///< step the round started from
  std::int64_t steps = 0;        ///< steps made
  double busy_seconds = 0;       ///< wall seconds from start to checkpoint
  double loss = 0;               ///< training loss after the round
  double accuracy = 0;           ///< held-out accuracy (computed when finished)
  bool finished = false;         ///< reached total_steps or the target loss
  bool reached_target = false;   ///< finished by reaching the target loss
  bool checkpointed = false;     ///< the checkpoint was written
  std::string error;             ///< why the round failed, empty if it did not
  double ema_throughput = 0;     ///< moving average of steps/s over rounds (0 = none yet)
};

/// Mutable state of a node actor.
struct node_state {
  /// Stops and joins every worker.
  ~node_state();
  node_config cfg;                                          ///< settings
  caf::actor scheduler;                                     ///< where reports go
  bool registered = false;                                  ///< welcome received
  double heartbeat_interval = 0.5;                          ///< from the welcome
  std::int64_t heartbeat_seq = 0;                           ///< next heartbeat number
  std::int64_t round = -1;                                  ///< current round
  int pending = 0;                                          ///< copies of `round` not done
  std::map<std::int64_t, std::shared_ptr<copy_slot>> slots;  ///< by job * 1024 + copy
  static inline const char* name = "tessera.node";          ///< actor name for logs
};

/// Posted by a worker thread when its round is over: (copy_done_atom, slot key, round).
using copy_done_atom = caf::atom_constant<caf::atom("copydone")>;

/// The node actor's behaviour. It quits with exit_reason::normal on `shutdown_atom, 0`, and
/// with an error (see describe()) when refused, when the scheduler is lost or on a non-zero
/// shutdown.
caf::behavior node_actor(caf::stateful_actor<node_state>* self, node_config cfg,
                         caf::actor scheduler);

/// Runs one copy for one round on the calling thread (the worker's body); exposed for tests.
/// Steps until `length` seconds have passed since the call (a step that would end later is not
/// begun), the step budget or total steps are reached, or `slot.stop` is set; then writes the
/// checkpoint. `on_started` is called once the state is loaded, with the step it starts from.
/// Fills the slot's results. A forked copy (order.fork_ranks has several ranks) then merges
/// with its sibling copies through `agg` (see start_copy::fork_ranks); only copy 0 writes the
/// checkpoint.
void run_copy_round(copy_slot& slot, const train::trainable_registry& kinds, double speed,
                    double length, const std::function<void(std::int64_t)>& on_started,
                    comm::aggregator* agg = nullptr);

}  // namespace tessera::actors
