#pragma once
/// @file sim_run.hpp
/// One policy's simulation as the commands run it (simulate, compare, sweep): the inputs
/// loaded once, the policy made from the registry, progress reported to a meter, the plans
/// optionally recorded as a timeline.

#include <map>
#include <string>
#include <vector>

#include "launcher/progress.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/records.hpp"
#include "runtime/core/result.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {
class timeline_recorder;
}

namespace tessera::cli {

/// Inputs shared by every policy run of a command.
struct sim_inputs {
  cluster cl;
  throughput_table table;
  std::vector<job> jobs;
  sim_config cfg;
  std::map<std::string, double> policy_args;
};

/// Jobs a simulation must finish before it ends: those up to the window's last id when it
/// stops after the window, else all. The progress meter's 100%.
int jobs_to_finish(const std::vector<job>& jobs, const sim_config& cfg);

/// Simulates policy `policy` on `in`, reporting into `meter` as unit `unit` (done when it
/// returns) and recording the plans in `timeline` when not null.
result<schedule_result> simulate_policy(const sim_inputs& in, const std::string& policy,
                                        progress_meter& meter, const std::string& unit,
                                        timeline_recorder* timeline = nullptr);

/// Writes `text` to `path`; io errors name the path.
status write_text_file(const std::string& path, const std::string& text);

}  // namespace tessera::cli
