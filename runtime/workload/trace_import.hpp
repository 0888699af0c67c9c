#pragma once
/// @file trace_import.hpp
/// Production-derived traces read into tessera's job model (docs/traces.md, "Imported traces"):
/// - helios: Helios' `cluster_log.csv` (SenseTime; columns by name: job_id, gpu_num, state,
///   submit_time, and duration or start_time and end_time);
/// - philly: Microsoft Philly's `cluster_job_log` (a JSON array of jobs: jobid, status,
///   submitted_time, attempts[{start_time, end_time, detail[{ip, gpus[...]}]}]);
/// - pai: Alibaba PAI 2020's `pai_job_table.csv` (job_name, inst_id, user, status, start_time,
///   end_time) with its `pai_task_table.csv` (job_name, task_name, inst_num, status,
///   start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type), header lines optional.
///   These tables record no submit time: a job's start time stands for it. Its GPUs are the
///   sum over its tasks of inst_num x plan_gpu / 100, rounded up; its run time converts to
///   steps on its tasks' GPU type when the table knows that type (lowercased), else on the
///   reference type.
/// The rule, the same for every format (it is Gavel's for its Philly-derived traces, and
/// Sia's): arrival = submit time minus the first imported job's; GPU count = what the job
/// asked for (Philly: the GPUs of its last attempt), as scale factor the smallest the
/// throughput table knows that is at least that; the job type drawn uniformly (seeded) among
/// the templates the table knows at that scale; total steps = the job's run time (the last
/// attempt's, for Philly) times that type's isolated throughput on the reference GPU type, at
/// least one. Kept: jobs that ran to an end (helios: COMPLETED; philly: Pass and Killed; pai:
/// Terminated).
/// Dropped, counted by reason: other states, no GPU, more GPUs than any table scale, no run
/// time. A malformed field is an error naming the file, line (philly: job index) and field.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace_gen.hpp"

namespace tessera {

class sia_data;  // runtime/workload/sia_workload.hpp

/// The formats `tessera trace import` reads.
enum class trace_format { helios, philly, pai, sia };

/// The format named `name` ("helios", "philly", "pai", "sia"); an error listing the known ones.
result<trace_format> parse_trace_format(const std::string& name);

/// How imported jobs are made.
struct import_options {
  std::uint64_t seed = 0;               ///< the job-type draw
  std::string reference_type = "v100";  ///< GPU type whose throughput turns time into steps
  /// pai only: the task table (the job table is the main stream) and its name in messages.
  std::istream* tasks = nullptr;
  std::string tasks_name;
  /// sia only: Sia's measurements, which give each job its steps (templates, table, seed and
  /// reference type are not used: runtime/workload/sia_workload.hpp).
  const sia_data* sia = nullptr;
};

/// What an import read, kept and dropped.
struct import_summary {
  std::size_t read = 0;                        ///< jobs in the file
  std::size_t kept = 0;                        ///< jobs imported
  std::map<std::string, std::size_t> dropped;  ///< why -> how many
};

/// Reads `in` (`name` in messages) as `format` into jobs sorted by arrival, ids 0..n-1, by the
/// rule of the file comment; `summary` says what was kept and dropped.
result<std::vector<job>> import_trace(trace_format format, std::istream& in,
                                      const std::string& name,
                                      const std::vector<job_template>& templates,
                                      const throughput_table& table, const import_options& opt,
                                      import_summary& summary);

/// The error of a bad input field: "<where>: field '<field>': <why>" (where = file:line).
error import_field_error(const std::string& where, const std::string& field,
                         const std::string& why);

/// "2017-10-03 01:12:56" (UTC) or a number of seconds, as seconds since 1970; an error
/// naming what it expected.
result<double> parse_trace_time(const std::string& text);

}  // namespace tessera
