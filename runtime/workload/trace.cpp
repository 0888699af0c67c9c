#include "runtime/workload/trace.hpp"

#include <array>
#include <climits>
#include <fstream>
#include <istream>
#include <ostream>

#include "runtime/core/detail/input_file.hpp"
#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

namespace {

/// Field names in line order, as error messages name them.
constexpr std::array<const char*, 10> field_names = {
    "job_type",    "command",      "working_dir",     "num_steps_arg", "needs_data_dir",
    "total_steps", "scale_factor", "priority_weight", "slo",           "arrival_time"};

enum field_index : std::size_t {
  f_job_type,
  f_command,
  f_working_dir,
  f_num_steps_arg,
  f_needs_data_dir,
  f_total_steps,
  f_scale_factor,
  f_priority_weight,
  f_slo,
  f_arrival,
};

/// True for lines the reader skips: blank, or a '#' comment.
bool skipped(std::string_view line) {
  const auto t = detail::trim(line);
  return t.empty() || t.front() == '#';
}

/// The numeric fields, in line order.
constexpr std::array<field_index, 5> numeric_fields = {f_total_steps, f_scale_factor,
                                                       f_priority_weight, f_slo, f_arrival};

/// What a numeric field must hold, as messages state it (runtime/core/input_limits.hpp).
std::string expectation(field_index f) {
  using detail::format_shortest;
  switch (f) {
    case f_total_steps:
      return "a positive number of steps, at most " + format_shortest(limits::max_total_steps);
    case f_scale_factor:
      return "a positive integer, at most " + std::to_string(limits::max_gpus);
    case f_priority_weight:
      return "a number in [" + format_shortest(limits::min_priority_weight) + ", " +
             format_shortest(limits::max_priority_weight) + "]";
    case f_slo:
      return "-1 (none) or a positive number of seconds, at most " +
             format_shortest(limits::max_seconds);
    default:
      return "a non-negative number of seconds, at most " + format_shortest(limits::max_seconds);
  }
}

/// True when numeric field `f` of `j` is within its bounds (false for NaN).
bool in_range(field_index f, const job& j) {
  switch (f) {
    case f_total_steps:
      return j.total_steps > 0 && j.total_steps <= limits::max_total_steps;
    case f_scale_factor:
      return j.scale_factor > 0 && j.scale_factor <= limits::max_gpus;
    case f_priority_weight:
      return j.priority_weight >= limits::min_priority_weight &&
             j.priority_weight <= limits::max_priority_weight;
    case f_slo:
      return j.slo == -1 || (j.slo > 0 && j.slo <= limits::max_seconds);
    default:
      return j.arrival >= 0 && j.arrival <= limits::max_seconds;
  }
}

/// Reads numeric field `f` from its text into `j`; false when it is not a number.
bool read_number(field_index f, std::string_view text, job& j) {
  if (f == f_scale_factor) {
    const auto v = detail::parse_int(text);
    if (!v || *v < 0 || *v > INT_MAX) return false;
    j.scale_factor = static_cast<int>(*v);
    return true;
  }
  const auto v = detail::parse_double(text);
  if (!v) return false;
  double& dst = f == f_total_steps       ? j.total_steps
                : f == f_priority_weight ? j.priority_weight
                : f == f_slo             ? j.slo
                                         : j.arrival;
  dst = *v;
  return true;
}

/// Parses one trace line into `j`, or returns the one error it has.
std::optional<error> parse_line(std::string_view line, const std::string& name, int line_no,
                                const throughput_table* table, job& j) {
  const auto fields = detail::split(line, '\t');
  if (fields.size() != field_names.size()) {
    const std::string count = "(found " + std::to_string(fields.size()) +
                              " tab-separated fields, expected " +
                              std::to_string(field_names.size()) + ")";
    if (fields.size() < field_names.size())
      return input_error(name, line_no, field_names[fields.size()], "missing " + count);
    return input_error(name, line_no, field_names.back(), "unexpected text after it " + count);
  }
  auto bad = [&](field_index f, const std::string& what) {
    return input_error(name, line_no, field_names[f], what);
  };

  j.job_type = std::string(fields[f_job_type]);
  if (detail::trim(j.job_type).empty()) return bad(f_job_type, "empty job type");
  j.command = std::string(fields[f_command]);
  j.working_dir = std::string(fields[f_working_dir]);
  j.num_steps_arg = std::string(fields[f_num_steps_arg]);

  const auto data_dir = detail::trim(fields[f_needs_data_dir]);
  if (data_dir != "0" && data_dir != "1")
    return bad(f_needs_data_dir,
               "expected 0 or 1, got " + detail::quoted(fields[f_needs_data_dir]));
  j.needs_data_dir = data_dir == "1";

  for (const field_index f : numeric_fields)
    if (!read_number(f, fields[f], j) || !in_range(f, j))
      return bad(f, "expected " + expectation(f) + ", got " + detail::quoted(fields[f]));

  if (table && !table->knows(job_key{j.job_type, j.scale_factor}))
    return bad(f_job_type, "unknown job type " + detail::quoted(j.job_type) + " at scale " +
                               std::to_string(j.scale_factor));
  return std::nullopt;
}

/// `s` with tabs and line breaks replaced by spaces, so a field cannot break the line format.
std::string clean_field(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return out;
}

}  // namespace

result<std::vector<job>> parse_trace(std::istream& in, const std::string& name,
                                     const throughput_table* table) {
  std::vector<job> jobs;
  detail::line_reader lines(in, name, limits::trace_file);
  std::string_view line;
  while (lines.next(line)) {
    if (skipped(line)) continue;
    if (static_cast<long long>(jobs.size()) >= limits::max_trace_jobs)
      return input_error(
          name, lines.line_no(), "",
          "more than " + std::to_string(limits::max_trace_jobs) + " jobs (the limit for a trace)");
    job j;
    j.id = static_cast<job_id>(jobs.size());
    if (auto e = parse_line(line, name, lines.line_no(), table, j)) return *e;
    jobs.push_back(std::move(j));
  }
  if (lines.err()) return *lines.err();
  return jobs;
}

result<std::vector<job>> read_trace(const std::string& path, const throughput_table* table) {
  auto in = detail::open_input(path, limits::trace_file);
  if (!in) return in.err();
  return parse_trace(*in, path, table);
}

void write_trace_job(std::ostream& out, const job& j) {
  out << clean_field(j.job_type) << '\t' << clean_field(j.command) << '\t'
      << clean_field(j.working_dir) << '\t' << clean_field(j.num_steps_arg) << '\t'
      << (j.needs_data_dir ? 1 : 0) << '\t' << detail::format_count(j.total_steps) << '\t'
      << j.scale_factor << '\t' << detail::format_count(j.priority_weight) << '\t'
      << detail::format_fixed6(j.slo) << '\t' << detail::format_fixed6(j.arrival) << '\n';
}

void write_trace(std::ostream& out, const std::vector<job>& jobs) {
  for (const auto& j : jobs) write_trace_job(out, j);
}

status check_trace_job(const job& j, const std::string& where) {
  const std::pair<const char*, const std::string*> texts[] = {{"job_type", &j.job_type},
                                                              {"command", &j.command},
                                                              {"working_dir", &j.working_dir},
                                                              {"num_steps_arg", &j.num_steps_arg}};
  for (const auto& [field, text] : texts)
    if (text->find_first_of("\t\r\n") != std::string::npos)
      return error{error_kind::invalid_input,
                   where + ": field '" + field + "': contains a tab or line break"};
  const auto type = detail::trim(j.job_type);
  if (type.empty() || type.front() == '#')
    return error{error_kind::invalid_input, where + ": field 'job_type': empty or starts with '#'"};
  for (const field_index f : numeric_fields)
    if (!in_range(f, j))
      return error{error_kind::invalid_input, where + ": field '" + field_names[f] +
                                                  "': value out of range (expected " +
                                                  expectation(f) + ")"};
  return {};
}

status write_trace_file(const std::string& path, const std::vector<job>& jobs) {
  // Refuse what would not read back as written.
  for (std::size_t i = 0; i < jobs.size(); ++i)
    if (auto st = check_trace_job(jobs[i], path + ": job " + std::to_string(i)); !st) return st;
  std::ofstream out(path, std::ios::trunc);
  if (!out) return error{error_kind::io, path + ": cannot open for writing"};
  write_trace(out, jobs);
  out.flush();
  if (!out) return error{error_kind::io, path + ": write failed"};
  return {};
}

}  // namespace tessera
