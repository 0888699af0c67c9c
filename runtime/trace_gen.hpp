#pragma once
/// @file trace_gen.hpp
/// Gavel's synthetic trace recipe: Poisson arrivals at `rate_per_hour`; job type uniform over
/// the 26 job templates; duration 60*10^U(1.5,3) s with probability 0.8, else 60*10^U(3,4) s;
/// total steps = duration x isolated V100 throughput at the job's scale factor. Multi-GPU traces
/// draw the scale factor from {1,2,4,8} with p = {0.70, 0.10, 0.15, 0.05}; a draw the job type
/// has no table entry for is redrawn.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model.hpp"
#include "runtime/result.hpp"
#include "runtime/throughput.hpp"

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
/// needs_data_dir); `#` starts a comment line.
result<std::vector<job_template>> read_job_templates(const std::string& path);

/// The bundled templates (data/job_templates.tsv, taken from Gavel's traces).
result<std::vector<job_template>> bundled_job_templates();

/// Parameters of the generator.
struct trace_gen_config {
  double rate_per_hour = 1.0;   ///< Poisson arrival rate; <= 0 puts every job at time 0
  int num_jobs = 100;           ///< jobs to generate (> 0)
  bool multi_gpu = false;       ///< draw scale factors 1/2/4/8
  std::uint64_t seed = 0;
  std::string reference_type = "v100";  ///< GPU type whose throughput converts time to steps
};

/// Hops' simulation setting (SoCC'24: 500 jobs, Poisson arrivals at 100 jobs/h) with Gavel's
/// multi-GPU recipe for job types, durations and scale factors (docs/hops.md).
trace_gen_config hops_trace_config(std::uint64_t seed = 0);

/// Generates a trace. Fails when a template's job type is missing from `table`.
result<std::vector<job>> generate_trace(const trace_gen_config& cfg,
                                        const std::vector<job_template>& templates,
                                        const throughput_table& table);

}  // namespace tessera
