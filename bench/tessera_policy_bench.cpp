/// @file tessera_policy_bench.cpp
/// Plan time per round of `tessera` (policies/tessera_policy.hpp), and of `hare` for
/// reference, at 2048 active jobs on 512 and 2048 GPUs.
///
/// Cluster: config/hops_512.toml (64 servers of 8 GPUs, 5 server models), and four copies of it
/// for 2048 GPUs. Jobs: `--jobs` (default 2048) from the trace generator with Hops' settings
/// (Gavel's multi-GPU recipe, seed `--seed`), all active at the last arrival, each with a
/// random share (0-90%) of its steps done and its run time in proportion, so services,
/// latency ratios and critical jobs differ; throughputs from the bundled Gavel table through
/// runtime/core/server_throughput; the simulator's copy-efficiency model. Each repeat plans the
/// round twice, the second time with the first plan as the previous round (leases), and times
/// the second. `--restart S` charges every job S seconds per restart, as Sia's workloads do:
/// `tessera` then also solves its type plan's LP each round (policies/type_plan.hpp) and
/// keeps the jobs placed in the first plan (amortisation).
///
/// Prints one JSON line per (policy, cluster): median and max plan_ms, jobs placed, copies
/// beyond the first, GPUs left idle.
///
/// usage: bench_tessera_policy_bench [--repeat R] [--seed S] [--jobs N] [--restart S]

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_clusters.hpp"
#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/copy_efficiency.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

namespace {

/// Every job active at the last arrival with random progress.
snapshot active_round(const cluster& cl, const server_throughput& rt, const throughput_table& t,
                      const std::vector<job>& jobs, std::uint64_t seed, double restart) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> done(0.0, 0.9);
  snapshot s;
  s.cl = &cl;
  s.rates = &rt;
  for (const auto& j : jobs) s.now = std::max(s.now, j.arrival);
  for (const auto& j : jobs) {
    job_view v;
    v.spec = &j;
    v.throughput = type_throughputs(cl, t, j);
    const double best = *std::max_element(v.throughput.begin(), v.throughput.end());
    v.steps_done = done(rng) * j.total_steps;
    v.remaining_steps = j.total_steps - v.steps_done;
    v.run_time = best > 0 ? std::min(s.now - j.arrival, v.steps_done / best) : 0;
    v.restart_seconds = restart;
    s.jobs.push_back(v);
  }
  return s;
}

/// Times policy `name` on `s`: one JSON line.
nlohmann::json time_policy(const std::string& name, snapshot s, int repeat) {
  auto pol = make_policy(name);
  if (!pol) throw std::runtime_error(pol.err().message);
  std::vector<double> ms;
  round_plan last;
  for (int r = 0; r < repeat; ++r) {
    s.last_plan = nullptr;
    auto first = pol.value()->plan(s);
    if (!first) throw std::runtime_error(first.err().message);
    last = std::move(first.value());
    s.last_plan = &last;
    const auto t0 = std::chrono::steady_clock::now();
    auto p = pol.value()->plan(s);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!p) throw std::runtime_error(p.err().message);
    last = std::move(p.value());
  }
  std::set<job_id> placed;
  int forks = 0, used = 0;
  for (const auto& as : last.assignments) {
    placed.insert(as.job);
    if (as.copy > 0) ++forks;
    used += as.gpus();
  }
  std::sort(ms.begin(), ms.end());
  return {{"bench", "tessera_policy"},
          {"policy", name},
          {"gpus", s.cl->total_gpus()},
          {"jobs", s.jobs.size()},
          {"plan_ms_median", ms[ms.size() / 2]},
          {"plan_ms_max", ms.back()},
          {"placed", placed.size()},
          {"fork_parts", forks},
          {"idle_gpus", s.cl->total_gpus() - used},
          {"restart_s", s.jobs.empty() ? 0.0 : s.jobs[0].restart_seconds},
          {"repeats", repeat}};
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5, njobs = 2048;
  std::uint64_t seed = 1;
  double restart = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--jobs") && i + 1 < argc) {
      njobs = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--restart") && i + 1 < argc) {
      restart = std::max(0.0, std::atof(argv[++i]));
    } else {
      std::cerr << "usage: bench_tessera_policy_bench [--repeat R] [--seed S] [--jobs N] "
                   "[--restart S]\n";
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  trace_gen_config tc = hops_trace_config(seed);
  tc.num_jobs = njobs;
  auto setting = bench::load_hops_setting(TESSERA_CONFIG_DIR, tc);
  if (!setting) {
    std::cerr << setting.err().message << '\n';
    return 1;
  }
  const copy_efficiency ce;
  try {
    for (const int gpus : {512, 2048}) {
      const cluster cl = bench::scaled(setting->base, gpus);
      server_throughput rt(cl, setting->table);
      snapshot s = active_round(cl, rt, setting->table, setting->jobs, seed, restart);
      s.fork_efficiency = &ce;
      for (const char* name : {"tessera", "hare"})
        std::cout << time_policy(name, s, repeat).dump() << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
