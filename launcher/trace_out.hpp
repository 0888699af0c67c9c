#pragma once
/// @file trace_out.hpp
/// Writing generated traces (`tessera trace generate`, and `tessera sweep` for its cells).

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace_gen.hpp"

namespace tessera::cli {

/// Generates the trace straight into `os`, one line per job: memory stays flat however many
/// jobs are asked for. `name` names the output in errors.
status write_generated_trace(const trace_gen_config& cfg,
                             const std::vector<job_template>& templates,
                             const throughput_table& table, std::ostream& os,
                             const std::string& name);

/// Generates the trace into `path` atomically: written to `path`.part, then renamed, so a
/// file at `path` is always whole (an interrupted sweep never reads half a trace).
status write_trace_file(const trace_gen_config& cfg, const std::vector<job_template>& templates,
                        const throughput_table& table, const std::string& path);

}  // namespace tessera::cli
