#include "launcher/sweep_cells.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "launcher/trace_out.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/workload/trace.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace tessera::cli {

std::string number_name(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string shell_quote(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789_./=:,+-") == std::string::npos;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {

std::string trace_path(const sweep_plan& p, double rate, double seed) {
  return (fs::path(p.out_dir) / "traces" /
          ("r" + number_name(rate) + "_s" + number_name(seed) + ".trace"))
      .string();
}

std::string cell_path(const sweep_plan& p, const std::string& name, const char* ext) {
  return (fs::path(p.out_dir) / "cells" / (name + ext)).string();
}

trace_gen_config trace_config(const sweep_plan& p, double rate, double seed) {
  trace_gen_config cfg;
  cfg.num_jobs = p.jobs;
  cfg.rate_per_hour = rate;
  cfg.seed = static_cast<std::uint64_t>(seed);
  cfg.multi_gpu = p.multi_gpu;
  return cfg;
}

}  // namespace

std::vector<sweep_cell> make_cells(const sweep_plan& p) {
  std::vector<sweep_cell> cells;
  if (!p.traces.empty()) {
    for (const auto& pol : p.policies)
      for (const auto& t : p.traces)
        for (double len : p.rounds) {
          sweep_cell c;
          c.policy = pol;
          c.round_length = len;
          c.workload = fs::path(t).stem().string();
          c.name = pol + "_" + c.workload + "_L" + number_name(len);
          c.trace = t;
          cells.push_back(std::move(c));
        }
    return cells;
  }
  for (const auto& pol : p.policies)
    for (double rate : p.rates)
      for (double seed : p.seeds)
        for (double len : p.rounds) {
          sweep_cell c;
          c.policy = pol;
          c.rate = rate;
          c.seed = static_cast<std::uint64_t>(seed);
          c.round_length = len;
          c.name =
              pol + "_r" + number_name(rate) + "_s" + number_name(seed) + "_L" + number_name(len);
          c.trace = trace_path(p, rate, seed);
          c.workload = fs::path(c.trace).stem().string();
          cells.push_back(std::move(c));
        }
  return cells;
}

std::string cell_command(const sweep_plan& p, const sweep_cell& c) {
  const std::string exe = shell_quote(p.self.empty() ? "tessera" : p.self);
  const std::string trace = shell_quote(fs::absolute(c.trace).string());
  const std::string sim = exe + " simulate --trace " + trace + " --policy " +
                          shell_quote(c.policy) + " --round-length " + number_name(c.round_length) +
                          p.simulate_args;
  if (!p.traces.empty()) return sim;  // a given trace: nothing to generate
  std::string gen = exe + " trace generate --jobs " + std::to_string(p.jobs) + " --rate " +
                    number_name(c.rate) + " --seed " + std::to_string(c.seed) +
                    (p.multi_gpu ? " --multi-gpu" : "") + " --output " + trace;
  return gen + " && " + sim;
}

status write_atomically(const std::string& path, const std::string& text) {
  // A name of this process and thread: concurrent writers never share a temporary file.
  std::ostringstream tmp;
  tmp << path << ".tmp." << ::getpid() << '.' << std::this_thread::get_id();
  {
    std::ofstream f(tmp.str(), std::ios::trunc);
    if (!f) return error{error_kind::io, tmp.str() + ": cannot open for writing"};
    f << text;
    f.close();
    if (!f) return error{error_kind::io, tmp.str() + ": write failed"};
  }
  std::error_code ec;
  fs::rename(tmp.str(), path, ec);
  if (ec) {
    fs::remove(tmp.str(), ec);
    return error{error_kind::io, path + ": cannot rename into place"};
  }
  return {};
}

const std::vector<std::string>& sweep_csv_columns() {
  static const std::vector<std::string> cols = {
      "policy",        "rate_per_hour", "seed",       "trace",       "round_length",
      "jobs",          "finished",      "complete",   "avg_jct_h",   "avg_jct_window_h",
      "window_jobs",   "makespan_h",    "avg_wait_h", "utilisation", "ftf_avg",
      "ftf_max",       "lr_avg",        "lr_max",     "lre_avg",     "lre_max",
      "fragmentation", "rounds",        "command"};
  return cols;
}

bool sweep_csv_optional(const std::string& column) {
  return column == "lre_avg" || column == "lre_max" || column == "trace";
}

std::map<std::string, json> load_finished_cells(const sweep_plan& p) {
  std::map<std::string, json> done;
  for (const auto& c : p.cells) {
    std::ifstream f(cell_path(p, c.name, ".json"));
    if (!f) continue;
    std::stringstream text;
    text << f.rdbuf();
    auto j = json::parse(text.str(), nullptr, false);
    bool whole = j.is_object();
    for (const auto& col : sweep_csv_columns())
      whole = whole && (j.contains(col) || sweep_csv_optional(col));
    if (whole) done[c.name] = std::move(j);
  }
  return done;
}

void remove_leftovers(const sweep_plan& p) {
  for (const char* sub : {"cells", "traces"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(p.out_dir) / sub, ec)) {
      const auto name = e.path().filename().string();
      const bool part = name.size() > 5 && name.compare(name.size() - 5, 5, ".part") == 0;
      if (part || name.find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
    }
  }
}

status generate_traces(const sweep_plan& p, const std::map<std::string, json>& done) {
  std::set<std::string> made;
  for (const auto& c : p.cells) {
    if (!p.traces.empty()) return {};  // given traces: nothing to generate
    if (done.count(c.name) || made.count(c.trace)) continue;
    made.insert(c.trace);
    std::error_code ec;
    if (fs::exists(c.trace, ec)) continue;  // whole: written under another name, then renamed
    if (auto st = write_trace_file(trace_config(p, c.rate, static_cast<double>(c.seed)),
                                   p.templates, p.base.table, c.trace);
        !st)
      return st;
  }
  return {};
}

namespace {

double hours(double seconds) { return seconds / 3600; }

/// The cell's record: coordinates, metrics (times in hours), command and wall seconds.
json cell_record(const sweep_plan& p, const sweep_cell& c, const schedule_result& r,
                 double seconds) {
  const auto m = compute_metrics(r, p.base.cfg.window_begin, p.base.cfg.window_end);
  return json{{"cell", c.name},
              {"policy", c.policy},
              {"rate_per_hour", c.rate},
              {"seed", c.seed},
              {"trace", c.workload},
              {"round_length", c.round_length},
              {"jobs", m.jobs},
              {"finished", m.finished},
              {"complete", r.complete},
              {"avg_jct_h", hours(m.avg_jct)},
              {"avg_jct_window_h", hours(m.avg_jct_window)},
              {"window_jobs", m.window_jobs},
              {"makespan_h", hours(m.makespan)},
              {"avg_wait_h", hours(m.avg_wait)},
              {"utilisation", m.utilisation},
              {"ftf_avg", m.ftf_avg},
              {"ftf_max", m.ftf_max},
              {"lr_avg", m.lr_avg},
              {"lr_max", m.lr_max},
              {"lre_avg", m.lre_avg},
              {"lre_max", m.lre_max},
              {"fragmentation", m.fragmentation},
              {"rounds", m.rounds},
              {"command", cell_command(p, c)},
              {"cell_seconds", seconds}};
}

}  // namespace

result<json> run_cell(const sweep_plan& p, const sweep_cell& c, progress_meter& meter) {
  const auto t0 = std::chrono::steady_clock::now();
  sim_inputs in;
  in.cl = p.base.cl;
  in.table = p.base.table;
  in.cfg = p.base.cfg;
  in.cfg.round_length = c.round_length;
  in.policy_args = p.base.policy_args;
  auto jobs = read_trace(c.trace, &in.table);
  if (!jobs) {
    meter.done(c.name);
    return jobs.err();
  }
  in.jobs = std::move(jobs.value());
  auto r = simulate_policy(in, c.policy, meter, c.name);
  if (!r) return r.err();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json rec = cell_record(p, c, r.value(), secs);
  if (p.keep_jobs) {
    std::ostringstream cs;
    write_jobs_csv(cs, r.value());
    if (auto st = write_atomically(cell_path(p, c.name, ".jobs.csv"), cs.str()); !st)
      return st.err();
  }
  if (auto st = write_atomically(cell_path(p, c.name, ".json"), rec.dump(1) + "\n"); !st)
    return st.err();
  return rec;
}

sweep_run run_cells(const sweep_plan& p, std::map<std::string, json>& done, unsigned workers,
                    progress_meter& meter) {
  std::vector<const sweep_cell*> todo;
  for (const auto& c : p.cells)
    if (!done.count(c.name)) todo.push_back(&c);
  sweep_run out;
  std::mutex mu;
  std::size_t next = 0;
  auto worker = [&] {
    while (true) {
      const sweep_cell* c = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= todo.size()) return;
        c = todo[next++];
      }
      auto r = run_cell(p, *c, meter);
      std::lock_guard<std::mutex> lock(mu);
      if (!r) {
        out.failures.push_back("cell " + c->name + ": " + r.err().message);
        continue;
      }
      ++out.ran;
      out.cell_seconds += r->at("cell_seconds").get<double>();
      done[c->name] = std::move(r.value());
      if (auto st = write_aggregate(p, done); !st) out.failures.push_back(st.err().message);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<std::size_t>(workers, todo.size()); ++t)
    threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  return out;
}

namespace {

/// One CSV field: numbers in their shortest exact form, text quoted when it must be.
std::string csv_field(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number()) return number_name(v.get<double>());
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

status write_aggregate(const sweep_plan& p, const std::map<std::string, json>& done) {
  std::ostringstream csv;
  const auto& cols = sweep_csv_columns();
  for (std::size_t i = 0; i < cols.size(); ++i) csv << (i ? "," : "") << cols[i];
  csv << '\n';
  json cells = json::array();
  for (const auto& c : p.cells) {
    auto it = done.find(c.name);
    if (it == done.end()) continue;
    for (std::size_t i = 0; i < cols.size(); ++i)
      csv << (i ? "," : "")
          << (it->second.contains(cols[i]) ? csv_field(it->second.at(cols[i])) : "");
    csv << '\n';
    cells.push_back(it->second);
  }
  const json all = {{"cells_planned", p.cells.size()}, {"cells", cells}};
  if (auto st = write_atomically((fs::path(p.out_dir) / "sweep.csv").string(), csv.str()); !st)
    return st;
  return write_atomically((fs::path(p.out_dir) / "sweep.json").string(), all.dump(1) + "\n");
}

void print_sweep_summary(std::ostream& out, const sweep_run& r, std::size_t resumed, double wall_s,
                         unsigned workers) {
  out << "tessera: sweep: " << r.ran << " cells run, " << resumed << " found finished, "
      << r.failures.size() << " failed; wall " << std::fixed << std::setprecision(1) << wall_s
      << " s";
  if (r.ran > 0) {
    const unsigned used = std::min<unsigned>(workers, static_cast<unsigned>(r.ran));
    const double ideal = r.cell_seconds / used;
    out << "; cells' sum " << r.cell_seconds << " s / " << used << " workers = " << ideal
        << " s (wall / that = " << std::setprecision(2) << wall_s / std::max(ideal, 1e-9) << ")";
  }
  out << '\n';
}

}  // namespace tessera::cli
