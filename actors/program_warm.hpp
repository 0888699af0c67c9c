#pragma once
/// @file program_warm.hpp
/// The processes of one program copy on a node, and how they end: `task_proc` (a process and
/// its lease), ending their process groups, and `warm_program`, the processes parked on their
/// `renew` between rounds (copy_slot::warm, docs/lease-protocol.md "Warm leases"). Internal
/// to the program executor (actors/program_round.cpp) and the node's settle step.

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "actors/protocol.hpp"
#include "runtime/node/program/lease_server.hpp"
#include "runtime/node/program/lease_slot.hpp"
#include "runtime/node/program/process.hpp"

namespace tessera::actors {

using program_clock = program::lease_clock;

/// `s` seconds as the lease clock's duration.
inline program_clock::duration program_seconds(double s) {
  return std::chrono::duration_cast<program_clock::duration>(std::chrono::duration<double>(s));
}

/// One process of the copy on this node and its lease.
struct task_proc {
  std::string token;
  std::shared_ptr<program::lease_slot> lease;
  std::optional<program::child_process> proc;
  bool averaged = false;  ///< its average request was answered
};

/// Forwards the processes' output until every one has exited or `seconds` have passed.
void wait_for_exits(std::vector<task_proc>& tasks, double seconds, std::ostream& out,
                    std::ostream& err);
/// SIGTERM to every process group of `tasks`, then SIGKILL after at most `seconds`, reaped.
void end_groups(std::vector<task_proc>& tasks, double seconds, std::ostream& out,
                std::ostream& err);
/// Ends the processes of `tasks`: those waiting on `renew` are told `exit` (they save, if their
/// last lease was not saved, and exit) and given up to `wait` seconds; then every process
/// group still alive gets SIGTERM, then SIGKILL after at most 5 s. Their tokens are forgotten.
void let_go(std::vector<task_proc>& tasks, program::lease_server* leases, double wait,
            std::ostream& out, std::ostream& err);
/// True when every process of `tasks` is alive, connected and waiting on its `renew`.
bool all_parked(const std::vector<task_proc>& tasks);

/// The processes of a copy parked on their `renew` after a round (copy_slot::warm).
struct warm_program {
  std::vector<task_proc> tasks;
  program::lease_server* leases = nullptr;
  start_copy order;          ///< the order they ran under
  std::vector<int> devices;  ///< the devices they hold
  std::int64_t step = 0;     ///< the job's step they are at
  /// Leases since their last checkpoint (0: their state is on disk) and when that was.
  std::int32_t unsaved_leases = 0;
  program_clock::time_point saved_at;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  /// Told `exit`, a process with unsaved state checkpoints before it exits: it gets the
  /// program's grace for that, a saved one at most 5 s.
  ~warm_program();
  /// True when order `o` on `devs` keeps these processes where they are: the same copy of
  /// the same program, split the same way over the same nodes and devices, as many copies,
  /// from the step they are at; and each process is alive and waiting on its renew.
  bool continues(const start_copy& o, const std::vector<int>& devs) const;
};

}  // namespace tessera::actors
