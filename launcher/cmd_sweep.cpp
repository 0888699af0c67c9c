/// @file cmd_sweep.cpp
/// `tessera sweep`: policies x arrival rates x seeds (x round lengths) on one cluster, each
/// cell one simulation. The traces are generated once per (rate, seed) with `trace
/// generate`'s code; the cells run on -j worker threads (the simulator and the policies keep
/// no shared mutable state, as `compare` already relies on); each finished cell is written
/// atomically to <out>/cells/<cell>.json, so a rerun after an interruption skips it; the
/// aggregate <out>/sweep.csv and <out>/sweep.json are rewritten after every cell.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "launcher/progress.hpp"
#include "launcher/sim_run.hpp"
#include "launcher/sweep_cells.hpp"
#include "launcher/trace_out.hpp"
#include "policies/registry.hpp"
#include "runtime/core/input_limits.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/workload/trace.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace tessera::cli {

namespace {

/// Everything `tessera sweep` reads from its command line.
struct sweep_options {
  std::vector<std::string> policies, rates, seeds, rounds, policy_args, traces;
  std::string out_dir, cluster_file, cluster_spec, table_file, window, restart_costs_file;
  std::string copy_efficiency = "on";
  int jobs = 0;
  bool multi_gpu = false, run_to_end = false, quiet = false, keep_jobs = false;
  double restart_cost = 0, max_hours = 0, progress_every = 5;
  unsigned parallel = std::max(1u, std::thread::hardware_concurrency());
};

const char* const usage =
    "usage: tessera sweep --policies P1,P2 --rates R1,R2,... --jobs N --out DIR [--seeds S1,..]\n"
    "                     [--round-lengths L1,..] [--window A-B] [-j N] [options]\n"
    "       tessera sweep --policies P1,P2 --traces T1 T2 ... --out DIR [options]\n"
    "Simulates every policy x rate x seed (x round length) on one cluster. Traces are generated\n"
    "with Gavel's recipe (as `tessera trace generate`) into DIR/traces; each finished cell is\n"
    "kept in DIR/cells/<cell>.json, so running the same command again after an interruption\n"
    "only runs the cells left. DIR/sweep.csv and DIR/sweep.json hold every cell's metrics and\n"
    "the command that reproduces it. `tessera plot jct-rate --csv DIR/sweep.csv` draws them.\n"
    "With --traces, the cells are policies x the given traces (x round lengths) instead, each\n"
    "named by its trace's file stem (imported workloads, e.g. `trace import sia`).";

void add_options(po::options_description& d, sweep_options& o) {
  d.add_options()("policies", po::value(&o.policies)->multitoken()->required(),
                  "policy names, comma- or space-separated (see `tessera policies`), or "
                  "`all` for every registered policy")(
      "rates", po::value(&o.rates)->multitoken(),
      "arrival rates in jobs/hour, comma- or space-separated")(
      "traces", po::value(&o.traces)->multitoken(),
      "trace files to run instead of generated ones (not with --rates, --seeds, --jobs)")(
      "seeds", po::value(&o.seeds)->multitoken(), "trace seeds (default: 1)")(
      "round-lengths", po::value(&o.rounds)->multitoken(),
      "round lengths in seconds (default: 360)")("jobs,n", po::value(&o.jobs),
                                                 "jobs per generated trace")(
      "multi-gpu", po::bool_switch(&o.multi_gpu), "traces with multi-GPU jobs (scale 1/2/4/8)")(
      "out,o", po::value(&o.out_dir)->required(), "output directory (created; reused to resume)")(
      "parallel,j", po::value(&o.parallel), "cells simulated at once (default: cores)")(
      "window", po::value(&o.window), "job-id window for the windowed JCT, e.g. 4000-4999")(
      "run-to-end", po::bool_switch(&o.run_to_end),
      "with --window: keep simulating until every job finishes")(
      "cluster", po::value(&o.cluster_file), "cluster TOML file (default: config/gavel_108.toml)")(
      "cluster-spec", po::value(&o.cluster_spec), "cluster shorthand instead of a file")(
      "throughputs", po::value(&o.table_file), "throughput table JSON (default: bundled)")(
      "policy-arg", po::value(&o.policy_args)->composing(),
      "policy option key=value for every cell (repeatable)")(
      "restart-cost", po::value(&o.restart_cost)->default_value(0.0),
      "seconds a job loses each time it starts on new GPUs")(
      "restart-costs", po::value(&o.restart_costs_file),
      "CSV of job_type,seconds: the restart cost of the types it names")(
      "max-hours", po::value(&o.max_hours)->default_value(0.0),
      "stop each cell at this virtual time (0 = no limit)")(
      "copy-efficiency", po::value(&o.copy_efficiency)->default_value("on"), copy_efficiency_help)(
      "keep-jobs", po::bool_switch(&o.keep_jobs),
      "also write DIR/cells/<cell>.jobs.csv, one row per job (for `tessera plot cdf`)")(
      "quiet,q", po::bool_switch(&o.quiet), "no progress on stderr")(
      "progress-interval", po::value(&o.progress_every)->default_value(5.0),
      "seconds between progress lines when stderr is not a terminal (a terminal shows a bar)")(
      "help,h", "show this help");
}

/// Splits list options given comma- or space-separated (or repeated) into items.
std::vector<std::string> split_list(const std::vector<std::string>& given) {
  std::vector<std::string> out;
  for (const auto& g : given) {
    std::string item;
    for (char c : g + ",") {
      if (c == ',' || c == ' ') {
        if (!item.empty()) out.push_back(item);
        item.clear();
      } else {
        item += c;
      }
    }
  }
  return out;
}

/// Parses a list of numbers for `option`, each within [lo, hi], none repeated.
result<std::vector<double>> parse_numbers(const char* option, const std::vector<std::string>& items,
                                          double lo, double hi, const char* unit) {
  std::vector<double> out;
  for (const auto& it : items) {
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(it, &used);
      if (used != it.size()) throw std::invalid_argument(it);
    } catch (const std::exception&) {
      return error{error_kind::invalid_input,
                   std::string(option) + ": '" + it + "' is not a number"};
    }
    if (auto st = check_option(option, v, lo, hi, unit); !st) return st.err();
    if (std::find(out.begin(), out.end(), v) != out.end())
      return error{error_kind::invalid_input, std::string(option) + ": " + it + " repeats"};
    out.push_back(v);
  }
  if (out.empty()) return error{error_kind::invalid_input, std::string(option) + ": empty list"};
  return out;
}

/// The settings every cell shares besides its own coordinates, as text: a rerun into the same
/// directory must have the same, or its finished cells would not be this sweep's.
std::string settings_text(const sweep_options& o) {
  std::ostringstream os;
  os << "jobs " << o.jobs << "\nmulti-gpu " << o.multi_gpu << "\nwindow " << o.window
     << "\nrun-to-end " << o.run_to_end << "\ncluster " << o.cluster_file << "\ncluster-spec "
     << o.cluster_spec << "\nthroughputs " << o.table_file << "\nrestart-cost "
     << number_name(o.restart_cost) << "\nmax-hours " << number_name(o.max_hours)
     << "\ncopy-efficiency " << o.copy_efficiency << '\n';
  for (const auto& a : o.policy_args) os << "policy-arg " << a << '\n';
  if (!o.restart_costs_file.empty()) os << "restart-costs " << o.restart_costs_file << '\n';
  for (const auto& t : o.traces) os << "trace " << t << '\n';
  return os.str();
}

/// The command line options shared by every cell's reproducing `simulate` command.
std::string shared_simulate_args(const sweep_options& o) {
  std::string s;
  auto add = [&](const std::string& opt, const std::string& v) {
    if (!v.empty()) s += " " + opt + " " + shell_quote(v);
  };
  add("--cluster", o.cluster_file.empty() ? "" : fs::absolute(o.cluster_file).string());
  add("--cluster-spec", o.cluster_spec);
  add("--throughputs", o.table_file.empty() ? "" : fs::absolute(o.table_file).string());
  if (o.restart_cost > 0) add("--restart-cost", number_name(o.restart_cost));
  add("--restart-costs",
      o.restart_costs_file.empty() ? "" : fs::absolute(o.restart_costs_file).string());
  if (o.max_hours > 0) add("--max-hours", number_name(o.max_hours));
  if (o.copy_efficiency != "on") add("--copy-efficiency", o.copy_efficiency);
  add("--window", o.window);
  if (o.run_to_end) s += " --run-to-end";
  for (const auto& a : o.policy_args) add("--policy-arg", a);
  return s;
}

/// Cluster, table, templates, the simulation settings and the policy options.
status load_shared_inputs(const sweep_options& o, sweep_plan& p) {
  auto table = load_table_arg(o.table_file);
  if (!table) return table.err();
  p.base.table = std::move(table.value());
  auto cl = load_cluster_arg(o.cluster_file, o.cluster_spec);
  if (!cl) return cl.err();
  p.base.cl = std::move(cl.value());
  auto templates = bundled_job_templates();
  if (!templates) return templates.err();
  p.templates = std::move(templates.value());
  auto pa = parse_policy_args(o.policy_args);
  if (!pa) return pa.err();
  p.base.policy_args = pa.value();
  p.base.cfg.restart_cost = o.restart_cost;
  auto costs = load_restart_costs(o.restart_costs_file);
  if (!costs) return costs.err();
  p.base.cfg.restart_costs = std::move(costs.value());
  auto ce = parse_copy_efficiency(o.copy_efficiency);
  if (!ce) return ce.err();
  p.base.cfg.fork_efficiency = ce.value();
  if (o.max_hours > 0) p.base.cfg.max_time = o.max_hours * 3600;
  if (!o.window.empty()) {
    auto w = parse_window(o.window);
    if (!w) return w.err();
    p.base.cfg.window_begin = w->first;
    p.base.cfg.window_end = w->second;
    p.base.cfg.stop_after_window = !o.run_to_end;
  }
  return {};
}

/// The traces: generated (--rates, --seeds, --jobs) or given (--traces), not both.
status generated_or_given(const sweep_options& o, sweep_plan& p) {
  if (!o.traces.empty()) {
    if (!o.rates.empty() || !o.seeds.empty() || o.jobs != 0 || o.multi_gpu)
      return error{error_kind::invalid_input,
                   "--traces: not with --rates, --seeds, --jobs or --multi-gpu (those generate "
                   "traces)"};
    std::set<std::string> stems;
    for (const auto& t : split_list(o.traces)) {
      if (!fs::is_regular_file(t))
        return error{error_kind::invalid_input, t + ": no such trace file"};
      if (!stems.insert(fs::path(t).stem().string()).second)
        return error{error_kind::invalid_input, "--traces: two files named " +
                                                    fs::path(t).stem().string() +
                                                    " (cells are named by the file stem)"};
      p.traces.push_back(fs::absolute(t).string());
    }
    return {};
  }
  if (o.rates.empty() || o.jobs == 0)
    return error{error_kind::invalid_input, "give --rates and --jobs, or --traces"};
  auto rates =
      parse_numbers("--rates", split_list(o.rates), 0, limits::max_rate_per_hour, "jobs per hour");
  if (!rates) return rates.err();
  auto seeds = parse_numbers("--seeds",
                             o.seeds.empty() ? std::vector<std::string>{"1"} : split_list(o.seeds),
                             0, 4294967295.0, "whole number");
  if (!seeds) return seeds.err();
  for (double s : *seeds)
    if (s != std::floor(s))
      return error{error_kind::invalid_input, "--seeds: " + number_name(s) + " is not whole"};
  if (auto st =
          check_option("--jobs", o.jobs, 1, static_cast<double>(limits::max_trace_jobs), "jobs");
      !st)
    return st;
  p.rates = *rates;
  p.seeds = *seeds;
  return {};
}

/// Loads and checks everything the cells need; bad input is reported before any work.
result<sweep_plan> make_plan(const sweep_options& o) {
  namespace b = option_bounds;
  sweep_plan p;
  p.policies = split_list(o.policies);
  if (p.policies.empty()) return error{error_kind::invalid_input, "--policies: empty list"};
  if (p.policies == std::vector<std::string>{"all"}) {  // every registered policy, in order
    p.policies.clear();
    for (const auto& e : policy_registry()) p.policies.push_back(e.name);
  }
  for (const auto& n : p.policies)
    if (auto pol = make_policy(n, {}, "--policy-arg");
        !pol && pol.err().kind == error_kind::not_found)
      return pol.err();
  if (auto st = generated_or_given(o, p); !st) return st.err();
  auto rounds = parse_numbers(
      "--round-lengths", o.rounds.empty() ? std::vector<std::string>{"360"} : split_list(o.rounds),
      b::min_sim_round, b::max_sim_round, "seconds");
  if (!rounds) return rounds.err();
  for (const auto& st :
       {check_option("--parallel (-j)", o.parallel, 1, b::max_parallel),
        check_option("--restart-cost", o.restart_cost, 0, b::max_restart_cost, "seconds"),
        check_option("--max-hours", o.max_hours, 0, b::max_hours, "hours; 0 = no limit"),
        check_option("--progress-interval", o.progress_every, 0.1, 3600, "seconds")})
    if (!st) return st.err();
  p.rounds = *rounds;
  if (auto st = load_shared_inputs(o, p); !st) return st.err();
  p.self = self_exe();
  p.simulate_args = shared_simulate_args(o);
  p.out_dir = o.out_dir;
  p.jobs = o.jobs;
  p.multi_gpu = o.multi_gpu;
  p.keep_jobs = o.keep_jobs;
  p.cells = make_cells(p);
  return p;
}

/// Creates the output directories and pins the sweep's settings in DIR/settings.txt; a
/// directory of another sweep (other settings) is refused.
status prepare_dir(const sweep_options& o) {
  std::error_code ec;
  fs::create_directories(fs::path(o.out_dir) / "cells", ec);
  if (!ec) fs::create_directories(fs::path(o.out_dir) / "traces", ec);
  if (ec) return error{error_kind::io, o.out_dir + ": cannot create: " + ec.message()};
  const auto path = (fs::path(o.out_dir) / "settings.txt").string();
  const std::string want = settings_text(o);
  if (fs::exists(path)) {
    std::ifstream f(path);
    std::stringstream have;
    have << f.rdbuf();
    if (have.str() != want)
      return error{error_kind::invalid_input,
                   path +
                       ": this directory holds a sweep with other settings (jobs, window, "
                       "cluster, ...); use another --out or remove it"};
    return {};
  }
  return write_atomically(path, want);
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  sweep_options o;
  po::options_description d("tessera sweep options");
  add_options(d, o);
  if (int rc = parse_options(args, d, d, usage, std::cerr); rc >= 0) return rc;
  auto plan = make_plan(o);
  if (!plan) return report(plan.err());
  if (auto st = prepare_dir(o); !st) return report(st.err());
  const auto wall0 = std::chrono::steady_clock::now();
  remove_leftovers(*plan);
  auto done = load_finished_cells(*plan);
  if (auto st = generate_traces(*plan, done); !st) return report(st.err());
  progress_meter meter(!o.quiet, static_cast<int>(plan->cells.size()), "cells",
                       std::chrono::milliseconds(std::lround(o.progress_every * 1000)));
  meter.skip(static_cast<int>(done.size()));
  const std::size_t resumed = done.size();
  const auto ran = run_cells(*plan, done, o.parallel, meter);
  meter.finish();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (auto st = write_aggregate(*plan, done); !st) return report(st.err());
  print_sweep_summary(std::cerr, ran, resumed, wall, o.parallel);
  for (const auto& f : ran.failures) std::cerr << "tessera: " << f << '\n';
  return ran.failures.empty() ? exit_code::ok : exit_code::failed;
}

}  // namespace tessera::cli
