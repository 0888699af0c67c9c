/// @file sim_bench.cpp
/// Wall time of whole simulations on Gavel's setting: 36 V100 + 36 P100 + 36 K80 (4 GPUs per
/// server), 360 s rounds, generated single-GPU jobs at a given rate, stopping once jobs
/// 4000-4999 have finished. Prints one JSON line per (policy, rate). `--cluster` takes another
/// cluster shorthand, `--multi-gpu` draws scale factors 1/2/4/8, and `--all` runs until every
/// job has finished (no window); each line then also gives simulated seconds per wall second
/// and the process's peak resident memory so far.
///
/// `--grid` runs the scale grid instead: for each cluster (--cluster, repeatable), seed
/// (--seeds, "1-5") and load (--loads, jobs per hour per GPU, "0.03,0.05,0.08"), each policy
/// runs a generated multi-GPU trace of --jobs-per-gpu x GPUs jobs to its end, each cell in a
/// child process of its own (up to --parallel at once), so its CPU time (user + system) and
/// peak RSS are the cell's alone. One JSON line per cell, then a Markdown table.
///
/// usage: bench_sim_bench [--rate R] [--jobs N] [--policy P] [--seed S] [--repeat K]
///                        [--cluster SPEC] [--multi-gpu] [--all]
///        bench_sim_bench --grid [--policy P]... [--cluster SPEC]... [--seeds A-B]
///                        [--loads L,L,...] [--jobs-per-gpu N] [--parallel K]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench_cli.hpp"

#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

namespace {

/// One cell of the grid: a cluster, a seed, a load and a policy.
struct grid_cell {
  std::string cluster, policy;
  std::uint64_t seed = 1;
  double load = 0.05;  ///< jobs per hour per GPU
};

struct grid_options {
  std::vector<std::string> clusters, policies;
  std::vector<std::uint64_t> seeds;
  std::vector<double> loads;
  double jobs_per_gpu = 10;
  int parallel = 1;
};

/// What a cell's child process sends back over its pipe (plain bytes) and the parent adds.
struct cell_outcome {
  int gpus = 0, jobs = 0, finished = 0;
  double rate_per_hour = 0, sim_wall_s = 0, avg_active = 0, avg_jct_h = 0;
  std::size_t rounds = 0;
  char error[200] = {};                           ///< empty when the cell ran
  double cpu_s = 0, wall_s = 0, peak_rss_mb = 0;  ///< the parent's, from wait4
};

cell_outcome failed(const std::string& why) {
  cell_outcome out;
  std::snprintf(out.error, sizeof out.error, "%s", why.c_str());
  return out;
}

/// Runs one cell to its end in this process.
cell_outcome run_cell(const grid_cell& c, double jobs_per_gpu) {
  auto table = throughput_table::load_bundled();
  auto templates = bundled_job_templates();
  auto cl = parse_cluster_shorthand(c.cluster, "grid");
  auto pol = make_policy(c.policy);
  if (!table || !templates || !cl || !pol) return failed("cannot load the cell's inputs");
  trace_gen_config g;
  g.rate_per_hour = c.load * cl->total_gpus();
  g.num_jobs = static_cast<int>(jobs_per_gpu * cl->total_gpus());
  g.seed = c.seed;
  g.multi_gpu = true;
  auto jobs = generate_trace(g, templates.value(), table.value());
  if (!jobs) return failed(jobs.err().message);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = simulate(cl.value(), table.value(), jobs.value(), *pol.value(), sim_config{});
  cell_outcome out;
  out.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!res) return failed(res.err().message);
  const auto m = compute_metrics(res.value());
  for (const auto& r : res->rounds) out.avg_active += r.active_jobs;
  if (!res->rounds.empty()) out.avg_active /= static_cast<double>(res->rounds.size());
  out.gpus = cl->total_gpus();
  out.jobs = g.num_jobs;
  out.rate_per_hour = g.rate_per_hour;
  out.rounds = res->rounds.size();
  out.avg_jct_h = m.avg_jct / 3600;
  out.finished = m.finished;
  return out;
}

/// A running cell: its child and the pipe its outcome comes back on.
struct running_cell {
  grid_cell cell;
  pid_t pid = -1;
  int fd = -1;
  std::chrono::steady_clock::time_point started;
};

running_cell start_cell(const grid_cell& c, double jobs_per_gpu) {
  int p[2];
  if (::pipe(p) != 0) std::exit(1);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    const cell_outcome out = run_cell(c, jobs_per_gpu);
    const bool ok = ::write(p[1], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
    ::_exit(ok ? 0 : 1);
  }
  ::close(p[1]);
  return {c, pid, p[0], std::chrono::steady_clock::now()};
}

/// Waits for `r`'s child; prints its JSON line and returns its outcome.
cell_outcome finish_cell(const running_cell& r) {
  cell_outcome out;
  std::size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&out);
  for (ssize_t n; got < sizeof out && (n = ::read(r.fd, bytes + got, sizeof out - got)) > 0;)
    got += static_cast<std::size_t>(n);
  ::close(r.fd);
  if (got != sizeof out) out = failed("the cell's process died");
  int status = 0;
  rusage ru{};
  ::wait4(r.pid, &status, 0, &ru);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.started).count();
  out.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  out.peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  std::printf(
      "{\"bench\":\"sim_grid\",\"policy\":\"%s\",\"seed\":%llu,\"load\":%.3f,\"cpu_s\":%.2f,"
      "\"wall_s\":%.2f,\"peak_rss_mb\":%.1f,\"gpus\":%d,\"jobs\":%d,\"rate_per_hour\":%.1f,"
      "\"sim_wall_s\":%.2f,\"rounds\":%zu,\"avg_active_jobs\":%.1f,\"avg_jct_h\":%.3f,"
      "\"finished\":%d,\"error\":\"%s\"}\n",
      r.cell.policy.c_str(), static_cast<unsigned long long>(r.cell.seed), r.cell.load, out.cpu_s,
      out.wall_s, out.peak_rss_mb, out.gpus, out.jobs, out.rate_per_hour, out.sim_wall_s,
      out.rounds, out.avg_active, out.avg_jct_h, out.finished, out.error);
  std::fflush(stdout);
  return out;
}

int run_grid(const grid_options& o) {
  std::vector<grid_cell> cells;
  for (const auto& cl : o.clusters)
    for (double load : o.loads)
      for (auto seed : o.seeds)
        for (const auto& p : o.policies) cells.push_back({cl, p, seed, load});
  std::vector<running_cell> running;
  std::vector<cell_outcome> outcomes;  // in start order: the table's order
  std::size_t next = 0;
  while (next < cells.size() || !running.empty()) {
    while (next < cells.size() && static_cast<int>(running.size()) < std::max(1, o.parallel))
      running.push_back(start_cell(cells[next++], o.jobs_per_gpu));
    outcomes.push_back(finish_cell(running.front()));
    running.erase(running.begin());
  }
  std::printf(
      "\n| GPUs / jobs | policy | load (jobs/h/GPU) | seed | rounds | avg active jobs | "
      "CPU s | wall s | peak RSS MB | avg JCT h |\n|---|---|---:|---:|---:|---:|---:|---:|"
      "---:|---:|\n");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& c = cells[i];
    const auto& out = outcomes[i];
    std::printf("| %d / %d | %s | %.3f | %llu | %zu | %.1f | %.2f | %.2f | %.1f | %.3f |%s\n",
                out.gpus, out.jobs, c.policy.c_str(), c.load,
                static_cast<unsigned long long>(c.seed), out.rounds, out.avg_active, out.cpu_s,
                out.wall_s, out.peak_rss_mb, out.avg_jct_h, out.error[0] ? " failed" : "");
  }
  return 0;
}

/// `--grid`'s options from argv (the first is --grid); exits 2 on a bad one.
grid_options parse_grid(int argc, char** argv) {
  grid_options o;
  std::uint64_t first = 1, last = 5;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--policy")
      o.policies.push_back(bench::option_value(argc, argv, i));
    else if (a == "--cluster")
      o.clusters.push_back(bench::option_value(argc, argv, i));
    else if (a == "--seeds") {
      const std::string v = bench::option_value(argc, argv, i);
      const auto dash = v.find('-');
      first = std::stoull(v.substr(0, dash));
      last = dash == std::string::npos ? first : std::stoull(v.substr(dash + 1));
    } else if (a == "--loads")
      o.loads = bench::parse_list<double>(bench::option_value(argc, argv, i));
    else if (a == "--jobs-per-gpu")
      o.jobs_per_gpu = std::stod(bench::option_value(argc, argv, i));
    else if (a == "--parallel")
      o.parallel = std::stoi(bench::option_value(argc, argv, i));
    else {
      std::fprintf(stderr, "bench_sim_bench --grid: unknown option %s (see the file comment)\n",
                   a.c_str());
      std::exit(2);
    }
  }
  for (auto s = first; s <= last; ++s) o.seeds.push_back(s);
  if (o.policies.empty()) o.policies = {"max_min_fairness_perf"};
  if (o.clusters.empty())
    o.clusters = {"344 v100 : 340 p100 : 340 k80, 4 per server",
                  "3336 v100 : 3332 p100 : 3332 k80, 4 per server"};
  if (o.loads.empty()) o.loads = {0.03, 0.05, 0.08};
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--grid") return run_grid(parse_grid(argc, argv));
  double rate = 5.6;
  int num_jobs = 5000, repeat = 3;
  std::uint64_t seed = 1;
  std::vector<std::string> policies;
  std::string cluster_spec = "36 v100 : 36 p100 : 36 k80, 4 per server";
  bool multi_gpu = false, all_jobs = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--rate")
      rate = std::stod(next());
    else if (a == "--jobs")
      num_jobs = std::stoi(next());
    else if (a == "--policy")
      policies.push_back(next());
    else if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--repeat")
      repeat = std::stoi(next());
    else if (a == "--cluster")
      cluster_spec = next();
    else if (a == "--multi-gpu")
      multi_gpu = true;
    else if (a == "--all")
      all_jobs = true;
    else {
      std::cerr << "usage: bench_sim_bench [--rate R] [--jobs N] [--policy P]... [--seed S] "
                   "[--repeat K] [--cluster SPEC] [--multi-gpu] [--all]\n";
      return a == "--help" ? 0 : 2;
    }
  }
  if (policies.empty()) policies = {"max_min_fairness_perf", "max_min_fairness"};
  auto table = throughput_table::load_bundled();
  auto templates = bundled_job_templates();
  auto cl = parse_cluster_shorthand(cluster_spec, "bench");
  if (!table || !templates || !cl) {
    std::cerr << "bench: cannot load bundled inputs\n";
    return 1;
  }
  trace_gen_config g;
  g.rate_per_hour = rate;
  g.num_jobs = num_jobs;
  g.seed = seed;
  g.multi_gpu = multi_gpu;
  auto jobs = generate_trace(g, templates.value(), table.value());
  if (!jobs) {
    std::cerr << jobs.err().message << '\n';
    return 1;
  }
  for (const auto& name : policies) {
    std::vector<double> secs;
    double simulated = 0;
    metrics m;
    for (int r = 0; r < repeat; ++r) {
      auto pol = make_policy(name);
      if (!pol) {
        std::cerr << pol.err().message << '\n';
        return 2;
      }
      sim_config cfg;
      if (!all_jobs) {
        cfg.window_begin = std::max(0, num_jobs - 1000);
        cfg.window_end = num_jobs - 1;
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto res = simulate(cl.value(), table.value(), jobs.value(), *pol.value(), cfg);
      const auto t1 = std::chrono::steady_clock::now();
      if (!res) {
        std::cerr << res.err().message << '\n';
        return 1;
      }
      secs.push_back(std::chrono::duration<double>(t1 - t0).count());
      m = compute_metrics(res.value(), cfg.window_begin, cfg.window_end);
      simulated = res->rounds.empty() ? 0.0 : res->end_time - res->rounds.front().start;
    }
    std::sort(secs.begin(), secs.end());
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        "{\"bench\":\"sim\",\"policy\":\"%s\",\"rate_per_hour\":%.2f,\"jobs\":%d,\"seed\":%llu,"
        "\"repeats\":%d,\"wall_s_median\":%.3f,\"wall_s_min\":%.3f,\"rounds\":%d,"
        "\"avg_jct_window_h\":%.2f,\"avg_jct_h\":%.2f,\"finished\":%d,\"gpus\":%d,"
        "\"sim_s_per_wall_s\":%.0f,\"peak_rss_mb\":%.1f}\n",
        name.c_str(), rate, num_jobs, static_cast<unsigned long long>(seed), repeat,
        secs[secs.size() / 2], secs.front(), m.rounds, m.avg_jct_window / 3600, m.avg_jct / 3600,
        m.finished, cl->total_gpus(), simulated / secs[secs.size() / 2], ru.ru_maxrss / 1024.0);
    std::fflush(stdout);
  }
  return 0;
}
