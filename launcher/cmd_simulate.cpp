/// @file cmd_simulate.cpp
/// `tessera simulate` and `tessera compare`.

#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "launcher/progress.hpp"
#include "launcher/sim_run.hpp"
#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/timeline.hpp"
#include "runtime/workload/trace.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// Options common to simulate and compare.
struct run_options {
  std::string cluster_file, cluster_spec, trace_file, table_file, window, json_out, csv_out;
  std::string restart_costs_file;
  std::string copy_efficiency = "on";
  std::vector<std::string> policy_args;
  double round_length = 360, restart_cost = 0, max_hours = 0, progress_every = 5;
  bool quiet = false, run_to_end = false, assume_consolidated = false;
};

void add_common(po::options_description& d, run_options& o) {
  d.add_options()("trace", po::value(&o.trace_file)->required(),
                  "trace file (Gavel's 10-field format), or a job-set file ending in .toml")(
      "cluster", po::value(&o.cluster_file), "cluster TOML file (default: config/gavel_108.toml)")(
      "cluster-spec", po::value(&o.cluster_spec),
      "cluster shorthand instead of a file, e.g. \"36 v100 : 36 p100 : 36 k80, 4 per server\"")(
      "throughputs", po::value(&o.table_file),
      "throughput table JSON (default: bundled Gavel table)")(
      "policy-arg", po::value(&o.policy_args)->composing(),
      "policy option key=value (repeatable; see `tessera policies`)")(
      "round-length", po::value(&o.round_length)->default_value(360.0), "round length in seconds")(
      "restart-cost", po::value(&o.restart_cost)->default_value(0.0),
      "seconds a job loses each time it starts on new GPUs")(
      "restart-costs", po::value(&o.restart_costs_file),
      "CSV of job_type,seconds: the restart cost of the types it names (a restart longer than "
      "a round goes on into the next while the job stays put)")(
      "assume-consolidated", po::bool_switch(&o.assume_consolidated),
      "Gavel's simulator's placement assumption: a multi-GPU job runs at its consolidated "
      "(one-server) throughput even when it spans servers, never at the table's "
      "\"_unconsolidated\" rate (default: spanning servers is charged, the physical choice; "
      "use this only to compare with Gavel's figures)")(
      "copy-efficiency", po::value(&o.copy_efficiency)->default_value("on"), copy_efficiency_help)(
      "window", po::value(&o.window), "job-id window for the windowed JCT, e.g. 4000-4999")(
      "run-to-end", po::bool_switch(&o.run_to_end),
      "with --window: keep simulating until every job finishes")(
      "max-hours", po::value(&o.max_hours)->default_value(0.0),
      "stop at this virtual time (0 = no limit)")("json", po::value(&o.json_out),
                                                  "write the metrics as JSON to this file")(
      "quiet,q", po::bool_switch(&o.quiet), "no progress on stderr")(
      "progress-interval", po::value(&o.progress_every)->default_value(5.0),
      "seconds between progress lines when stderr is not a terminal (a terminal shows a bar)")(
      "help,h", "show this help");
}

using inputs = sim_inputs;

/// Checks the numbers of the command line (bounds: launcher/common.hpp).
status check_numbers(const run_options& o) {
  namespace b = option_bounds;
  for (const auto& st :
       {check_option("--round-length", o.round_length, b::min_sim_round, b::max_sim_round,
                     "seconds"),
        check_option("--restart-cost", o.restart_cost, 0, b::max_restart_cost, "seconds"),
        check_option("--max-hours", o.max_hours, 0, b::max_hours, "hours; 0 = no limit"),
        check_option("--progress-interval", o.progress_every, 0.1, 3600, "seconds")})
    if (!st) return st;
  return {};
}

result<inputs> load_inputs(const run_options& o) {
  if (auto st = check_numbers(o); !st) return st.err();
  inputs in;
  auto table = load_table_arg(o.table_file);
  if (!table) return table.err();
  in.table = std::move(table.value());
  auto cl = load_cluster_arg(o.cluster_file, o.cluster_spec);
  if (!cl) return cl.err();
  in.cl = std::move(cl.value());
  // A job-set TOML file (which may carry acceptable_gpus) or a Gavel trace.
  const bool toml =
      o.trace_file.size() > 5 && o.trace_file.compare(o.trace_file.size() - 5, 5, ".toml") == 0;
  auto jobs = toml ? load_jobs(o.trace_file, &in.table) : read_trace(o.trace_file, &in.table);
  if (!jobs) return jobs.err();
  in.jobs = std::move(jobs.value());
  auto pa = parse_policy_args(o.policy_args);
  if (!pa) return pa.err();
  in.policy_args = pa.value();
  in.cfg.round_length = o.round_length;
  in.cfg.restart_cost = o.restart_cost;
  auto costs = load_restart_costs(o.restart_costs_file);
  if (!costs) return costs.err();
  in.cfg.restart_costs = std::move(costs.value());
  in.cfg.assume_consolidated = o.assume_consolidated;
  auto ce = parse_copy_efficiency(o.copy_efficiency);
  if (!ce) return ce.err();
  in.cfg.fork_efficiency = ce.value();
  if (o.max_hours > 0) in.cfg.max_time = o.max_hours * 3600;
  if (!o.window.empty()) {
    auto w = parse_window(o.window);
    if (!w) return w.err();
    in.cfg.window_begin = w->first;
    in.cfg.window_end = w->second;
    in.cfg.stop_after_window = !o.run_to_end;
  }
  return in;
}

/// A meter on stderr over `runs` simulations.
std::unique_ptr<progress_meter> make_meter(const run_options& o, int runs) {
  return std::make_unique<progress_meter>(
      !o.quiet, runs, runs == 1 ? "run" : "runs",
      std::chrono::milliseconds(std::lround(o.progress_every * 1000)));
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& args) {
  run_options o;
  std::string policy_name, timeline_out;
  po::options_description d("tessera simulate options");
  add_common(d, o);
  d.add_options()("policy", po::value(&policy_name)->default_value("max_min_fairness_perf"),
                  "policy name (see `tessera policies`)")("csv", po::value(&o.csv_out),
                                                          "write one CSV row per job to this file")(
      "timeline", po::value(&timeline_out),
      "write who ran where in each round to this file (JSON Lines; `tessera plot gantt`)");
  const char* usage =
      "usage: tessera simulate --trace FILE [--cluster FILE] [--policy NAME] [options]\n"
      "Runs one policy on a trace in the simulator and prints its metrics table.";
  if (int rc = parse_options(args, d, d, usage, std::cerr); rc >= 0) return rc;
  auto in = load_inputs(o);
  if (!in) return report(in.err());
  std::unique_ptr<timeline_file> timeline;
  if (!timeline_out.empty()) {
    auto f = timeline_file::open(timeline_out, in->cl, "simulate", policy_name, o.round_length);
    if (!f) return report(f.err());
    timeline = std::move(f.value());
  }
  auto meter = make_meter(o, 1);
  auto r = simulate_policy(in.value(), policy_name, *meter, policy_name,
                           timeline ? &timeline->recorder() : nullptr);
  meter->finish();
  if (!r) return report(r.err());
  if (timeline)
    if (auto st = timeline->close(); !st) return report(st.err());
  auto m = compute_metrics(r.value(), in->cfg.window_begin, in->cfg.window_end);
  print_metrics_table(std::cout, {m});
  if (!r->complete)
    std::cerr << "tessera: note: the simulation stopped before every job finished"
              << (static_cast<std::int64_t>(r->rounds.size()) >= in->cfg.max_rounds
                      ? " (it reached the limit of " + std::to_string(in->cfg.max_rounds) +
                            " rounds)"
                      : std::string())
              << "\n";
  if (!o.json_out.empty()) {
    std::ostringstream js;
    write_metrics_json(js, {m});
    if (auto st = write_text_file(o.json_out, js.str()); !st) return report(st.err());
  }
  if (!o.csv_out.empty()) {
    std::ostringstream cs;
    write_jobs_csv(cs, r.value());
    if (auto st = write_text_file(o.csv_out, cs.str()); !st) return report(st.err());
  }
  return exit_code::ok;
}

int cmd_compare(const std::vector<std::string>& args) {
  run_options o;
  std::vector<std::string> policies;
  std::string csv_dir;
  unsigned parallel = std::max(1u, std::thread::hardware_concurrency());
  po::options_description d("tessera compare options");
  add_common(d, o);
  d.add_options()("policies", po::value(&policies)->multitoken()->required(),
                  "policy names, space- or comma-separated")(
      "csv-dir", po::value(&csv_dir), "write <dir>/<policy>.csv per-job files")(
      "parallel", po::value(&parallel), "policies simulated at once (default: cores)");
  const char* usage =
      "usage: tessera compare --trace FILE --policies P1,P2,... [--cluster FILE] [options]\n"
      "Runs several policies on the same trace and prints one table.";
  if (int rc = parse_options(args, d, d, usage, std::cerr); rc >= 0) return rc;
  if (auto st = check_option("--parallel", parallel, 1, option_bounds::max_parallel); !st)
    return report(st.err());
  std::vector<std::string> names;
  for (const auto& p : policies) {
    std::stringstream ss(p);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) names.push_back(item);
  }
  for (const auto& n : names)  // fail fast on unknown names, before any simulation
    if (auto p = make_policy(n, {}, "--policy-arg"); !p && p.err().kind == error_kind::not_found)
      return report(p.err());
  auto in = load_inputs(o);
  if (!in) return report(in.err());
  auto meter = make_meter(o, static_cast<int>(names.size()));
  std::vector<std::unique_ptr<result<schedule_result>>> results(names.size());
  std::mutex mu;
  std::size_t next = 0;
  auto worker = [&] {
    while (true) {
      std::size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= names.size()) return;
        i = next++;
      }
      results[i] = std::make_unique<result<schedule_result>>(
          simulate_policy(in.value(), names[i], *meter, names[i]));
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < std::min<std::size_t>(parallel, names.size()); ++t)
    threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  meter->finish();
  std::vector<metrics> all;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!*results[i]) return report(results[i]->err());
    all.push_back(compute_metrics(results[i]->value(), in->cfg.window_begin, in->cfg.window_end));
    if (!csv_dir.empty()) {
      std::ostringstream cs;
      write_jobs_csv(cs, results[i]->value());
      if (auto st = write_text_file(csv_dir + "/" + names[i] + ".csv", cs.str()); !st)
        return report(st.err());
    }
  }
  print_metrics_table(std::cout, all);
  if (!o.json_out.empty()) {
    std::ostringstream js;
    write_metrics_json(js, all);
    if (auto st = write_text_file(o.json_out, js.str()); !st) return report(st.err());
  }
  return exit_code::ok;
}

}  // namespace tessera::cli
