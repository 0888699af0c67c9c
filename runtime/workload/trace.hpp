#pragma once
/// @file trace.hpp
/// Gavel's trace format: one job per line, 10 tab-separated fields
///   job_type, command, working_dir, num_steps_arg, needs_data_dir, total_steps,
///   scale_factor, priority_weight, SLO (-1 = none), arrival_time_s
/// Job ids are 0-based line indices (blank lines and lines starting with '#' are skipped but
/// still counted for line numbers in messages).
///
/// Bounds (runtime/core/input_limits.hpp): total_steps in (0, 1e11]; scale_factor in [1, 2^20];
/// priority_weight in [1e-3, 1e3]; SLO -1 or in (0, 1e9] s; arrival in [0, 1e9] s; NaN and
/// infinities are refused. A trace holds at most 1e7 jobs, 2 GiB, and lines of at most 64 KiB;
/// a larger regular file is refused before it is read, and a pipe or device stops at the first
/// bound it passes.

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// Parses a trace from a stream; `name` is used in error messages ("<name>:<line>: field
/// '<field>': ..."). When `table` is given, every (job_type, scale_factor) must be in it.
result<std::vector<job>> parse_trace(std::istream& in, const std::string& name,
                                     const throughput_table* table = nullptr);

/// Reads a trace file (see parse_trace).
result<std::vector<job>> read_trace(const std::string& path,
                                    const throughput_table* table = nullptr);

/// Writes jobs in the same format (arrival with 6 decimals, as Gavel does), so the trace can
/// be replayed by Gavel's own simulator. needs_data_dir is 0/1; total_steps and
/// priority_weight are integers when whole; SLO and arrival have 6 decimals ("-1.000000"). A
/// value that 6 decimals cannot hold exactly is written in its shortest exact form, so
/// reading a written trace gives back the same jobs (ids renumbered 0..n-1). Tabs and line
/// breaks inside text fields are replaced by spaces (write_trace_file refuses them instead).
/// Gavel's bundled traces write the arrival as an integer; Gavel's reader takes either.
void write_trace(std::ostream& out, const std::vector<job>& jobs);

/// Writes one job as one line of the format above (what write_trace writes per job).
void write_trace_job(std::ostream& out, const job& j);

/// Checks that `j` would read back as written: no tabs or line breaks in text fields, a
/// non-empty job type not starting with '#', numbers within the reader's bounds
/// (runtime/core/input_limits.hpp). `where` starts the message ("out.trace: job 7").
status check_trace_job(const job& j, const std::string& where);

/// Writes a trace file; errors name the path. Refuses (writing nothing) jobs that would not
/// read back as written: tabs or line breaks in text fields, empty job type, values out of range.
status write_trace_file(const std::string& path, const std::vector<job>& jobs);

}  // namespace tessera
