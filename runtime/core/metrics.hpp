#pragma once
/// @file metrics.hpp
/// Figures of merit of a schedule (simulated or run), and their table, JSON and per-job CSV forms.
///
/// Definitions (times in seconds):
/// - JCT = finish - arrival; averaged over finished jobs, and over a job-id window.
/// - makespan = last finish - first arrival.
/// - waiting time = JCT - run time (time in the system not holding GPUs).
/// - utilisation = GPU-seconds held / (GPUs x makespan).
/// - finish-time fairness rho = JCT / time on an isolated 1/M share (M = the mean number of
///   active jobs over the job's life); average and max.
/// - latency ratio = waiting time / run time; average and max.
/// - expected latency ratio = waiting time / expected run time (total steps at the job's best
///   throughput), Hops' definition; average and max over jobs whose expected time is known.
///   Unlike the latency ratio it does not grow when a policy runs a job faster.
/// - fragmentation = GPUs left idle by a round's plan while some active job was not placed,
///   averaged over all rounds (0 for a round in which every active job runs).

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/core/records.hpp"

namespace tessera {

/// Summary figures of one simulation.
struct metrics {
  std::string policy;
  int jobs = 0;  ///< jobs in the trace
  int finished = 0;
  double avg_jct = 0;         ///< seconds, over finished jobs
  int window_jobs = 0;        ///< finished jobs in the window (0 without a window)
  double avg_jct_window = 0;  ///< seconds
  double makespan = 0;
  double avg_wait = 0;
  double utilisation = 0;  ///< in [0, 1]
  double ftf_avg = 0, ftf_max = 0;
  double lr_avg = 0, lr_max = 0;
  double lre_avg = 0, lre_max = 0;  ///< expected latency ratio (0 when no job has one)
  double fragmentation = 0;         ///< GPUs per round
  int rounds = 0;
};

/// Computes the metrics; the window is ignored when begin < 0.
metrics compute_metrics(const schedule_result& r, job_id window_begin = -1, job_id window_end = -1);

/// The unit a metrics table shows times in.
enum class time_unit { hours, seconds };

/// Prints metrics of one or more runs as an aligned table (times in `unit`).
void print_metrics_table(std::ostream& out, const std::vector<metrics>& runs,
                         time_unit unit = time_unit::hours);

/// Writes metrics of one or more runs as a JSON array.
void write_metrics_json(std::ostream& out, const std::vector<metrics>& runs);

/// Writes one CSV row per job of a run.
void write_jobs_csv(std::ostream& out, const schedule_result& r);

}  // namespace tessera
