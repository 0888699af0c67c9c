/// @file hops_bench.cpp
/// Solve time of Hops' per-round ILP with the full queue, at 64, 512 and 1024 GPUs.
///
/// Cluster: config/hops_512.toml (64 servers of 8 GPUs, 5 server models); 64 GPUs = every
/// 8th of its servers (2 v100, 1 v100-fast, 2 p100, 1 p100-slow, 2 k80), 1024 GPUs = two
/// copies of it. Queue: Hops' trace setting (tessera trace generate --preset hops --seed 1:
/// 500 jobs, Poisson 100 jobs/h, Gavel's multi-GPU recipe), every job active and waiting at
/// the last arrival (no progress yet), throughputs from the bundled Gavel table through
/// runtime/core/server_throughput. One `hops` policy plans that round `--repeat` times.
///
/// Prints one JSON line per cluster size ("bench": "hops_ilp"):
///   window_jobs, groups, columns, rows, integers   the ILP's size (groups: job groups
///                                          sharing columns, = window_jobs per job)
///   outcome                                CBC's outcome of the last repeat
///   ilp_s                                  median CBC wall time (seconds)
///   plan_s                                 median wall time of the whole plan() call
///   placed, idle_gpus                      jobs placed and GPUs left idle by the plan
/// and, with --compare (sizes up to 512 GPUs), one line per formulation ("bench":
/// "hops_ilp_formulation") solving the same window restricted to one-server configurations
/// two ways: "server_class" (hops' fill-pattern ILP) and "per_server" (one binary per job
/// and server, the textbook formulation), each with the policy's time limit and gap:
/// columns, outcome, seconds, objective and CBC's bound.
///
/// usage: bench_hops_bench [--repeat R] [--seed S] [--compare] [--time-limit T]
///                         [--group-tolerance G]   (hops' option group_tolerance)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_clusters.hpp"
#include "policies/hops.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The same window's ILP with only one-server configurations.
hops_ilp_input one_server_only(const hops_ilp_input& in) {
  hops_ilp_input out;
  out.classes = in.classes;
  for (std::size_t i = 0; i < in.configs.size(); ++i) {
    std::vector<hops_config> c;
    std::vector<double> v;
    for (std::size_t k = 0; k < in.configs[i].size(); ++k) {
      const auto& cf = in.configs[i][k];
      if (cf.whole_servers == 0 && cf.pieces.size() == 1) {
        c.push_back(cf);
        v.push_back(in.value[i][k]);
      }
    }
    out.configs.push_back(c);
    out.value.push_back(v);
  }
  return out;
}

/// One binary per (job, configuration, server): the formulation hops avoids.
milp_model per_server_model(const hops_ilp_input& in) {
  milp_model m;
  m.set_sense(lp_sense::maximize);
  int n_servers = 0;
  for (const auto& k : in.classes)
    for (int sv : k.servers) n_servers = std::max(n_servers, sv + 1);
  std::vector<std::vector<std::pair<int, double>>> server_rows(n_servers);
  std::vector<int> cap(n_servers, 0);
  for (const auto& k : in.classes)
    for (int sv : k.servers) cap[sv] = k.capacity;
  for (std::size_t i = 0; i < in.configs.size(); ++i) {
    std::vector<std::pair<int, double>> job_row;
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      const auto& cf = in.configs[i][c];
      for (int sv : in.classes[cf.cls].servers) {
        const int col = m.add_binary(in.value[i][c]);
        job_row.emplace_back(col, 1.0);
        server_rows[sv].emplace_back(col, cf.gpus);
      }
    }
    if (!job_row.empty()) m.add_row(-lp_inf, 1, job_row);
  }
  for (int sv = 0; sv < n_servers; ++sv)
    if (!server_rows[sv].empty()) m.add_row(-lp_inf, cap[sv], server_rows[sv]);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  std::uint64_t seed = 1;
  bool compare = false;
  double time_limit = 10;
  double group_tolerance = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--compare")) {
      compare = true;
    } else if (!std::strcmp(argv[i], "--time-limit") && i + 1 < argc) {
      time_limit = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--group-tolerance") && i + 1 < argc) {
      group_tolerance = std::atof(argv[++i]);
    } else {
      std::cerr << "usage: bench_hops_bench [--repeat R] [--seed S] [--compare] "
                   "[--time-limit T] [--group-tolerance G]\n";
      return 2;
    }
  }
  auto setting = bench::load_hops_setting(TESSERA_CONFIG_DIR, hops_trace_config(seed));
  if (!setting) {
    std::cerr << setting.err().message << '\n';
    return 1;
  }
  const throughput_table& table = setting->table;
  const cluster& base = setting->base;
  const std::vector<job>& jobs = setting->jobs;
  double now = 0;
  for (const auto& j : jobs) now = std::max(now, j.arrival);

  for (int gpus : {64, 512, 1024}) {
    const cluster cl = bench::scaled(base, gpus);
    server_throughput rt(cl, table);
    snapshot s;
    s.now = now;
    s.cl = &cl;
    s.rates = &rt;
    for (const auto& j : jobs) {
      job_view v;
      v.spec = &j;
      v.remaining_steps = j.total_steps;
      v.throughput = type_throughputs(cl, table, j);
      s.jobs.push_back(v);
    }
    hops_params hp;
    hp.ilp_time_limit = time_limit;
    hp.group_tolerance = group_tolerance;
    hops h("hops", hp);
    std::vector<double> ilp, plan;
    int placed = 0;
    for (int r = 0; r < repeat; ++r) {
      auto p = h.plan(s);
      if (!p) {
        std::cerr << p.err().message << '\n';
        return 1;
      }
      placed = static_cast<int>(p->assignments.size());
      ilp.push_back(h.last_round().ilp_seconds);
      plan.push_back(h.last_round().plan_seconds);
    }
    const auto& st = h.last_round();
    nlohmann::json line = {{"bench", "hops_ilp"},
                           {"gpus", cl.total_gpus()},
                           {"servers", cl.servers.size()},
                           {"jobs", s.jobs.size()},
                           {"window_jobs", st.window_jobs},
                           {"groups", st.groups},
                           {"columns", st.columns},
                           {"rows", st.rows},
                           {"integers", st.integers},
                           {"outcome", to_string(st.outcome)},
                           {"ilp_s", median(ilp)},
                           {"plan_s", median(plan)},
                           {"placed", placed},
                           {"idle_gpus", st.idle_gpus},
                           {"repeats", repeat}};
    std::cout << line.dump() << std::endl;

    if (!compare || gpus > 512) continue;
    const hops_ilp_input restricted = one_server_only(h.last_ilp());
    milp_settings ms;
    ms.time_limit_s = time_limit;
    ms.relative_gap = hp.ilp_gap;
    auto by_class = solve_hops_ilp(restricted, ms);
    const milp_model flat = per_server_model(restricted);
    auto by_server = solve_milp(flat, ms);
    if (!by_class || !by_server) {
      std::cerr << (by_class ? by_server.err().message : by_class.err().message) << '\n';
      return 1;
    }
    auto emit = [&](const char* name, int columns, const milp_solution& sol) {
      nlohmann::json l = {{"bench", "hops_ilp_formulation"},
                          {"gpus", cl.total_gpus()},
                          {"formulation", name},
                          {"configs", "one_server_only"},
                          {"columns", columns},
                          {"outcome", to_string(sol.outcome)},
                          {"seconds", sol.seconds},
                          {"objective", sol.has_solution ? sol.objective : 0.0},
                          {"bound", sol.best_bound}};
      std::cout << l.dump() << std::endl;
    };
    emit("server_class", by_class->columns, by_class->solution);
    emit("per_server", flat.num_columns(), by_server.value());
  }
  return 0;
}
