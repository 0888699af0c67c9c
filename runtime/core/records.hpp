#pragma once
/// @file records.hpp
/// What a schedule achieved, job by job and round by round: the simulator fills these from its
/// throughput model, the actor runtime from its nodes' reports, and runtime/core/metrics.hpp
/// computes the same figures of merit from either.

#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"

namespace tessera {

/// What happened to one job.
struct job_record {
  job_id id = 0;
  std::string job_type;
  int scale_factor = 1;
  double total_steps = 0;
  double arrival = 0;
  double first_start = -1;  ///< -1 if it never ran
  double finish = -1;       ///< -1 if it did not finish
  double steps_done = 0;
  double run_time = 0;        ///< seconds holding GPUs
  double gpu_seconds = 0;     ///< GPUs x seconds held
  int restarts = 0;           ///< starts on new GPUs after having made progress
  double iso_share_time = 0;  ///< time on an isolated 1/M share (M = mean active jobs);
                              ///< 0 when unknown
  double expected_time = 0;   ///< total steps at the job's best throughput (its fastest
                              ///< GPU type): Hops' expected run time; 0 when unknown
};

/// One round as it was planned.
struct round_record {
  double start = 0;
  int busy_gpus = 0;  ///< GPUs assigned in the plan
  int idle_gpus = 0;  ///< GPUs left unassigned
  int active_jobs = 0;
  int waiting_jobs = 0;  ///< active jobs the plan left out
};

/// The outcome of a simulation or of a run on real nodes.
struct schedule_result {
  std::string policy;
  int total_gpus = 0;
  double end_time = 0;
  bool complete = false;         ///< every job (or every window job) finished
  std::vector<job_record> jobs;  ///< in submission (trace) order
  std::vector<round_record> rounds;
};

/// The record of a round plan: GPUs it used and left idle, and the active jobs it left out.
round_record record_round(const round_plan& p, int total_gpus, int active_jobs);

}  // namespace tessera
