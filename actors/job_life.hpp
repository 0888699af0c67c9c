#pragma once
/// @file job_life.hpp
/// A job's life as a state machine, a plain function so it is tested without actors:
///
///   queued --placed--> running --left_out--> preempted --placed--> running ...
///   running --completed--> finished      running --failed--> failed
///   queued | running | preempted --cancelled--> cancelled
///
/// `placed` and `left_out` come once per round from the round's plan (every active job is
/// either in it or not); `completed` and `failed` from the nodes' reports of the round the
/// job ran in; `cancelled` at the round boundary after a client asked (a cancel waits for the
/// round in flight, so the job's checkpoint of that round is kept). finished, failed and
/// cancelled are final. Anything else is refused: a late report of a preempted job, a
/// second finish, a cancel of an ended job.

#include <optional>
#include <string>

#include "runtime/core/result.hpp"

namespace tessera {

/// Where a job is in its life.
enum class job_state { queued, running, preempted, finished, failed, cancelled };

/// What happens to a job.
enum class job_event {
  placed,     ///< the round's plan gives it GPUs
  left_out,   ///< the round's plan leaves it out
  completed,  ///< it reached its total steps (or its target loss)
  failed,     ///< its program failed past max_restarts, or it cannot run at all
  cancelled,  ///< a client's cancel took effect at a round boundary
};

/// The state after `e` in state `s`, or an error naming both when the transition is illegal.
result<job_state> next_state(job_state s, job_event e);

/// True for finished, failed and cancelled.
bool is_final(job_state s);

/// "queued", "running", ... (as the control API shows them, docs/api.md).
const char* state_name(job_state s);

/// "placed", "left out", ...
const char* event_name(job_event e);

/// The state named `name`, if any.
std::optional<job_state> parse_state(const std::string& name);

}  // namespace tessera
