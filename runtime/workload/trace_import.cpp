#include "runtime/workload/trace_import.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <istream>
#include <iterator>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"
#include "runtime/workload/sia_workload.hpp"

namespace tessera {

namespace {

/// A job as a trace gives it, before it becomes one of ours.
struct raw_job {
  double submit = 0;     ///< seconds (any origin)
  int gpus = 0;          ///< GPUs it asked for
  double run = 0;        ///< seconds it ran
  std::string gpu_type;  ///< the GPU type it ran on, lowercased ("" = unknown)
};

/// A number field, or an error naming where and what.
result<double> number_field(const std::string& text, const std::string& where,
                            const std::string& field) {
  if (const auto v = detail::parse_double(text)) return *v;
  return import_field_error(where, field, "expected a number, got '" + text.substr(0, 40) + "'");
}

/// The columns a Helios log must have, by name, and their indices.
struct helios_columns {
  int gpus = -1, state = -1, submit = -1, duration = -1, start = -1, end = -1;
};

result<helios_columns> helios_header(const std::string& line, const std::string& name) {
  helios_columns c;
  const auto names = detail::csv_fields(line);
  for (int i = 0; i < static_cast<int>(names.size()); ++i) {
    const auto& n = names[static_cast<std::size_t>(i)];
    int* slot = n == "gpu_num"       ? &c.gpus
                : n == "state"       ? &c.state
                : n == "submit_time" ? &c.submit
                : n == "duration"    ? &c.duration
                : n == "start_time"  ? &c.start
                : n == "end_time"    ? &c.end
                                     : nullptr;
    if (slot) *slot = i;
  }
  for (auto [col, field] : {std::pair{c.gpus, "gpu_num"}, std::pair{c.state, "state"},
                            std::pair{c.submit, "submit_time"}})
    if (col < 0) return import_field_error(name + ":1", field, "no such column in the header");
  if (c.duration < 0 && (c.start < 0 || c.end < 0))
    return import_field_error(name + ":1", "duration",
                              "no such column, nor start_time and end_time");
  return c;
}

/// One Helios line as a raw job; false (counted in `summary`) when it is dropped.
result<bool> helios_line(const std::vector<std::string>& f, const helios_columns& c,
                         const std::string& where, raw_job& out, import_summary& summary) {
  auto gpus = number_field(f[static_cast<std::size_t>(c.gpus)], where, "gpu_num");
  if (!gpus) return gpus.err();
  auto submit = parse_trace_time(f[static_cast<std::size_t>(c.submit)]);
  if (!submit) return import_field_error(where, "submit_time", submit.err().message);
  double run = 0;
  if (c.duration >= 0 && !f[static_cast<std::size_t>(c.duration)].empty()) {
    auto d = number_field(f[static_cast<std::size_t>(c.duration)], where, "duration");
    if (!d) return d.err();
    run = *d;
  } else if (c.start >= 0) {
    auto s = parse_trace_time(f[static_cast<std::size_t>(c.start)]);
    auto e = parse_trace_time(f[static_cast<std::size_t>(c.end)]);
    if (!s) return import_field_error(where, "start_time", s.err().message);
    if (!e) return import_field_error(where, "end_time", e.err().message);
    run = *e - *s;
  }
  const std::string& state = f[static_cast<std::size_t>(c.state)];
  std::string why;
  if (state != "COMPLETED")
    why = "state " + state.substr(0, 20);
  else if (*gpus < 1)
    why = "no GPU";
  else if (run <= 0)
    why = "no run time";
  if (!why.empty()) {
    ++summary.dropped[why];
    return false;
  }
  out = raw_job{*submit, static_cast<int>(*gpus), run, ""};
  return true;
}

result<std::vector<raw_job>> read_helios(std::istream& in, const std::string& name,
                                         import_summary& summary) {
  std::string line;
  if (!std::getline(in, line))
    return import_field_error(name + ":1", "header", "the file is empty");
  auto cols = helios_header(line, name);
  if (!cols) return cols.err();
  const int need =
      std::max({cols->gpus, cols->state, cols->submit, cols->duration, cols->start, cols->end}) + 1;
  std::vector<raw_job> out;
  for (std::size_t no = 2; std::getline(in, line); ++no) {
    if (line.empty() || line == "\r") continue;
    const auto f = detail::csv_fields(line);
    const std::string where = name + ":" + std::to_string(no);
    if (static_cast<int>(f.size()) < need)
      return error{error_kind::invalid_input, where + ": expected at least " +
                                                  std::to_string(need) + " fields, got " +
                                                  std::to_string(f.size())};
    ++summary.read;
    raw_job j;
    auto kept = helios_line(f, *cols, where, j, summary);
    if (!kept) return kept.err();
    if (*kept) out.push_back(j);
  }
  return out;
}

/// A Philly time field ("YYYY-MM-DD HH:MM:SS"); nullopt for null.
result<std::optional<double>> philly_time(const nlohmann::json& j, const char* key,
                                          const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<double>();
  if (!it->is_string()) return import_field_error(where, key, "expected a time string");
  auto t = parse_trace_time(it->get<std::string>());
  if (!t) return import_field_error(where, key, t.err().message);
  return std::optional<double>(*t);
}

/// One Philly job as a raw job; false (counted) when it is dropped.
result<bool> philly_job(const nlohmann::json& j, const std::string& where, raw_job& out,
                        import_summary& summary) {
  if (!j.is_object()) return import_field_error(where, "job", "expected an object");
  const std::string status = j.value("status", std::string());
  auto submit = philly_time(j, "submitted_time", where);
  if (!submit) return submit.err();
  if (!*submit) return import_field_error(where, "submitted_time", "missing");
  const auto attempts = j.find("attempts");
  if (attempts == j.end() || !attempts->is_array())
    return import_field_error(where, "attempts", "expected an array");
  if (status != "Pass" && status != "Killed") return ++summary.dropped["status " + status], false;
  if (attempts->empty()) return ++summary.dropped["never ran"], false;
  const auto& last = attempts->back();
  auto start = philly_time(last, "start_time", where);
  auto end = philly_time(last, "end_time", where);
  if (!start) return start.err();
  if (!end) return end.err();
  int gpus = 0;
  if (const auto d = last.find("detail"); d != last.end() && d->is_array())
    for (const auto& host : *d)
      if (const auto g = host.find("gpus"); g != host.end() && g->is_array())
        gpus += static_cast<int>(g->size());
  if (gpus < 1) return ++summary.dropped["no GPU"], false;
  if (!*start || !*end || **end <= **start) return ++summary.dropped["no run time"], false;
  out = raw_job{**submit, gpus, **end - **start, ""};
  return true;
}

result<std::vector<raw_job>> read_philly(std::istream& in, const std::string& name,
                                         import_summary& summary) {
  nlohmann::json all;
  try {
    all = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return error{error_kind::invalid_input, name + ": malformed JSON: " + e.what()};
  }
  if (!all.is_array()) return error{error_kind::invalid_input, name + ": expected a JSON array"};
  std::vector<raw_job> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    ++summary.read;
    raw_job j;
    auto kept = philly_job(all[i], name + ", job[" + std::to_string(i) + "]", j, summary);
    if (!kept) return kept.err();
    if (*kept) out.push_back(j);
  }
  return out;
}

/// PAI's task table: per job, its GPUs (sum of inst_num x plan_gpu / 100, rounded up) and the
/// GPU type of its tasks (lowercased; the last one named).
struct pai_tasks {
  std::map<std::string, double> gpus;
  std::map<std::string, std::string> type;
};

/// A number field that may be empty (0).
result<double> optional_number(const std::string& text, const std::string& where,
                               const std::string& field) {
  return text.empty() ? result<double>(0.0) : number_field(text, where, field);
}

result<pai_tasks> read_pai_tasks(std::istream& in, const std::string& name) {
  pai_tasks out;
  std::string line;
  for (std::size_t no = 1; std::getline(in, line); ++no) {
    const auto f = detail::csv_fields(line);
    if (line.empty() || (no == 1 && f[0] == "job_name")) continue;
    const std::string where = name + ":" + std::to_string(no);
    if (f.size() < 10)
      return error{error_kind::invalid_input,
                   where + ": expected 10 fields, got " + std::to_string(f.size())};
    auto inst = optional_number(f[2], where, "inst_num");
    if (!inst) return inst.err();
    auto plan = optional_number(f[8], where, "plan_gpu");
    if (!plan) return plan.err();
    out.gpus[f[0]] += *inst * *plan / 100;
    if (!f[9].empty()) out.type[f[0]] = detail::to_lower(f[9]);
  }
  return out;
}

result<std::vector<raw_job>> read_pai(std::istream& in, const std::string& name,
                                      const import_options& opt, import_summary& summary) {
  if (!opt.tasks)
    return error{error_kind::invalid_input, name + ": pai needs its task table (--tasks FILE)"};
  auto tasks = read_pai_tasks(*opt.tasks, opt.tasks_name);
  if (!tasks) return tasks.err();
  std::vector<raw_job> out;
  std::string line;
  for (std::size_t no = 1; std::getline(in, line); ++no) {
    const auto f = detail::csv_fields(line);
    if (line.empty() || (no == 1 && f[0] == "job_name")) continue;
    const std::string where = name + ":" + std::to_string(no);
    if (f.size() < 6)
      return error{error_kind::invalid_input,
                   where + ": expected 6 fields, got " + std::to_string(f.size())};
    ++summary.read;
    auto start = optional_number(f[4], where, "start_time");
    if (!start) return start.err();
    auto end = optional_number(f[5], where, "end_time");
    if (!end) return end.err();
    const auto g = tasks->gpus.find(f[0]);
    const double gpus = g == tasks->gpus.end() ? 0 : std::ceil(g->second - 1e-9);
    std::string why;
    if (f[3] != "Terminated")
      why = "status " + f[3].substr(0, 20);
    else if (gpus < 1)
      why = "no GPU";
    else if (f[4].empty() || f[5].empty() || *end <= *start)
      why = "no run time";
    if (!why.empty()) {
      ++summary.dropped[why];
      continue;
    }
    const auto t = tasks->type.find(f[0]);
    out.push_back(raw_job{*start, static_cast<int>(gpus), *end - *start,
                          t == tasks->type.end() ? "" : t->second});
  }
  return out;
}

/// Per scale factor, the templates the table knows at that scale on `ref`.
std::map<int, std::vector<std::size_t>> templates_by_scale(
    const std::vector<job_template>& templates, const throughput_table& table,
    const std::string& ref) {
  std::map<int, std::vector<std::size_t>> out;
  for (int scale = 1; scale <= 1024; scale *= 2)
    for (std::size_t t = 0; t < templates.size(); ++t)
      if (const auto v = table.isolated(ref, job_key{templates[t].job_type, scale}); v && *v > 0)
        out[scale].push_back(t);
  return out;
}

}  // namespace

result<trace_format> parse_trace_format(const std::string& name) {
  if (name == "helios") return trace_format::helios;
  if (name == "philly") return trace_format::philly;
  if (name == "pai") return trace_format::pai;
  if (name == "sia") return trace_format::sia;
  return error{error_kind::invalid_input,
               "unknown trace format '" + name + "' (known: helios, philly, pai, sia)"};
}

error import_field_error(const std::string& where, const std::string& field,
                         const std::string& why) {
  return error{error_kind::invalid_input, where + ": field '" + field + "': " + why};
}

result<double> parse_trace_time(const std::string& text) {
  // The whole text in that form, or nothing: std::get_time takes "1007" as a year.
  std::tm tm{};
  int used = 0;
  if (text.size() == 19 &&
      std::sscanf(text.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) == 6 &&
      used == 19 && tm.tm_mon >= 1 && tm.tm_mon <= 12 && tm.tm_mday >= 1 && tm.tm_mday <= 31 &&
      tm.tm_hour <= 23 && tm.tm_min <= 59 && tm.tm_sec <= 60) {
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<double>(timegm(&tm));
  }
  if (const auto v = detail::parse_double(text); v && *v >= 0) return *v;
  return error{error_kind::invalid_input,
               "expected \"YYYY-MM-DD HH:MM:SS\" or seconds, got '" + text.substr(0, 40) + "'"};
}

result<std::vector<job>> import_trace(trace_format format, std::istream& in,
                                      const std::string& name,
                                      const std::vector<job_template>& templates,
                                      const throughput_table& table, const import_options& opt,
                                      import_summary& summary) {
  if (format == trace_format::sia) {
    if (!opt.sia) return error{error_kind::invalid_input, "sia: Sia's measurements are needed"};
    return import_sia_workload(in, name, *opt.sia, summary);
  }
  auto raws = format == trace_format::helios   ? read_helios(in, name, summary)
              : format == trace_format::philly ? read_philly(in, name, summary)
                                               : read_pai(in, name, opt, summary);
  if (!raws) return raws.err();
  std::stable_sort(raws->begin(), raws->end(),
                   [](const raw_job& a, const raw_job& b) { return a.submit < b.submit; });
  const auto by_scale = templates_by_scale(templates, table, opt.reference_type);
  if (by_scale.empty())
    return error{error_kind::invalid_input,
                 "no job template has a throughput on '" + opt.reference_type + "' in the table"};
  std::mt19937_64 rng(opt.seed);
  std::vector<job> out;
  std::optional<double> base;  // the first imported job's submit time
  for (const auto& r : *raws) {
    const auto fit = by_scale.lower_bound(r.gpus);
    if (fit == by_scale.end()) {
      ++summary.dropped["more GPUs than any table scale (" +
                        std::to_string(by_scale.rbegin()->first) + ")"];
      continue;
    }
    const auto& choice = fit->second;
    const auto& t =
        templates[choice[std::uniform_int_distribution<std::size_t>(0, choice.size() - 1)(rng)]];
    // Its own GPU type's throughput when the table knows it (PAI), else the reference's.
    const auto own = r.gpu_type.empty()
                         ? std::nullopt
                         : table.isolated(r.gpu_type, job_key{t.job_type, fit->first});
    const double tput = own && *own > 0
                            ? *own
                            : *table.isolated(opt.reference_type, job_key{t.job_type, fit->first});
    const double steps = std::max(1.0, std::ceil(r.run * tput));
    const double arrival = r.submit - base.value_or(r.submit);
    if (steps > limits::max_total_steps || arrival > limits::max_seconds) {
      ++summary.dropped["past the trace bounds"];
      continue;
    }
    if (!base) base = r.submit;
    job j;
    j.id = static_cast<job_id>(out.size());
    j.job_type = t.job_type;
    j.scale_factor = fit->first;
    j.total_steps = steps;
    j.arrival = arrival;
    j.command = t.command;
    j.working_dir = t.working_dir;
    j.num_steps_arg = t.num_steps_arg;
    j.needs_data_dir = t.needs_data_dir;
    out.push_back(std::move(j));
  }
  summary.kept = out.size();
  return out;
}

}  // namespace tessera
