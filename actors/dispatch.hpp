#pragma once
/// @file dispatch.hpp
/// From a round plan to what each node is told: a plain function, no actors, so the
/// scheduler actor only sends what it returns and the rules are unit-tested on their own.
///
/// Each job copy's placement becomes one part per node (actors/task_layout.hpp); a part's
/// shards are renumbered in rank order so the parts' gradients concatenate in shard order.
/// Rules:
/// - copies of a job must be numbered 0..n-1; forked copies (n > 1) need aggregators
///   (`can_sync`) and must each have their own nodes;
/// - without aggregators a copy spread over nodes runs every task on its first part's node,
///   and the other parts' GPUs are held for it;
/// - a forked job's copies together overshoot its total by fewer than n steps: each copy's
///   budget is at most ceil(remaining / n);
/// - the collectives of a job wait at most `report_grace / 2` (at least 1 s) plus its slowest
///   part's step time;
/// - a program job (kind "program") checkpoints into its own directory
///   (program_checkpoint_dir); a copy of several processes gets a lease of as many steps as
///   its slowest part makes in the round (at least 1), the same on every part, and the host of
///   its first part as MASTER_ADDR;
/// - the two jobs of a pair (assignment::partner, one GPU shared by both) name each other in
///   their orders on the same node, and each steps at its speed share: its co-located rate
///   over its solo rate on the pair's GPUs (`rates`).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/checkpoints.hpp"
#include "actors/protocol.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera::actors {

/// What dispatching needs to know of one job.
struct dispatch_job {
  const run_job* spec = nullptr;  ///< the job as submitted
  std::int64_t step = 0;          ///< step of its latest checkpoint
  std::uint32_t sync_epoch = 0;   ///< bumped after a failed collective: a fresh channel
  /// Its checkpoints: where copies resume from and fall back to, the writers' epoch; null
  /// when it has none (the job starts at `step` with nothing to load).
  const checkpoint_book* book = nullptr;
  /// Measured steps/s per GPU type (tracked_job::measured), null when none: a program copy
  /// of several processes gets its lease in steps from them (else from step_time / speed).
  const std::map<std::string, double>* measured = nullptr;
};

/// The round and launch a plan is dispatched in.
struct dispatch_context {
  const cluster* configured = nullptr;  ///< the cluster file's servers, indexed by rank
  std::vector<int> live_ranks;          ///< rank of each server of the plan's (live) cluster
  bool can_sync = false;                ///< the nodes have aggregators
  std::int64_t round = 0;               ///< round number
  double round_length = 0;              ///< seconds
  double report_grace = 0;              ///< seconds past the round a report may take
  std::string checkpoint_dir;           ///< shared directory of job checkpoints
  std::vector<std::string> hosts;       ///< host of each rank's node ("" = unknown)
  /// First MASTER_PORT a program copy's process group may get; ports are spread over
  /// [base, base + 4096) by job, copy and round.
  int master_port_base = 29500;
  /// The live rate model the plan was made with (snapshot::rates): a pair's speed shares
  /// come from its co-located and solo rates. Null: a plan with a pair is refused.
  const server_throughput* rates = nullptr;
};

/// Orders for every live rank (possibly with no copies), or an error naming the policy
/// (`policy_name`) when the plan breaks a rule above. `job_of(id)` returns nullptr for a
/// job the scheduler does not know; its assignments are skipped.
result<std::map<int, round_orders>> dispatch_plan(
    const round_plan& p, const dispatch_context& ctx,
    const std::function<const dispatch_job*(std::int64_t)>& job_of, const std::string& policy_name);

}  // namespace tessera::actors
