#pragma once
/// @file round_loop.hpp
/// The round loop's decisions, written once for every executor. The simulator
/// (runtime/sim/sim.cpp) and the actor runtime's scheduler (actors/scheduler_actor.cpp) both
///   1. admit the jobs whose arrival time has come (`arrival_queue`),
///   2. describe each active job as a `job_view`, and
///   3. call `plan_round`, which orders the jobs as policies expect, builds the snapshot, asks
///      the policy and holds its plan to the same rules (`validate_plan`),
/// so a policy sees the same view and obeys the same rules whichever executor runs its plans.
/// What differs is only how a plan is executed and how progress comes back.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/result.hpp"

namespace tessera {

class timeline_recorder;  // runtime/core/timeline.hpp

/// Jobs submitted but not yet admitted, in arrival order (ties by id).
class arrival_queue {
 public:
  /// Adds a job; `j` must outlive the queue's use of it.
  void push(const job* j);
  /// Removes and returns, in order, every job that has arrived by `now`.
  std::vector<const job*> admit(double now);
  bool empty() const { return waiting_.empty(); }
  /// Arrival time of the next job, +infinity when none waits.
  double next_arrival() const;

 private:
  std::deque<const job*> waiting_;
};

/// What the executor supplies, besides the jobs, to plan one round.
struct round_context {
  double now = 0;                                    ///< round start (s)
  double round_length = 0;                           ///< seconds
  const cluster* cl = nullptr;                       ///< the cluster the plan is for
  const round_plan* last_plan = nullptr;             ///< previous plan on this cluster, or nullptr
  std::uint64_t job_set_version = 0;                 ///< see snapshot::job_set_version
  const server_throughput* rates = nullptr;          ///< see snapshot::rates
  int copy_limit = 0;                                ///< see snapshot::copy_limit
  const copy_efficiency* fork_efficiency = nullptr;  ///< see snapshot::fork_efficiency
  /// Where each validated plan is recorded (who ran where), or nullptr: both executors
  /// record through here, so their timelines are written alike.
  timeline_recorder* timeline = nullptr;
};

/// A planned round: the snapshot the policy saw (pointing into the context's cluster, last
/// plan and rates, which must outlive it) and its validated plan.
struct planned_round {
  snapshot snap;
  round_plan plan;
};

/// Plans one round. `jobs` are the active jobs' views in any order (their remaining_steps is
/// recomputed here); they are put in arrival order (ties by id), the policy plans the
/// snapshot, the plan is stamped with the round's start and length and checked by
/// validate_plan, then recorded in ctx.timeline when set. Errors are the policy's own or
/// validate_plan's.
result<planned_round> plan_round(policy& pol, const round_context& ctx, std::vector<job_view> jobs);

/// Checks a plan against the cluster: every share names an existing server and a positive GPU
/// count, no server holds more GPUs than it has, no job copy is placed twice. A job copy may
/// have several assignments only as a task split (runtime/core/task_split.hpp): each of them with
/// tasks > 0. No assignment may have negative tasks, nor fewer tasks than GPUs (a GPU with no
/// task). Space sharing (assignment::partner): a pair is two gang placements of copy 0 naming
/// each other on the same type and shares, and its GPUs count once, so no GPU holds more than
/// two jobs. Errors (internal) name the policy and what it broke.
status validate_plan(const cluster& cl, const round_plan& p, const std::string& policy_name);

/// As above against `s.cl`, and against the snapshot's jobs: every assignment names an active
/// job, and the tasks of each task split (and each assignment with tasks > 0) sum to the
/// job's scale factor; the two jobs of a pair have one scale factor and the snapshot's rates
/// a co-location throughput for them on the pair's GPU type (none without rates).
status validate_plan(const snapshot& s, const round_plan& p, const std::string& policy_name);

/// An error (invalid_input) when `throughput` is 0 on every GPU type, naming the job.
status check_runnable(const job& j, const std::vector<double>& throughput);

}  // namespace tessera
