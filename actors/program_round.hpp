#pragma once
/// @file program_round.hpp
/// The executor of one copy of a user's program (job kind "program") for one round on a
/// node: plain C++ on a worker thread, as copy_round.hpp is for built-in trainables, and
/// filling the same copy_slot results.
///
/// The node starts one process per task of its part of the copy (RANK = the task's index in
/// the copy, WORLD_SIZE = the copy's tasks), each in its own process group, with the
/// environment of docs/lease-protocol.md, and gives each a lease through the node's lease
/// server: the rest of the round's time for a copy of one process (at least half a round from
/// its hello, so a program whose start-up outlasts the round still trains), else the order's
/// lease_steps (every process of a copy must stop at the same step). It then watches them:
/// - a process that has not said hello within the grace, is silent for the grace while its
///   lease runs, still runs the grace after its lease ended, breaks the protocol, or exits
///   non-zero or by a signal fails the round (`program_failed`, with the tail of its stderr);
///   every process group of the copy on this node is then ended (SIGTERM, SIGKILL after at
///   most 5 s), so no process is left behind;
/// - `average` requests: when every local process of the copy has asked (or exited), the
///   copy's first process's buffers are averaged with the other copies' in that process's
///   shared memory (forked jobs: actors/program_average.hpp, an allreduce in place between
///   the copies' leader nodes through the aggregator; the mean of the copies that asked,
///   weighted by their steps under the "weighted" rule), and every local process gets the
///   mean; a copy that did not ask within the grace counts as failed for the round and is
///   left out of the mean, and the others carry on. A process on another part's node gets
///   its own buffers back: only the copy's first process survives the round (it writes).
/// - exit 0 from every process ends the round: the steps the first process reported count,
///   from its own checkpoint's step when it said one; `complete`, or reaching total_steps,
///   finishes the job. Steps per second are measured from hello to the last report.

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "actors/copy_round.hpp"
#include "runtime/node/comm/aggregator.hpp"
#include "runtime/node/program/lease_server.hpp"

namespace tessera::actors {

/// What a program copy needs from its node.
struct program_context {
  program::lease_server* leases = nullptr;  ///< the node's lease socket (must be running)
  double speed = 1;                         ///< pace factor for the programs (1 = none)
  std::int32_t rank = 0;                    ///< the node's rank (its aggregator rank)
  /// The node's GPUs this copy holds (CUDA ordinals of the node process); empty on a node
  /// without real GPUs, whose programs then get an empty CUDA_VISIBLE_DEVICES.
  std::vector<int> devices;
  /// The node process's own CUDA_VISIBLE_DEVICES ("" = unset), which the ordinals index.
  std::string node_visible;
  std::ostream* out = nullptr;  ///< where the programs' stdout lines go
  std::ostream* err = nullptr;  ///< where their stderr lines go
};

/// The environment of task `local` of the copy `o` on this node (docs/lease-protocol.md),
/// without the lease's token. Task i's CUDA_VISIBLE_DEVICES is the copy's device i (modulo
/// their number: tasks stacked on a GPU share it). Exposed for tests.
std::map<std::string, std::string> program_environment(const start_copy& o, int local,
                                                       const program_context& ctx,
                                                       const std::string& socket_path);

/// True when `slot` holds processes parked on a warm lease whose state is newer than their
/// checkpoint (program_order::checkpoint_rounds or _seconds said not to save yet).
bool warm_unsaved(const copy_slot& slot);
/// True when order `o` on `devices` renews the leases of the processes parked in `slot`.
bool warm_continues(const copy_slot& slot, const start_copy& o, const std::vector<int>& devices);

/// Runs the order in `slot` for `length` seconds (see the file comment). `on_started` is
/// called once the processes are started, with the job's step.
void run_program_round(copy_slot& slot, const program_context& ctx, double length,
                       const std::function<void(std::int64_t)>& on_started,
                       comm::aggregator* agg = nullptr);

}  // namespace tessera::actors
