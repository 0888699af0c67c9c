#include "runtime/trace.hpp"

#include <array>
#include <climits>
#include <cmath>
#include <fstream>
#include <istream>
#include <ostream>

#include "runtime/detail/text.hpp"

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

  const auto steps = detail::parse_double(fields[f_total_steps]);
  if (!steps || *steps <= 0)
    return bad(f_total_steps,
               "expected a positive number of steps, got " + detail::quoted(fields[f_total_steps]));
  j.total_steps = *steps;

  const auto scale = detail::parse_int(fields[f_scale_factor]);
  if (!scale || *scale <= 0 || *scale > INT_MAX)
    return bad(f_scale_factor,
               "expected a positive integer, got " + detail::quoted(fields[f_scale_factor]));
  j.scale_factor = static_cast<int>(*scale);

  const auto weight = detail::parse_double(fields[f_priority_weight]);
  if (!weight || *weight <= 0)
    return bad(f_priority_weight,
               "expected a positive number, got " + detail::quoted(fields[f_priority_weight]));
  j.priority_weight = *weight;

  const auto slo = detail::parse_double(fields[f_slo]);
  if (!slo || (*slo != -1 && *slo <= 0))
    return bad(f_slo, "expected -1 (none) or a positive number of seconds, got " +
                          detail::quoted(fields[f_slo]));
  j.slo = *slo;

  const auto arrival = detail::parse_double(fields[f_arrival]);
  if (!arrival || *arrival < 0)
    return bad(f_arrival, "expected a non-negative number of seconds, got " +
                              detail::quoted(fields[f_arrival]));
  j.arrival = *arrival;

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
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
    if (skipped(line)) continue;
    job j;
    j.id = static_cast<job_id>(jobs.size());
    if (auto e = parse_line(line, name, line_no, table, j)) return *e;
    jobs.push_back(std::move(j));
  }
  if (in.bad()) return error{error_kind::io, name + ": read error"};
  return jobs;
}

result<std::vector<job>> read_trace(const std::string& path, const throughput_table* table) {
  std::ifstream in(path);
  if (!in) return error{error_kind::io, path + ": cannot open trace file"};
  return parse_trace(in, path, table);
}

void write_trace(std::ostream& out, const std::vector<job>& jobs) {
  for (const auto& j : jobs) {
    out << clean_field(j.job_type) << '\t' << clean_field(j.command) << '\t'
        << clean_field(j.working_dir) << '\t' << clean_field(j.num_steps_arg) << '\t'
        << (j.needs_data_dir ? 1 : 0) << '\t' << detail::format_count(j.total_steps) << '\t'
        << j.scale_factor << '\t' << detail::format_count(j.priority_weight) << '\t'
        << detail::format_fixed6(j.slo) << '\t' << detail::format_fixed6(j.arrival) << '\n';
  }
}

status write_trace_file(const std::string& path, const std::vector<job>& jobs) {
  // Refuse what would not read back as written.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    const std::string where = path + ": job " + std::to_string(i);
    const std::pair<const char*, const std::string*> texts[] = {
        {"job_type", &j.job_type},
        {"command", &j.command},
        {"working_dir", &j.working_dir},
        {"num_steps_arg", &j.num_steps_arg}};
    for (const auto& [field, text] : texts)
      if (text->find_first_of("\t\r\n") != std::string::npos)
        return error{error_kind::invalid_input,
                     where + ": field '" + field + "': contains a tab or line break"};
    const auto type = detail::trim(j.job_type);
    if (type.empty() || type.front() == '#')
      return error{error_kind::invalid_input,
                   where + ": field 'job_type': empty or starts with '#'"};
    const char* bad_field = nullptr;
    if (!(std::isfinite(j.total_steps) && j.total_steps > 0))
      bad_field = "total_steps";
    else if (j.scale_factor <= 0)
      bad_field = "scale_factor";
    else if (!(std::isfinite(j.priority_weight) && j.priority_weight > 0))
      bad_field = "priority_weight";
    else if (!(j.slo == -1 || (std::isfinite(j.slo) && j.slo > 0)))
      bad_field = "slo";
    else if (!(std::isfinite(j.arrival) && j.arrival >= 0))
      bad_field = "arrival_time";
    if (bad_field)
      return error{error_kind::invalid_input,
                   where + ": field '" + bad_field + "': value out of range"};
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return error{error_kind::io, path + ": cannot open for writing"};
  write_trace(out, jobs);
  out.flush();
  if (!out) return error{error_kind::io, path + ": write failed"};
  return {};
}

}  // namespace tessera
