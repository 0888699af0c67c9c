#pragma once
/// @file node_actor.hpp
/// The node actor: one per server of the cluster (one per process under mpirun). It registers
/// with the scheduler (proving the cluster secret, actors/auth.hpp, and checking the
/// scheduler's proof), sends heartbeats, and runs the job copies of each round it is given.
/// Its phases are named behaviours: `registering` (the auth exchange, then node_hello) and
/// `serving` (rounds). `leave_atom` from its own process (the launcher, on SIGTERM) asks the
/// scheduler to let it go after the current round; `fenced_atom` from the scheduler (it was
/// declared lost) stops its copies and ends it with a run_errc::fenced error.
///
/// Each copy of a round is given its share of the node's GPU indices (runtime/node/gpu/devices.hpp;
/// a round asking for more GPUs than the node has fails its copies) and runs on its own
/// worker thread (never on a CAF scheduler thread) through
/// run_copy_round (actors/copy_round.hpp): it brings the job's state to the step the
/// scheduler expects (the model kept in memory from the node's previous round, else the
/// checkpoint in the shared directory, else a fresh model at step 0), steps it until the
/// round's length is used up -- alone, or in step with the copy's parts on other nodes --,
/// writes the checkpoint atomically (train::save_trainable_checkpoint) and posts `copy_done`
/// to the actor, which reports to the job's actor (start_copy::job_actor) and, once every
/// copy of the round has reported, sends the scheduler its round_done.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/auth.hpp"
#include "actors/copy_round.hpp"
#include "actors/interfaces.hpp"
#include "actors/protocol.hpp"
#include "runtime/node/comm/aggregator.hpp"
#include "runtime/node/gpu/discovery.hpp"
#include "runtime/core/model.hpp"
#include "runtime/node/program/lease_server.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::actors {

/// Hooks into a node for tests and benchmarks (fault injection, message floods); a production
/// run leaves them empty. tests/tessera_faulty.cpp sets them through a run's node_setup.
struct node_hooks {
  /// Called when a round's orders arrive, before its copies start: (round, its length in s).
  std::function<void(std::int64_t round, double length)> on_round_start;
  /// Called inside the node actor once the scheduler has welcomed the node, before its first
  /// heartbeat; it may send the scheduler extra messages.
  std::function<void(caf::event_based_actor* self, const caf::actor& scheduler)> on_registered;
  /// Act as a rogue: send the hello even when the scheduler did not prove the secret (so a
  /// test sees the scheduler refuse a node that lacks it).
  bool skip_scheduler_check = false;
  /// Called when the scheduler's challenge arrived, before the hello is sent (registration
  /// is half done).
  std::function<void()> before_hello;
  copy_hooks copy;  ///< into each copy's checkpoints (actors/copy_round.hpp)
};

/// Settings of one node, passed down from the launcher.
struct node_config {
  std::int32_t rank = 0;                             ///< index of its server in the cluster
  server srv;                                        ///< its server (GPU type, GPUs, speed)
  std::string host;                                  ///< host name, for messages
  std::uint32_t version = protocol_version;          ///< version it claims in its hello
  const train::trainable_registry* kinds = nullptr;  ///< must outlive the actor
  double register_timeout = 10;                      ///< seconds to wait for a welcome
  secret_key secret;                                 ///< the cluster secret it proves
  /// Merges forked copies (MPI backend under mpirun, local backend in one process); null when
  /// the launch has none, and then the scheduler does not fork jobs.
  std::shared_ptr<comm::aggregator> agg;
  /// The node's lease socket for jobs of kind "program" (docs/lease-protocol.md); null when
  /// the launch runs none, and then such a job's copy fails with a message saying so.
  std::shared_ptr<program::lease_server> leases;
  /// The GPUs the node process found, checked against `srv` (find_node_gpus in
  /// actors/launch.cpp); none: the node runs on its declared GPUs, each step throttled by the
  /// speed factor. With real ones nothing is throttled, and each copy is given its device
  /// indices (copy_slot::devices; CUDA_VISIBLE_DEVICES for programs).
  gpu::node_gpus gpus;
  node_hooks hooks;  ///< tests and benchmarks only
};

/// Mutable state of a node actor.
struct node_state {
  /// Stops and joins every worker.
  ~node_state();
  node_config cfg;                                      ///< settings
  scheduler_node_api scheduler;                         ///< registration, round_done
  bool registered = false;                              ///< welcome received
  double heartbeat_interval = 0.5;                      ///< from the welcome
  std::int64_t heartbeat_seq = 0;                       ///< next heartbeat number
  std::int64_t round = -1;                              ///< current round
  int pending = 0;                                      ///< copies of `round` not done
  std::map<copy_id, std::shared_ptr<copy_slot>> slots;  ///< by job copy
  /// Threads letting go of programs parked on a warm lease that no order continued (each is
  /// told `exit` and reaped off the actor's thread), with a flag each sets when done; the
  /// done ones are joined at the next round's orders, the rest when the node ends.
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> releasing;
  static inline const char* name = "tessera.node";  ///< actor name for logs
};

/// Posted by a worker thread when its round is over: (copy_done_atom, job, copy, round).
using copy_done_atom = caf::atom_constant<caf::atom("copydone")>;

/// The node actor's behaviour. It quits with exit_reason::normal on `shutdown_atom, 0`, and
/// with an error (see describe()) when refused, when the scheduler is lost or on a non-zero
/// shutdown.
caf::behavior node_actor(caf::stateful_actor<node_state>* self, node_config cfg,
                         caf::actor scheduler);

}  // namespace tessera::actors
