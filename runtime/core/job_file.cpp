#include "runtime/core/job_file.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "runtime/core/detail/text.hpp"
#include "runtime/core/detail/toml_reader.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

result<checkpoint_cadence> parse_checkpoint_cadence(std::string_view text) {
  const auto bad = [&](const std::string& why) -> result<checkpoint_cadence> {
    return error{error_kind::invalid_input,
                 "expected \"N rounds\" (N in [1, 1000000]) or a time \"N s\", \"N min\", "
                 "\"N h\" of 1 s to 1000000 s, got \"" +
                     std::string(text) + "\"" + why};
  };
  std::string s(text);
  std::size_t used = 0;
  double n = 0;
  try {
    n = std::stod(s, &used);
  } catch (const std::exception&) {
    return bad("");
  }
  std::string unit = s.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  unit.erase(unit.find_last_not_of(' ') + 1);
  if (!std::isfinite(n)) return bad("");
  checkpoint_cadence c;
  if (unit == "round" || unit == "rounds") {
    if (n != std::floor(n) || n < 1 || n > 1e6) return bad(" (a whole number of rounds)");
    c.rounds = static_cast<std::int32_t>(n);
    return c;
  }
  const double scale = unit == "s" || unit == "sec" ? 1
                       : unit == "min"              ? 60
                       : unit == "h"                ? 3600
                                                    : 0;
  if (scale == 0) return bad(unit.empty() ? " (no unit)" : " (unknown unit)");
  c.seconds = n * scale;
  if (c.seconds < 1 || c.seconds > 1e6) return bad("");
  return c;
}

std::string format_checkpoint_cadence(const checkpoint_cadence& c) {
  if (c.seconds > 0) return detail::format_shortest(c.seconds) + " s";
  return std::to_string(c.rounds) + (c.rounds == 1 ? " round" : " rounds");
}

namespace {

using detail::kind_name;
using detail::line_of;
using detail::table_reader;

using detail::format_shortest;

/// What each bounded key must hold, as messages state it (bounds: runtime/core/input_limits.hpp).
const std::string steps_expect =
    "a positive number of steps, at most " + format_shortest(limits::max_total_steps);
const std::string scale_expect = "a positive integer, at most " + std::to_string(limits::max_gpus);
const std::string arrival_expect =
    "a non-negative number of seconds, at most " + format_shortest(limits::max_seconds);
const std::string weight_expect = "a number in [" + format_shortest(limits::min_priority_weight) +
                                  ", " + format_shortest(limits::max_priority_weight) + "]";
const std::string slo_expect =
    "-1 (none) or a positive number of seconds, at most " + format_shortest(limits::max_seconds);
const std::string id_expect =
    "a non-negative integer, at most " + std::to_string(limits::max_job_id);
const std::string step_time_expect = "a positive number of seconds in [" +
                                     format_shortest(limits::min_step_time) + ", " +
                                     format_shortest(limits::max_step_time) + "]";
const std::string target_loss_expect =
    "a positive training loss, at most " + format_shortest(limits::max_target_loss);

/// What the run-only keys of one [[job]] table hold (see load_run_jobs).
struct run_extras {
  std::string kind;
  std::optional<long long> seed;
  std::optional<double> step_time;
  std::optional<double> target_loss;
  train::fork_merge_rule merge = train::fork_merge_rule::mean;
  std::map<std::string, double> config;
  int config_line = 0;    ///< line of [job.config], or of the [[job]] table without one
  program_spec program;   ///< kind "program" only
  bool id_given = false;  ///< the table has `id`
};

/// The keys only a program job takes, and the keys only a trainable takes.
const char* const program_keys[] = {"command",      "workdir",       "env",
                                    "max_restarts", "grace_seconds", "checkpoint_every"};
const char* const trainable_keys[] = {"seed", "config", "target_loss"};

/// An array of strings (`command`): at least one, none empty.
result<std::vector<std::string>> read_strings(const std::string& path, const toml::node& n,
                                              const char* field) {
  std::vector<std::string> out;
  const auto* arr = n.as_array();
  if (!arr)
    return input_error(path, line_of(n), field,
                       std::string("expected an array of strings, got ") + kind_name(n.type()));
  for (const auto& e : *arr) {
    const auto* sv = e.as_string();
    if (!sv || sv->get().empty())
      return input_error(path, line_of(n), field,
                         std::string("expected non-empty strings, got ") +
                             (sv ? "an empty string" : kind_name(e.type())));
    out.push_back(sv->get());
  }
  if (out.empty()) return input_error(path, line_of(n), field, "expected the program to run");
  return out;
}

/// The `env` table of a program job: strings only, names without '='.
result<std::map<std::string, std::string>> read_env(const std::string& path, const toml::table& t) {
  std::map<std::string, std::string> env;
  const toml::node* en = t.get("env");
  if (!en) return env;
  const auto* et = en->as_table();
  if (!et)
    return input_error(path, line_of(*en), "env",
                       std::string("expected a table of strings, got ") + kind_name(en->type()));
  for (auto&& [k, v] : *et) {
    const std::string name(k.str());
    const auto* sv = v.as_string();
    if (name.empty() || name.find('=') != std::string::npos || !sv)
      return input_error(path, line_of(v), "env." + name,
                         sv ? "expected a variable name without '='"
                            : std::string("expected a string, got ") + kind_name(v.type()));
    env[name] = sv->get();
  }
  return env;
}

/// `checkpoint_every` of a program job: a cadence string, or a number of seconds.
result<std::optional<checkpoint_cadence>> read_cadence(const std::string& path,
                                                       const toml::table& t) {
  const toml::node* n = t.get("checkpoint_every");
  if (!n) return std::optional<checkpoint_cadence>{};
  std::string text;
  if (const auto* sv = n->as_string())
    text = sv->get();
  else if (const auto* iv = n->as_integer())
    text = std::to_string(iv->get()) + " s";
  else if (const auto* fv = n->as_floating_point())
    text = format_shortest(fv->get()) + " s";
  else
    return input_error(path, line_of(*n), "checkpoint_every",
                       std::string("expected \"N rounds\", a time (\"10 min\") or seconds, got ") +
                           kind_name(n->type()));
  auto c = parse_checkpoint_cadence(text);
  if (!c) return input_error(path, line_of(*n), "checkpoint_every", c.err().message);
  return std::optional<checkpoint_cadence>(*c);
}

/// The keys of a program job (kind "program"); relative workdirs are taken from `base_dir`
/// (the job file's directory) and must exist when `check_workdir` is set.
result<program_spec> read_program(const std::string& path, const std::string& base_dir,
                                  bool check_workdir, const toml::table& t, table_reader& r) {
  for (const char* key : trainable_keys)
    if (t.get(key))
      return input_error(
          path, r.line(key), key,
          "a program job takes no '" + std::string(key) + "' (it is the program's own business)");
  const auto restarts = r.integer("max_restarts", false, 0, 1000, "an integer in [0, 1000]");
  const auto grace = r.number(
      "grace_seconds", false, [](double v) { return v >= 0.1 && v <= 3600; },
      "a number of seconds in [0.1, 3600]");
  const auto workdir = r.str("workdir", false);
  if (r.err()) return *r.err();
  program_spec p;
  const toml::node* cn = t.get("command");
  if (!cn) return input_error(path, r.table_line(), "command", "missing in a program job");
  auto cmd = read_strings(path, *cn, "command");
  if (!cmd) return cmd.err();
  p.command = std::move(*cmd);
  auto env = read_env(path, t);
  if (!env) return env.err();
  p.env = std::move(*env);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path base = fs::absolute(fs::path(base_dir), ec);
  const fs::path dir = workdir ? base / fs::path(*workdir) : base;
  if (check_workdir && !fs::is_directory(dir, ec))
    return input_error(path, r.line("workdir"), "workdir",
                       "no such directory: " + dir.lexically_normal().string());
  auto normal = dir.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();  // "d/"
  p.workdir = normal.string();
  if (restarts) p.max_restarts = static_cast<std::int32_t>(*restarts);
  if (grace) p.grace_seconds = *grace;
  auto cadence = read_cadence(path, t);
  if (!cadence) return cadence.err();
  if (*cadence) p.checkpoint_every = **cadence;
  return p;
}

/// The [job.config] table of a run's job: numbers only.
result<std::map<std::string, double>> read_config(const std::string& path, const toml::table& t) {
  std::map<std::string, double> config;
  const toml::node* cn = t.get("config");
  if (!cn) return config;
  const auto* ct = cn->as_table();
  if (!ct)
    return input_error(path, line_of(*cn), "config",
                       std::string("expected a table of numbers, got ") + kind_name(cn->type()));
  for (auto&& [k, v] : *ct) {
    const std::string field = "config." + std::string(k.str());
    if (const auto* iv = v.as_integer())
      config[std::string(k.str())] = static_cast<double>(iv->get());
    else if (const auto* fv = v.as_floating_point(); fv && std::isfinite(fv->get()))
      config[std::string(k.str())] = fv->get();
    else if (fv)
      return input_error(path, line_of(v), field,
                         "expected a finite number, got " + format_shortest(fv->get()));
    else
      return input_error(path, line_of(v), field,
                         std::string("expected a number, got ") + kind_name(v.type()));
  }
  return config;
}

/// The run-only keys of one [[job]] table. When `known_kinds` is given, a kind outside it is
/// an error listing them.
result<run_extras> read_run_extras(const std::string& path, const std::string& base_dir,
                                   bool check_workdir, const toml::table& t, table_reader& r,
                                   const std::vector<std::string>* known_kinds) {
  const auto kind = r.str("kind", true);
  const auto seed = r.integer("seed", false, 0, LLONG_MAX, "a non-negative integer");
  const auto step_time = r.number(
      "step_time", false,
      [](double v) { return v >= limits::min_step_time && v <= limits::max_step_time; },
      step_time_expect.c_str());
  const auto target_loss = r.number(
      "target_loss", false, [](double v) { return v > 0 && v <= limits::max_target_loss; },
      target_loss_expect.c_str());
  const auto merge = r.str("merge", false);
  if (r.err()) return *r.err();
  run_extras ex;
  if (merge) {
    const auto rule = train::parse_fork_merge_rule(*merge);
    if (!rule)
      return input_error(path, r.line("merge"), "merge",
                         "unknown merge rule " + detail::quoted(*merge) +
                             " (known: " + train::fork_merge_rule_names() + ")");
    ex.merge = *rule;
  }
  ex.target_loss = target_loss;
  ex.kind = *kind;
  ex.seed = seed;
  ex.step_time = step_time;
  ex.config_line = r.table_line();
  if (ex.kind == program_kind) {
    auto program = read_program(path, base_dir, check_workdir, t, r);
    if (!program) return program.err();
    ex.program = std::move(*program);
    return ex;
  }
  for (const char* key : program_keys)
    if (t.get(key))
      return input_error(path, r.line(key), key,
                         "only a job of kind \"program\" takes '" + std::string(key) + "'");
  if (known_kinds &&
      std::find(known_kinds->begin(), known_kinds->end(), ex.kind) == known_kinds->end()) {
    std::string list;
    for (const auto& k : *known_kinds) list += (list.empty() ? "" : ", ") + k;
    list += ", " + program_kind;
    return input_error(path, r.line("kind"), "kind",
                       "unknown job kind " + detail::quoted(ex.kind) + " (known: " + list + ")");
  }
  auto config = read_config(path, t);
  if (!config) return config.err();
  ex.config = std::move(*config);
  ex.config_line = t.get("config") ? r.line("config") : r.table_line();
  return ex;
}

/// Hops' requirement set `acceptable_gpus` (empty when the key is absent).
result<std::vector<int>> read_acceptable_gpus(const std::string& path, const toml::table& t) {
  std::vector<int> acceptable;
  const toml::node* an = t.get("acceptable_gpus");
  if (!an) return acceptable;
  const auto* arr = an->as_array();
  if (!arr)
    return input_error(
        path, line_of(*an), "acceptable_gpus",
        std::string("expected an array of positive GPU counts, got ") + kind_name(an->type()));
  for (const auto& e : *arr) {
    const auto* iv = e.as_integer();
    if (!iv || iv->get() <= 0 || iv->get() > limits::max_gpus)
      return input_error(path, line_of(*an), "acceptable_gpus",
                         "expected positive GPU counts, at most " +
                             std::to_string(limits::max_gpus) + ", got " +
                             (iv ? std::to_string(iv->get()) : std::string(kind_name(e.type()))));
    acceptable.push_back(static_cast<int>(iv->get()));
  }
  if (acceptable.empty())
    return input_error(path, line_of(*an), "acceptable_gpus", "expected at least one GPU count");
  return acceptable;
}

/// The keys every job set takes, of the `index`-th [[job]] table. In a run's job set
/// (`run_kind` given) job_type is optional and defaults to the kind.
result<job> read_job(const std::string& path, const toml::table& t, table_reader& r,
                     std::size_t index, const std::string* run_kind) {
  const auto type = r.str("job_type", run_kind == nullptr);
  const auto scale = r.integer("scale_factor", false, 1, limits::max_gpus, scale_expect.c_str());
  const auto steps = r.number(
      "total_steps", true, [](double v) { return v > 0 && v <= limits::max_total_steps; },
      steps_expect.c_str());
  const auto arrival = r.number(
      "arrival", false, [](double v) { return v >= 0 && v <= limits::max_seconds; },
      arrival_expect.c_str());
  const auto weight = r.number(
      "priority_weight", false,
      [](double v) { return v >= limits::min_priority_weight && v <= limits::max_priority_weight; },
      weight_expect.c_str());
  const auto slo = r.number(
      "slo", false, [](double v) { return v == -1 || (v > 0 && v <= limits::max_seconds); },
      slo_expect.c_str());
  const auto id = r.integer("id", false, 0, limits::max_job_id, id_expect.c_str());
  const auto copies = r.integer("max_copies", false, 1, limits::max_gpus,
                                "an integer from 1 (never forked) to the most GPUs a job may hold");
  if (r.err()) return *r.err();
  auto acceptable = read_acceptable_gpus(path, t);
  if (!acceptable) return acceptable.err();

  job j;
  j.job_type = type ? *type : *run_kind;
  if (detail::trim(j.job_type).empty())
    return input_error(path, r.line("job_type"), "job_type", "empty job type");
  j.scale_factor = static_cast<int>(scale.value_or(1));
  j.total_steps = *steps;
  j.arrival = arrival.value_or(0.0);
  j.priority_weight = weight.value_or(1.0);
  j.slo = slo.value_or(-1.0);
  j.acceptable_gpus = std::move(*acceptable);
  j.id = id ? static_cast<job_id>(*id) : static_cast<job_id>(index);
  // A program's copies merge only if it calls `average`: it is forked when it says so.
  j.max_copies = copies ? static_cast<int>(*copies) : run_kind && *run_kind == program_kind ? 1 : 0;
  return j;
}

/// Where a job set's root table came from.
struct job_set_origin {
  std::string name;      ///< the file (or "request body") named in messages
  std::string base_dir;  ///< directory relative workdirs start from
  /// The table has no line numbers (it was converted from JSON): messages name the job by
  /// its index instead, as `name, job[i]`.
  bool indexed = false;
  /// A program's workdir must exist (false for jobs accepted before: see parse_recorded_jobs).
  bool check_workdirs = true;
};

/// Reads a job set's root table. With `extras` (a run's job set), the run keys are accepted,
/// `kind` is required, `job_type` defaults to the kind and one run_extras per job is appended.
result<std::vector<job>> read_job_set(const toml::table& root, const job_set_origin& origin,
                                      const throughput_table* table,
                                      std::vector<run_extras>* extras,
                                      const std::vector<std::string>* known_kinds) {
  const std::string& path = origin.name;
  table_reader top(path, root, "a job-set file");
  top.allow_only({"job"});
  if (top.err()) return *top.err();
  const toml::node* jnode = root.get("job");
  if (!jnode) return input_error(path, 0, "job", "no [[job]] entries");
  auto tables = detail::tables_of(path, *jnode, "job", 0);
  if (!tables) return tables.err();
  if (tables->empty()) return input_error(path, 0, "job", "no [[job]] entries");

  std::vector<job> jobs;
  std::map<job_id, std::string> id_places;
  for (std::size_t i = 0; i < tables->size(); ++i) {
    const toml::table& t = *(*tables)[i];
    const std::string label = origin.indexed ? path + ", job[" + std::to_string(i) + "]" : path;
    table_reader r(label, t, "[[job]]");
    if (extras)
      r.allow_only({"job_type",        "scale_factor", "total_steps",  "arrival",
                    "priority_weight", "slo",          "id",           "acceptable_gpus",
                    "max_copies",      "kind",         "seed",         "step_time",
                    "target_loss",     "merge",        "config",       "command",
                    "workdir",         "env",          "max_restarts", "grace_seconds",
                    "checkpoint_every"});
    else
      r.allow_only({"job_type", "scale_factor", "total_steps", "arrival", "priority_weight", "slo",
                    "id", "acceptable_gpus", "max_copies"});
    run_extras ex;
    if (extras) {
      auto read = read_run_extras(label, origin.base_dir, origin.check_workdirs, t, r, known_kinds);
      if (!read) return read.err();
      ex = std::move(*read);
    }
    auto j = read_job(label, t, r, i, extras ? &ex.kind : nullptr);
    if (!j) return j.err();
    const int id_line = t.get("id") ? r.line("id") : r.table_line();
    const std::string place =
        origin.indexed ? "job[" + std::to_string(i) + "]" : "line " + std::to_string(id_line);
    if (auto [it, fresh] = id_places.emplace(j->id, place); !fresh)
      return input_error(
          label, id_line, "id",
          "duplicate job id " + std::to_string(j->id) + " (also used at " + it->second + ")");
    if (table && !table->knows(job_key{j->job_type, j->scale_factor}))
      return input_error(label, r.line("job_type"), "job_type",
                         "unknown job type " + detail::quoted(j->job_type) + " at scale " +
                             std::to_string(j->scale_factor));
    if (extras && std::floor(j->total_steps) != j->total_steps)
      return input_error(label, r.line("total_steps"), "total_steps",
                         "expected a whole number of steps in a run's job set, got " +
                             detail::format_shortest(j->total_steps));
    jobs.push_back(std::move(*j));
    ex.id_given = t.get("id") != nullptr;
    if (extras) extras->push_back(std::move(ex));
  }
  return jobs;
}

/// Reads a job-set file (see read_job_set).
result<std::vector<job>> load_jobs_impl(const std::string& path, const throughput_table* table,
                                        std::vector<run_extras>* extras,
                                        const std::vector<std::string>* known_kinds) {
  try {
    auto doc = detail::parse_toml_file(path);
    if (!doc) return doc.err();
    namespace fs = std::filesystem;
    std::error_code ec;
    const job_set_origin origin{path, fs::absolute(fs::path(path), ec).parent_path().string()};
    return read_job_set(*doc, origin, table, extras, known_kinds);
  } catch (const std::exception& e) {
    return error{error_kind::internal, path + ": " + e.what()};
  }
}

/// A run's jobs from the job-set table and the run keys read beside it.
result<std::vector<run_job>> make_run_jobs(std::vector<job> jobs, std::vector<run_extras> extras,
                                           const job_set_origin& origin,
                                           const run_job_check& check) {
  std::vector<run_job> out;
  out.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    run_job rj;
    rj.spec = std::move(jobs[i]);
    rj.kind = std::move(extras[i].kind);
    rj.seed = extras[i].seed ? static_cast<std::uint64_t>(*extras[i].seed)
                             : static_cast<std::uint64_t>(rj.spec.id) + 1;
    rj.step_time = extras[i].step_time.value_or(rj.step_time);
    rj.target_loss = extras[i].target_loss.value_or(0.0);
    rj.merge = extras[i].merge;
    rj.config = std::move(extras[i].config);
    rj.program = std::move(extras[i].program);
    rj.id_given = extras[i].id_given;
    if (check && !rj.is_program())
      if (auto st = check(rj); !st)
        return input_error(
            origin.indexed ? origin.name + ", job[" + std::to_string(i) + "]" : origin.name,
            extras[i].config_line, rj.config.empty() ? "kind" : "config", st.err().message);
    out.push_back(std::move(rj));
  }
  return out;
}

}  // namespace

result<std::vector<job>> load_jobs(const std::string& path, const throughput_table* table) {
  return load_jobs_impl(path, table, nullptr, nullptr);
}

result<std::vector<run_job>> load_run_jobs(const std::string& path,
                                           const std::vector<std::string>* known_kinds,
                                           const run_job_check& check) {
  std::vector<run_extras> extras;
  auto jobs = load_jobs_impl(path, nullptr, &extras, known_kinds);
  if (!jobs) return jobs.err();
  namespace fs = std::filesystem;
  std::error_code ec;
  const job_set_origin origin{path, fs::absolute(fs::path(path), ec).parent_path().string()};
  return make_run_jobs(std::move(*jobs), std::move(extras), origin, check);
}

namespace {

/// Reads a run's job set from text (parse_run_jobs, parse_recorded_jobs).
result<std::vector<run_job>> parse_jobs_text(std::string_view text, job_text_format format,
                                             const job_set_origin& origin,
                                             const std::vector<std::string>* known_kinds,
                                             const run_job_check& check) {
  const std::string& name = origin.name;
  try {
    if (text.size() > limits::toml_file.max_bytes)
      return input_error(name, 0, "",
                         "larger than " + std::to_string(limits::toml_file.max_bytes) + " bytes");
    auto root = format == job_text_format::json ? detail::toml_from_json(text, name)
                                                : detail::parse_toml_text(text, name);
    if (!root) return root.err();
    std::vector<run_extras> extras;
    auto jobs = read_job_set(*root, origin, nullptr, &extras, known_kinds);
    if (!jobs) return jobs.err();
    return make_run_jobs(std::move(*jobs), std::move(extras), origin, check);
  } catch (const std::exception& e) {
    return error{error_kind::internal, name + ": " + e.what()};
  }
}

}  // namespace

result<std::vector<run_job>> parse_run_jobs(std::string_view text, job_text_format format,
                                            const std::string& name, const std::string& base_dir,
                                            const std::vector<std::string>* known_kinds,
                                            const run_job_check& check) {
  return parse_jobs_text(text, format,
                         job_set_origin{name, base_dir, format == job_text_format::json},
                         known_kinds, check);
}

std::int64_t free_job_id(std::int64_t from, const std::function<bool(std::int64_t)>& taken) {
  const std::int64_t last = limits::max_job_id;
  std::int64_t id = from < 0 || from > last ? 0 : from;
  for (std::int64_t tried = 0; tried <= last; ++tried, id = id == last ? 0 : id + 1)
    if (!taken(id)) return id;
  return -1;
}

result<std::vector<run_job>> parse_recorded_jobs(std::string_view json, const std::string& name) {
  return parse_jobs_text(json, job_text_format::json, job_set_origin{name, "/", true, false},
                         nullptr, {});
}

}  // namespace tessera
