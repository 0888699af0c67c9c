#pragma once
/// @file trace_gen.hpp
/// Gavel's synthetic trace recipe: Poisson arrivals at `rate_per_hour`; job type uniform over
/// the 26 job templates; duration 60*10^U(1.5,3) s with probability 0.8, else 60*10^U(3,4) s;
/// total steps = duration x isolated V100 throughput at the job's scale factor. Multi-GPU traces
/// draw the scale factor from {1,2,4,8} with p = {0.70, 0.10, 0.15, 0.05}; a draw the job type
/// has no table entry for is redrawn.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// One of Gavel's job templates: a job type and the command fields a trace line carries.
struct job_template {
  std::string job_type;
  std::string command;
  std::string working_dir;
  std::string num_steps_arg;
  bool needs_data_dir = true;
};

/// Reads job templates (tab-separated: job_type, command, working_dir, num_steps_arg,
/// needs_data_dir); `#` starts a comment line. At most 1 MiB, in lines of at most 64 KiB.
result<std::vector<job_template>> read_job_templates(const std::string& path);

/// The bundled templates (data/job_templates.tsv, taken from Gavel's traces).
result<std::vector<job_template>> bundled_job_templates();

/// Parameters of the generator.
struct trace_gen_config {
  double rate_per_hour = 1.0;  ///< Poisson arrival rate (jobs/hour); 0 puts every job at time 0
  int num_jobs = 100;          ///< jobs to generate (> 0)
  bool multi_gpu = false;      ///< draw scale factors 1/2/4/8
  std::uint64_t seed = 0;
  std::string reference_type = "v100";  ///< GPU type whose throughput converts time to steps
};

/// Hops' simulation setting (SoCC'24: 500 jobs, Poisson arrivals at 100 jobs/h) with Gavel's
/// multi-GPU recipe for job types, durations and scale factors (docs/hops.md).
trace_gen_config hops_trace_config(std::uint64_t seed = 0);

/// Checks a generator configuration: num_jobs in [1, 1e7] and rate_per_hour in [0, 1e6]
/// (runtime/core/input_limits.hpp); NaN is refused.
status check_trace_gen_config(const trace_gen_config& cfg);

/// Receives the generated jobs one by one, in order; an error stops the generator.
using job_sink = std::function<status(const job&)>;

/// Generates a trace job by job into `sink`, holding one job at a time: memory does not grow
/// with num_jobs. Fails before the first job when the configuration is out of bounds or a
/// template's job type is missing from `table`; fails at the first job arriving after
/// limits::max_seconds (a low rate with many jobs), or with the sink's error.
status generate_trace(const trace_gen_config& cfg, const std::vector<job_template>& templates,
                      const throughput_table& table, const job_sink& sink);

/// Generates a trace into a vector (the same jobs as the streaming overload).
result<std::vector<job>> generate_trace(const trace_gen_config& cfg,
                                        const std::vector<job_template>& templates,
                                        const throughput_table& table);

}  // namespace tessera
