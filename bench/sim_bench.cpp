/// @file sim_bench.cpp
/// Wall time of whole simulations on Gavel's setting: 36 V100 + 36 P100 + 36 K80 (4 GPUs per
/// server), 360 s rounds, generated single-GPU jobs at a given rate, stopping once jobs
/// 4000-4999 have finished. Prints one JSON line per (policy, rate). `--cluster` takes another
/// cluster shorthand, `--multi-gpu` draws scale factors 1/2/4/8, and `--all` runs until every
/// job has finished (no window); each line then also gives simulated seconds per wall second
/// and the process's peak resident memory so far.
///
/// usage: bench_sim_bench [--rate R] [--jobs N] [--policy P] [--seed S] [--repeat K]
///                        [--cluster SPEC] [--multi-gpu] [--all]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

int main(int argc, char** argv) {
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
