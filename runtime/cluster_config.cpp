#include "runtime/cluster_config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "runtime/detail/text.hpp"

namespace tessera {

namespace {

// ---- TOML adapter: TOML++ stays in this file, and its exceptions are caught here ----------

/// What a TOML node holds, for "expected X, got Y" messages.
const char* kind_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

/// Reads and parses a TOML file; syntax errors give "<file>:<line>:<column>: <description>".
result<toml::table> parse_toml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{error_kind::io, path + ": cannot open"};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return error{error_kind::io, path + ": read error"};
  auto syntax_error = [&](const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return error{error_kind::invalid_input, path + ":" + std::to_string(at.line) + ":" +
                                                std::to_string(at.column) + ": " +
                                                std::string(e.description())};
  };
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return syntax_error(e);
  } catch (const std::exception& e) {
    return input_error(path, 0, "", std::string("cannot parse TOML: ") + e.what());
  }
#else
  auto r = toml::parse(text, path);
  if (!r) return syntax_error(r.error());
  return std::move(r).table();
#endif
}

/// Reads the fields of one TOML table, naming the file, line and field in every error.
/// The first error is kept; later reads are no-ops returning nullopt.
class table_reader {
 public:
  table_reader(const std::string& path, const toml::table& t, std::string context)
      : path_(path), t_(t), context_(std::move(context)) {}

  /// Rejects keys outside `allowed`, naming the first unknown one.
  void allow_only(std::initializer_list<const char*> allowed) {
    if (err_) return;
    for (auto&& [k, v] : t_) {
      bool known = false;
      std::string list;
      for (const char* a : allowed) {
        known = known || k.str() == a;
        list += list.empty() ? std::string("'") + a + "'" : std::string(", '") + a + "'";
      }
      if (!known) {
        const int line =
            k.source().begin.line ? static_cast<int>(k.source().begin.line) : line_of(v);
        fail(line, std::string(k.str()),
             "unknown key in " + context_ + "; expected one of " + list);
        return;
      }
    }
  }

  /// A string field; required ones report the table's line when missing.
  std::optional<std::string> str(const char* key, bool required) {
    const toml::node* n = find(key, required);
    if (!n) return std::nullopt;
    if (auto s = n->as_string()) return s->get();
    return wrong_type<std::string>(*n, key, "a string");
  }

  /// An integer field within [lo, hi].
  std::optional<long long> integer(const char* key, bool required, long long lo, long long hi,
                                   const char* expect) {
    const toml::node* n = find(key, required);
    if (!n) return std::nullopt;
    const auto* i = n->as_integer();
    if (!i) return wrong_type<long long>(*n, key, expect);
    const long long v = i->get();
    if (v < lo || v > hi) {
      fail(line_of(*n), key, std::string("expected ") + expect + ", got " + std::to_string(v));
      return std::nullopt;
    }
    return v;
  }

  /// A number field (integer or floating point); `ok` validates its value.
  template <class Pred>
  std::optional<double> number(const char* key, bool required, Pred ok, const char* expect) {
    const toml::node* n = find(key, required);
    if (!n) return std::nullopt;
    double v = 0;
    if (const auto* i = n->as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      v = f->get();
    } else {
      return wrong_type<double>(*n, key, expect);
    }
    if (!std::isfinite(v) || !ok(v)) {
      fail(line_of(*n), key,
           std::string("expected ") + expect + ", got " + detail::format_shortest(v));
      return std::nullopt;
    }
    return v;
  }

  /// Line of a field, or of the table when the field is absent.
  int line(const char* key) const {
    const toml::node* n = t_.get(key);
    return n ? line_of(*n) : table_line();
  }
  /// Line of the table itself (its header).
  int table_line() const { return line_of(t_); }

  /// Records an error (only the first one counts).
  void fail(int line, const std::string& field, const std::string& what) {
    if (!err_) err_ = input_error(path_, line, field, what);
  }
  const std::optional<error>& err() const { return err_; }

 private:
  const toml::node* find(const char* key, bool required) {
    if (err_) return nullptr;
    const toml::node* n = t_.get(key);
    if (!n && required) fail(table_line(), key, "missing in " + context_);
    return n;
  }

  template <class T>
  std::optional<T> wrong_type(const toml::node& n, const char* key, const char* expect) {
    fail(line_of(n), key, std::string("expected ") + expect + ", got " + kind_name(n.type()));
    return std::nullopt;
  }

  const std::string& path_;
  const toml::table& t_;
  std::string context_;
  std::optional<error> err_;
};

/// The tables of an array-of-tables key (`[[key]]`), or an error naming it.
result<std::vector<const toml::table*>> tables_of(const std::string& path, const toml::node& n,
                                                  const std::string& key, int line_if_absent) {
  const auto* arr = n.as_array();
  if (!arr) {
    const int line = line_of(n) ? line_of(n) : line_if_absent;
    return input_error(
        path, line, key,
        "expected [[" + key + "]] entries (an array of tables), got " + kind_name(n.type()));
  }
  std::vector<const toml::table*> out;
  for (const auto& e : *arr) {
    const auto* t = e.as_table();
    if (!t)
      return input_error(path, line_of(e), key,
                         std::string("expected a table, got ") + kind_name(e.type()));
    out.push_back(t);
  }
  return out;
}

// ---- cluster building ----------------------------------------------------------------------

/// Upper bound on a cluster's GPUs, against typos such as "3600000000 v100".
constexpr long long max_cluster_gpus = 1LL << 20;

/// Hands out default server names "<type>-<k>" and checks that names are unique.
class server_namer {
 public:
  std::string next(const std::string& type) {
    for (;;) {
      std::string name = type + "-" + std::to_string(next_[type]++);
      if (!used_.count(name)) return name;
    }
  }
  bool claim(const std::string& name) { return used_.insert(name).second; }

 private:
  std::map<std::string, int> next_;
  std::set<std::string> used_;
};

bool iequals(std::string_view a, std::string_view b) {
  return detail::to_lower(a) == detail::to_lower(b);
}

std::string prefixed(const std::string& where, const std::string& what) {
  return where.empty() ? what : where + ": " + what;
}

/// Parses a shorthand into servers, naming them through `namer`.
result<std::vector<server>> shorthand_servers(const std::string& text, const std::string& where,
                                              server_namer& namer) {
  auto bad = [&](const std::string& what) {
    return error{error_kind::invalid_input,
                 prefixed(where, what + " (in cluster shorthand " + detail::quoted(text) +
                                     "; expected e.g. \"36 v100 : 36 p100, 4 per server\")")};
  };
  const auto parts = detail::split(text, ',');
  if (parts.size() > 2) return bad("more than one ','");

  // "<count> <type>" groups separated by ':'.
  std::vector<std::pair<long long, std::string>> groups;
  std::set<std::string> seen;
  for (auto g : detail::split(parts[0], ':')) {
    g = detail::trim(g);
    const auto sp = g.find_first_of(" \t");
    if (g.empty() || sp == std::string_view::npos)
      return bad("expected '<GPUs> <type>', got " + detail::quoted(g));
    const auto count = detail::parse_int(g.substr(0, sp));
    const std::string type = detail::to_lower(detail::trim(g.substr(sp)));
    if (!count || *count <= 0 || *count > INT_MAX)
      return bad("expected a positive GPU count, got " + detail::quoted(g.substr(0, sp)));
    if (type.empty() || type.find_first_of(" \t") != std::string::npos)
      return bad("expected one GPU type name after the count, got " +
                 detail::quoted(g.substr(sp + 1)));
    if (!seen.insert(type).second) return bad("GPU type '" + type + "' given twice");
    groups.emplace_back(*count, type);
  }

  // ", <n>[:<n>...] [gpus] per server"; default 1 GPU per server, as Gavel's simulator.
  std::vector<long long> per_server(groups.size(), 1);
  if (parts.size() == 2) {
    std::vector<std::string_view> words;
    for (auto w : detail::split(detail::trim(parts[1]), ' '))
      if (!detail::trim(w).empty()) words.push_back(detail::trim(w));
    const bool tail_ok =
        (words.size() == 3 && iequals(words[1], "per") && iequals(words[2], "server")) ||
        (words.size() == 4 && (iequals(words[1], "gpus") || iequals(words[1], "gpu")) &&
         iequals(words[2], "per") && iequals(words[3], "server"));
    if (!tail_ok)
      return bad("expected '<n> per server' after ',', got " +
                 detail::quoted(detail::trim(parts[1])));
    const auto ns = detail::split(words[0], ':');
    if (ns.size() != 1 && ns.size() != groups.size())
      return bad("expected one GPUs-per-server value, or one per GPU type");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const auto n = detail::parse_int(ns.size() == 1 ? ns[0] : ns[i]);
      if (!n || *n <= 0 || *n > INT_MAX)
        return bad("expected a positive number of GPUs per server, got " +
                   detail::quoted(words[0]));
      per_server[i] = *n;
    }
  }

  long long total = 0;
  for (const auto& g : groups) total += g.first;
  if (total > max_cluster_gpus)
    return bad("more than " + std::to_string(max_cluster_gpus) + " GPUs");

  std::vector<server> out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    long long left = groups[i].first;
    while (left > 0) {
      server s;
      s.gpu_type = groups[i].second;
      s.gpus = static_cast<int>(std::min(left, per_server[i]));
      s.speed = 1.0;
      s.name = namer.next(s.gpu_type);
      namer.claim(s.name);
      left -= s.gpus;
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

result<cluster> parse_cluster_shorthand(const std::string& text, const std::string& where) {
  server_namer namer;
  auto servers = shorthand_servers(text, where, namer);
  if (!servers) return servers.err();
  return make_cluster(std::move(*servers));
}

result<cluster> load_cluster(const std::string& path) {
  try {
    auto doc = parse_toml_file(path);
    if (!doc) return doc.err();
    const toml::table& root = *doc;

    table_reader top(path, root, "a cluster file");
    top.allow_only({"cluster"});
    if (top.err()) return *top.err();
    const toml::node* cnode = root.get("cluster");
    if (!cnode) return input_error(path, 0, "cluster", "missing table [cluster]");
    const toml::table* ct = cnode->as_table();
    if (!ct)
      return input_error(path, line_of(*cnode), "cluster",
                         std::string("expected a table, got ") + kind_name(cnode->type()));

    table_reader c(path, *ct, "[cluster]");
    c.allow_only({"name", "shorthand", "server"});
    c.str("name", false);
    const auto shorthand = c.str("shorthand", false);
    if (c.err()) return *c.err();

    server_namer namer;
    std::vector<server> servers;
    if (shorthand) {
      const std::string where = input_message(path, c.line("shorthand"), "shorthand", "");
      // input_message ends in ": " + what; drop the trailing separator for a prefix.
      auto sh = shorthand_servers(*shorthand, where.substr(0, where.size() - 2), namer);
      if (!sh) return sh.err();
      servers = std::move(*sh);
    }

    long long total_gpus = 0;
    for (const auto& sv : servers) total_gpus += sv.gpus;
    if (const toml::node* snode = ct->get("server")) {
      auto tables = tables_of(path, *snode, "cluster.server", c.table_line());
      if (!tables) return tables.err();
      for (const toml::table* st : *tables) {
        table_reader s(path, *st, "[[cluster.server]]");
        s.allow_only({"gpu_type", "gpus", "speed", "count", "name"});
        auto type = s.str("gpu_type", true);
        const auto gpus = s.integer("gpus", true, 1, INT_MAX, "a positive number of GPUs");
        const auto speed = s.number(
            "speed", false, [](double v) { return v > 0; }, "a positive speed factor");
        const auto count = s.integer("count", false, 1, 1 << 20, "a positive number of servers");
        const auto name = s.str("name", false);
        if (s.err()) return *s.err();
        const std::string t = detail::to_lower(detail::trim(*type));
        if (t.empty()) return input_error(path, s.line("gpu_type"), "gpu_type", "empty GPU type");
        const long long n = count.value_or(1);
        total_gpus += n * *gpus;
        if (total_gpus > max_cluster_gpus)
          return input_error(
              path, s.line(count ? "count" : "gpus"), count ? "count" : "gpus",
              "the cluster would have more than " + std::to_string(max_cluster_gpus) + " GPUs");
        for (long long k = 0; k < n; ++k) {
          server sv;
          sv.gpu_type = t;
          sv.gpus = static_cast<int>(*gpus);
          sv.speed = speed.value_or(1.0);
          if (name) {
            sv.name = n == 1 ? *name : *name + "-" + std::to_string(k);
            if (!namer.claim(sv.name))
              return input_error(path, s.line("name"), "name",
                                 "duplicate server name " + detail::quoted(sv.name));
          } else {
            sv.name = namer.next(t);
            namer.claim(sv.name);
          }
          servers.push_back(std::move(sv));
        }
      }
    }
    if (servers.empty())
      return input_error(path, c.table_line(), "cluster",
                         "no servers; give 'shorthand' or [[cluster.server]] entries");
    return make_cluster(std::move(servers));
  } catch (const std::exception& e) {
    return error{error_kind::internal, path + ": " + e.what()};
  }
}

namespace {

/// What the run-only keys of one [[job]] table hold (see load_run_jobs).
struct run_extras {
  std::string kind;
  std::optional<long long> seed;
  std::optional<double> step_time;
  std::optional<double> target_loss;
  train::fork_merge_rule merge = train::fork_merge_rule::mean;
  std::map<std::string, double> config;
};

/// Reads a job-set file. With `extras` (a run's job set), the run keys are accepted, `kind` is
/// required, `job_type` defaults to the kind and one run_extras per job is appended.
result<std::vector<job>> load_jobs_impl(const std::string& path, const throughput_table* table,
                                        std::vector<run_extras>* extras,
                                        const std::vector<std::string>* known_kinds) {
  try {
    auto doc = parse_toml_file(path);
    if (!doc) return doc.err();
    const toml::table& root = *doc;

    table_reader top(path, root, "a job-set file");
    top.allow_only({"job"});
    if (top.err()) return *top.err();
    const toml::node* jnode = root.get("job");
    if (!jnode) return input_error(path, 0, "job", "no [[job]] entries");
    auto tables = tables_of(path, *jnode, "job", 0);
    if (!tables) return tables.err();
    if (tables->empty()) return input_error(path, 0, "job", "no [[job]] entries");

    std::vector<job> jobs;
    std::map<job_id, int> id_lines;
    for (std::size_t i = 0; i < tables->size(); ++i) {
      table_reader r(path, *(*tables)[i], "[[job]]");
      if (extras)
        r.allow_only({"job_type", "scale_factor", "total_steps", "arrival", "priority_weight",
                      "slo", "id", "acceptable_gpus", "kind", "seed", "step_time", "target_loss",
                      "merge", "config"});
      else
        r.allow_only({"job_type", "scale_factor", "total_steps", "arrival", "priority_weight",
                      "slo", "id", "acceptable_gpus"});
      run_extras ex;
      if (extras) {
        const auto kind = r.str("kind", true);
        const auto seed = r.integer("seed", false, 0, LLONG_MAX, "a non-negative integer");
        const auto step_time = r.number(
            "step_time", false, [](double v) { return v > 0 && v <= 3600; },
            "a positive number of seconds (at most 3600)");
        const auto target_loss = r.number(
            "target_loss", false, [](double v) { return v > 0; }, "a positive training loss");
        const auto merge = r.str("merge", false);
        if (r.err()) return *r.err();
        if (merge) {
          const auto rule = train::parse_fork_merge_rule(*merge);
          if (!rule)
            return input_error(path, r.line("merge"), "merge",
                               "unknown merge rule " + detail::quoted(*merge) + " (known: " +
                                   train::fork_merge_rule_names() + ")");
          ex.merge = *rule;
        }
        ex.target_loss = target_loss;
        ex.kind = *kind;
        ex.seed = seed;
        ex.step_time = step_time;
        if (known_kinds && std::find(known_kinds->begin(), known_kinds->end(), ex.kind) ==
                               known_kinds->end()) {
          std::string list;
          for (const auto& k : *known_kinds) list += (list.empty() ? "" : ", ") + k;
          return input_error(path, r.line("kind"), "kind",
                             "unknown job kind " + detail::quoted(ex.kind) + " (known: " + list +
                                 ")");
        }
        if (const toml::node* cn = (*tables)[i]->get("config")) {
          const auto* ct = cn->as_table();
          if (!ct)
            return input_error(path, line_of(*cn), "config",
                               std::string("expected a table of numbers, got ") +
                                   kind_name(cn->type()));
          for (auto&& [k, v] : *ct) {
            const std::string field = "config." + std::string(k.str());
            if (const auto* iv = v.as_integer())
              ex.config[std::string(k.str())] = static_cast<double>(iv->get());
            else if (const auto* fv = v.as_floating_point())
              ex.config[std::string(k.str())] = fv->get();
            else
              return input_error(path, line_of(v), field,
                                 std::string("expected a number, got ") + kind_name(v.type()));
          }
        }
      }
      const auto type = r.str("job_type", extras == nullptr);
      const auto scale = r.integer("scale_factor", false, 1, INT_MAX, "a positive integer");
      const auto steps = r.number(
          "total_steps", true, [](double v) { return v > 0; }, "a positive number");
      const auto arrival = r.number(
          "arrival", false, [](double v) { return v >= 0; }, "a non-negative number of seconds");
      const auto weight = r.number(
          "priority_weight", false, [](double v) { return v > 0; }, "a positive number");
      const auto slo = r.number(
          "slo", false, [](double v) { return v == -1 || v > 0; },
          "-1 (none) or a positive number of seconds");
      const auto id = r.integer("id", false, 0, LLONG_MAX, "a non-negative integer");
      if (r.err()) return *r.err();
      std::vector<int> acceptable;  // Hops' requirement set (optional)
      if (const toml::node* an = (*tables)[i]->get("acceptable_gpus")) {
        const auto* arr = an->as_array();
        if (!arr)
          return input_error(path, line_of(*an), "acceptable_gpus",
                             std::string("expected an array of positive GPU counts, got ") +
                                 kind_name(an->type()));
        for (const auto& e : *arr) {
          const auto* iv = e.as_integer();
          if (!iv || iv->get() <= 0 || iv->get() > INT_MAX)
            return input_error(path, line_of(*an), "acceptable_gpus",
                               "expected positive GPU counts, got " +
                                   (iv ? std::to_string(iv->get())
                                       : std::string(kind_name(e.type()))));
          acceptable.push_back(static_cast<int>(iv->get()));
        }
        if (acceptable.empty())
          return input_error(path, line_of(*an), "acceptable_gpus",
                             "expected at least one GPU count");
      }

      job j;
      j.job_type = type ? *type : ex.kind;
      if (detail::trim(j.job_type).empty())
        return input_error(path, r.line("job_type"), "job_type", "empty job type");
      j.scale_factor = static_cast<int>(scale.value_or(1));
      j.total_steps = *steps;
      j.arrival = arrival.value_or(0.0);
      j.priority_weight = weight.value_or(1.0);
      j.slo = slo.value_or(-1.0);
      j.acceptable_gpus = std::move(acceptable);
      j.id = id ? static_cast<job_id>(*id) : static_cast<job_id>(i);
      const int id_line = id ? r.line("id") : r.table_line();
      if (auto [it, fresh] = id_lines.emplace(j.id, id_line); !fresh)
        return input_error(path, id_line, "id",
                           "duplicate job id " + std::to_string(j.id) + " (also used at line " +
                               std::to_string(it->second) + ")");
      if (table && !table->knows(job_key{j.job_type, j.scale_factor}))
        return input_error(path, r.line("job_type"), "job_type",
                           "unknown job type " + detail::quoted(j.job_type) + " at scale " +
                               std::to_string(j.scale_factor));
      if (extras && std::floor(j.total_steps) != j.total_steps)
        return input_error(path, r.line("total_steps"), "total_steps",
                           "expected a whole number of steps in a run's job set, got " +
                               detail::format_shortest(j.total_steps));
      jobs.push_back(std::move(j));
      if (extras) extras->push_back(std::move(ex));
    }
    return jobs;
  } catch (const std::exception& e) {
    return error{error_kind::internal, path + ": " + e.what()};
  }
}

}  // namespace

result<std::vector<job>> load_jobs(const std::string& path, const throughput_table* table) {
  return load_jobs_impl(path, table, nullptr, nullptr);
}

result<std::vector<run_job>> load_run_jobs(const std::string& path,
                                           const std::vector<std::string>* known_kinds) {
  std::vector<run_extras> extras;
  auto jobs = load_jobs_impl(path, nullptr, &extras, known_kinds);
  if (!jobs) return jobs.err();
  std::vector<run_job> out;
  out.reserve(jobs->size());
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    run_job rj;
    rj.spec = std::move((*jobs)[i]);
    rj.kind = std::move(extras[i].kind);
    rj.seed = extras[i].seed ? static_cast<std::uint64_t>(*extras[i].seed)
                             : static_cast<std::uint64_t>(rj.spec.id) + 1;
    rj.step_time = extras[i].step_time.value_or(rj.step_time);
    rj.target_loss = extras[i].target_loss.value_or(0.0);
    rj.merge = extras[i].merge;
    rj.config = std::move(extras[i].config);
    out.push_back(std::move(rj));
  }
  return out;
}

}  // namespace tessera
