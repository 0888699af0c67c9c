#pragma once
/// @file snapshot_builder.hpp
/// The parts of a round loop every executor shares: building the `snapshot` a policy plans
/// from, and checking the plan it returns. The simulator (runtime/sim.cpp) and the actor
/// runtime's scheduler (actors/scheduler_actor.cpp) both use these, so a policy sees the same
/// view and is held to the same rules whichever of them executes its plans.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model.hpp"
#include "runtime/plan.hpp"
#include "runtime/result.hpp"

namespace tessera {

/// What a round loop tracks for one active job, i.e. what a `job_view` is made from.
struct job_accounting {
  const job* spec = nullptr;        ///< the job as submitted
  double steps_done = 0;            ///< progress so far
  double run_time = 0;              ///< wall seconds the job held GPUs
  double attained_service = 0;      ///< GPU-seconds received
  std::vector<double> throughput;   ///< per GPU type, as policies see it (0 = cannot run)
  int last_type = -1;               ///< GPU type of the previous round, -1 if none
};

/// The policy's view of one job.
job_view make_job_view(const job_accounting& a);

/// Builds a snapshot: `jobs` must be the active jobs in arrival order (ties by id); `cl` and
/// `last` must outlive the snapshot.
snapshot build_snapshot(double now, double round_length, const cluster& cl,
                        const std::vector<job_accounting>& jobs, const round_plan* last,
                        std::uint64_t job_set_version);

/// Checks a plan against the cluster: every share names an existing server and a positive GPU
/// count, no server holds more GPUs than it has, no job copy is placed twice. A job copy may
/// have several assignments only as a task split (runtime/task_split.hpp): each of them with
/// tasks > 0. No assignment may have negative tasks, nor fewer tasks than GPUs (a GPU with no
/// task). Errors (internal) name the policy and what it broke.
status validate_plan(const cluster& cl, const round_plan& p, const std::string& policy_name);

/// As above against `s.cl`, and against the snapshot's jobs: every assignment names an active
/// job, and the tasks of each task split (and each assignment with tasks > 0) sum to the
/// job's scale factor.
status validate_plan(const snapshot& s, const round_plan& p, const std::string& policy_name);

/// An error (invalid_input) when `throughput` is 0 on every GPU type, naming the job.
status check_runnable(const job& j, const std::vector<double>& throughput);

}  // namespace tessera
