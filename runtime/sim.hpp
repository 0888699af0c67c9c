#pragma once
/// @file sim.hpp
/// The trace-driven simulator: a virtual clock, rounds of fixed length, arrivals from a trace,
/// a policy planning each round and the simulator's executor running the plan.
///
/// Round loop: at time t, jobs with arrival <= t join; if none is active the clock jumps to
/// the next arrival. The policy plans the round from a snapshot; the executor runs it; jobs
/// finish at their exact completion time; the next round starts at t + round length.
/// Deterministic: no randomness of its own, and policies are deterministic for a seed.

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "runtime/policy.hpp"
#include "runtime/model.hpp"
#include "runtime/result.hpp"
#include "runtime/sim_executor.hpp"
#include "runtime/throughput.hpp"

namespace tessera {

/// Progress of a running simulation, for a progress line on stderr.
struct sim_progress {
  double now = 0;          ///< virtual time (s)
  int rounds = 0;
  int completed = 0;       ///< jobs finished
  int total = 0;           ///< jobs in the trace
  int active = 0;          ///< jobs arrived and unfinished
};

/// Settings of one simulation.
struct sim_config {
  double round_length = 360;     ///< seconds (Gavel's default)
  double restart_cost = 0;       ///< seconds lost per start on new GPUs (Gavel: 0)
  /// Averaging time charged per round to jobs running as two or more copies (HadarE).
  copy_aggregation aggregation;
  job_id window_begin = -1;      ///< first job id of the measurement window (-1: none)
  job_id window_end = -1;        ///< last job id of the window, inclusive
  bool stop_after_window = true; ///< end once every window job has finished
  double max_time = std::numeric_limits<double>::infinity();  ///< stop at this virtual time
  std::function<void(const sim_progress&)> on_progress;       ///< called every round if set
};

/// What happened to one job.
struct job_record {
  job_id id = 0;
  std::string job_type;
  int scale_factor = 1;
  double total_steps = 0;
  double arrival = 0;
  double first_start = -1;       ///< -1 if it never ran
  double finish = -1;            ///< -1 if it did not finish
  double steps_done = 0;
  double run_time = 0;           ///< seconds holding GPUs
  double gpu_seconds = 0;        ///< GPUs x seconds held
  int restarts = 0;              ///< starts on new GPUs after having made progress
  double iso_share_time = 0;     ///< time on an isolated 1/M share (M = mean active jobs)
};

/// One round as it was planned.
struct round_record {
  double start = 0;
  int busy_gpus = 0;             ///< GPUs assigned in the plan
  int idle_gpus = 0;             ///< GPUs left unassigned
  int active_jobs = 0;
  int waiting_jobs = 0;          ///< active jobs the plan left out
};

/// Result of a simulation.
struct sim_result {
  std::string policy;
  int total_gpus = 0;
  double end_time = 0;
  bool complete = false;         ///< every job (or every window job) finished
  std::vector<job_record> jobs;  ///< in trace order
  std::vector<round_record> rounds;
};

/// Runs `jobs` on `cl` under `pol`. Jobs must have distinct ids. Fails when the policy fails
/// or a job can run on no GPU type of the cluster.
result<sim_result> simulate(const cluster& cl, const throughput_table& table,
                            const std::vector<job>& jobs, policy& pol, const sim_config& cfg);

/// Per-type throughputs of a job as policies see them: the table value times the type's mean
/// speed factor; 0 where the table has no entry. The consolidated entry is used when some
/// server of the type can hold the whole job, else the unconsolidated one (the job must span
/// servers there, e.g. an 8-GPU job on 4-GPU servers).
std::vector<double> type_throughputs(const cluster& cl, const throughput_table& table,
                                     const job& j);

}  // namespace tessera
