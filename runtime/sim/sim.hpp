#pragma once
/// @file sim.hpp
/// The trace-driven simulator: a virtual clock, rounds of fixed length, arrivals from a trace,
/// a policy planning each round and the simulator's executor running the plan.
///
/// Round loop: at time t, jobs with arrival <= t join; if none is active the clock jumps to
/// the next arrival. The policy plans the round from a snapshot; the executor runs it; jobs
/// finish at their exact completion time; the next round starts at t + round length.
/// Deterministic: no randomness of its own, and policies are deterministic for a seed.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/policy.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/records.hpp"
#include "runtime/core/result.hpp"
#include "runtime/sim/sim_executor.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

class timeline_recorder;  // runtime/core/timeline.hpp

/// Progress of a running simulation, for a progress line on stderr.
struct sim_progress {
  double now = 0;  ///< virtual time (s)
  int rounds = 0;
  int completed = 0;  ///< jobs finished
  int total = 0;      ///< jobs in the trace
  int active = 0;     ///< jobs arrived and unfinished
};

/// Default of sim_config::max_rounds.
inline constexpr std::int64_t default_max_rounds = 10'000'000;

/// Settings of one simulation.
struct sim_config {
  double round_length = 360;  ///< seconds (Gavel's default)
  double restart_cost = 0;    ///< seconds lost per start on new GPUs (Gavel: 0)
  /// Seconds lost per start by job type, for the types named (others: restart_cost); a
  /// restart longer than a round goes on into the next ones while the job stays put
  /// (sim_executor::set_restart_costs).
  std::map<std::string, double> restart_costs;
  /// Averaging time charged per round to jobs running as two or more copies (HadarE).
  copy_aggregation aggregation;
  /// Statistical efficiency of a forked job's averaged copies (runtime/core/copy_efficiency.hpp):
  /// on by default (calibrated); `enabled = false` counts every copy's steps in full (the
  /// upper bound the simulator used before).
  copy_efficiency fork_efficiency;
  job_id window_begin = -1;       ///< first job id of the measurement window (-1: none)
  job_id window_end = -1;         ///< last job id of the window, inclusive
  bool stop_after_window = true;  ///< end once every window job has finished
  double max_time = std::numeric_limits<double>::infinity();  ///< stop at this virtual time
  /// Stop after this many rounds, as at max_time (the result is then incomplete). Each round
  /// keeps a record, and inputs each within its bounds can still add up to a job that never
  /// ends (1e11 steps at 1e-6 steps/s on a server of speed 1e-3), whose records grew without
  /// bound. 1e7 rounds (~400 MB of records) is some 500 times the rounds of Gavel's largest
  /// experiment at its 360 s rounds.
  std::int64_t max_rounds = default_max_rounds;
  /// Charge a multi-GPU job its consolidated (one-server) throughput wherever it is placed,
  /// never Gavel's "_unconsolidated" entry: the assumption of Gavel's simulator, whose driver
  /// places as if one server held every gang. Off (the default) is the physical choice: a
  /// job spanning servers pays for it, and the policies see what it will be charged.
  bool assume_consolidated = false;
  std::function<void(const sim_progress&)> on_progress;  ///< called every round if set
  timeline_recorder* timeline = nullptr;                 ///< records every round's plan when set
};

/// Runs `jobs` on `cl` under `pol`. Jobs must have distinct ids. Fails when the policy fails
/// or a job can run on no GPU type of the cluster.
result<schedule_result> simulate(const cluster& cl, const throughput_table& table,
                                 const std::vector<job>& jobs, policy& pol, const sim_config& cfg);

/// Per-type throughputs of a job as policies see them: the table value times the type's mean
/// speed factor; 0 where the table has no entry. The consolidated entry is used when some
/// server of the type can hold the whole job, else the unconsolidated one (the job must span
/// servers there, e.g. an 8-GPU job on 4-GPU servers).
std::vector<double> type_throughputs(const cluster& cl, const throughput_table& table,
                                     const job& j);

}  // namespace tessera
