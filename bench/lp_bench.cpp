/// @file lp_bench.cpp
/// Solve time of heterogeneity-aware max-min fairness (Gavel's LAS `_perf` LP) as the job
/// count grows: N jobs on N/4 V100 + N/4 P100 + N/4 K80 GPUs (4 per server), jobs from
/// Gavel's multi-GPU trace recipe (26 job types, scale factors 1/2/4/8) with throughputs
/// from the bundled Gavel table. For each N and each row case it prints one JSON line:
///   - case "gavel_rows": the rows as they come (jobs of one (type, scale) are identical, so
///     the LP is solved over ~80 classes);
///   - case "distinct_rows": every job's row multiplied entry-wise by U(0.99, 1.01), so no two
///     jobs share a class (the worst case for the class reduction; the crash basis helps).
/// Figures (milliseconds, medians over repeats, each on a fresh policy object):
///   cold_ms              allocate() on a fresh policy, default settings (two stages)
///   cold_single_stage_ms the same without the efficiency stage (Gavel's single LP)
///   warm_arrival_ms      allocate() after one more job arrived, on the policy that planned
///                        the previous job set (warm start from its basis)
///   full_lp_dual_ms      the plain LP over every job (no classes, no crash), CLP dual
///                        simplex from the slack basis, single stage
/// plus classes and simplex iterations of each.
///
/// For N <= --round-max (default 2048) it also prints lines for the policies that are
/// recomputed every round, finish_time_fairness_perf and min_total_duration_perf, on the
/// gavel_rows jobs, case "gavel_rows_fresh" (all just arrived, nothing done: FTF then needs
/// the most bisection steps) and case "gavel_rows_with_progress" (random progress, 5-100% of
/// the steps left, and ages, 0-24 h):
///   cold_ms       allocate() on a fresh policy
///   next_round_ms allocate() one 360 s round later (progress advanced by the allocation),
///                 on the same policy object (warm start)
/// with the LP count (FTF bisection) and the objective (rho, makespan).
///
/// usage: bench_lp_bench [--jobs N]... [--repeat R] [--seed S] [--no-full] [--round-max N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policies/finish_time_fairness.hpp"
#include "policies/max_min_fairness.hpp"
#include "policies/min_total_duration.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A cluster, job specs and the snapshot over the first `active` of them.
struct instance {
  cluster cl;
  std::vector<job> specs;
  std::vector<std::vector<double>> tput;  ///< per job, per type
  std::vector<double> remaining;          ///< per job; empty = all steps left
  double now = 0;
  snapshot snap_for(std::size_t active) const {
    snapshot s;
    s.cl = &cl;
    s.now = now;
    s.job_set_version = active;
    for (std::size_t m = 0; m < active; ++m) {
      job_view v;
      v.spec = &specs[m];
      v.remaining_steps = remaining.empty() ? specs[m].total_steps : remaining[m];
      v.steps_done = specs[m].total_steps - v.remaining_steps;
      v.throughput = tput[m];
      s.jobs.push_back(std::move(v));
    }
    return s;
  }
};

result<instance> make_instance(int n, bool distinct, std::uint64_t seed,
                               const throughput_table& table,
                               const std::vector<job_template>& templates) {
  instance in;
  std::vector<server> servers;
  for (const char* type : {"v100", "p100", "k80"}) {
    int left = n / 4;
    for (int k = 0; left > 0; ++k) {
      const int g = std::min(4, left);
      servers.push_back({0, std::string(type) + "-" + std::to_string(k), type, 0, g, 1.0});
      left -= g;
    }
  }
  in.cl = make_cluster(servers);
  trace_gen_config cfg;
  cfg.rate_per_hour = 0;
  cfg.num_jobs = n + 1;  // one more for the arrival
  cfg.multi_gpu = true;
  cfg.seed = seed;
  auto jobs = generate_trace(cfg, templates, table);
  if (!jobs) return jobs.err();
  in.specs = std::move(jobs.value());
  std::mt19937 rng(static_cast<std::uint32_t>(seed) + 17);
  std::uniform_real_distribution<double> jitter(0.99, 1.01);
  for (const auto& j : in.specs) {
    std::vector<double> row;
    for (const auto& t : in.cl.types) {
      auto v = table.isolated(t.name, {j.job_type, j.scale_factor});
      row.push_back(v ? *v * t.mean_speed * (distinct ? jitter(rng) : 1.0) : 0.0);
    }
    in.tput.push_back(std::move(row));
  }
  return in;
}

/// Times finish_time_fairness_perf and min_total_duration_perf, cold and one round later.
int round_policies(int n, std::uint64_t seed, int repeat, const throughput_table& table,
                   const std::vector<job_template>& templates) {
  auto inst = make_instance(n, false, seed, table, templates);
  if (!inst) {
    std::cerr << "lp_bench: " << inst.err().message << '\n';
    return 1;
  }
  const instance fresh = inst.value();  // every job just arrived, nothing done
  std::mt19937 rng(static_cast<std::uint32_t>(seed) + 99);
  std::uniform_real_distribution<double> left(0.05, 1.0), age(0.0, 86400.0);
  inst->now = 86400;
  for (auto& j : inst->specs) {
    j.arrival = inst->now - age(rng);
    inst->remaining.push_back(j.total_steps * left(rng));
  }
  const instance& aged = inst.value();
  for (const instance* base : {&fresh, &aged}) {
    const char* case_name = base == &fresh ? "gavel_rows_fresh" : "gavel_rows_with_progress";
    const int reps = std::max(1, std::min(repeat, 3));
    for (const char* which : {"finish_time_fairness_perf", "min_total_duration_perf"}) {
      const bool ftf = std::string(which) == "finish_time_fairness_perf";
      std::vector<double> cold, next;
      int lps = 0, iterations = 0;
      double objective = 0;
      for (int r = 0; r < reps; ++r) {
        instance round = *base;
        if (round.remaining.empty())
          for (const auto& j : round.specs) round.remaining.push_back(j.total_steps);
        std::unique_ptr<allocation_policy> p;
        if (ftf)
          p = std::make_unique<finish_time_fairness>(true, 1e-3, 40);
        else
          p = std::make_unique<min_total_duration>(true);
        const snapshot s0 = round.snap_for(n);
        auto t0 = clock_type::now();
        auto a = p->allocate(s0);
        cold.push_back(ms_since(t0));
        if (!a) {
          std::cerr << "lp_bench: " << a.err().message << '\n';
          return 1;
        }
        if (ftf) {
          lps = static_cast<finish_time_fairness&>(*p).last_lp_count();
          objective = static_cast<finish_time_fairness&>(*p).last_rho();
        } else {
          iterations = static_cast<min_total_duration&>(*p).last_solve().iterations;
          objective = static_cast<min_total_duration&>(*p).last_makespan();
        }
        // One 360 s round at the allocation's throughputs.
        for (int m = 0; m < n; ++m) {
          double eff = 0;
          for (std::size_t j = 0; j < round.tput[m].size(); ++j)
            eff += round.tput[m][j] * a->x[m][j];
          round.remaining[m] = std::max(1.0, round.remaining[m] - eff * 360.0);
        }
        round.now += 360;
        const snapshot s1 = round.snap_for(n);
        t0 = clock_type::now();
        auto b = p->allocate(s1);
        next.push_back(ms_since(t0));
        if (!b) {
          std::cerr << "lp_bench: " << b.err().message << '\n';
          return 1;
        }
      }
      nlohmann::json line = {{"bench", "lp"},
                             {"policy", which},
                             {"case", case_name},
                             {"jobs", n},
                             {"gpus", inst->cl.total_gpus()},
                             {"repeats", reps},
                             {"cold_ms", median(cold)},
                             {"next_round_ms", median(next)}};
      if (ftf) {
        line["lps"] = lps;
        line["rho"] = objective;
      } else {
        line["iterations"] = iterations;
        line["makespan_s"] = objective;
      }
      std::cout << line.dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  int repeat = 9;
  std::uint64_t seed = 1;
  bool full = true;
  int round_max = 2048;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--jobs")
      sizes.push_back(std::stoi(next()));
    else if (a == "--repeat")
      repeat = std::max(1, std::stoi(next()));
    else if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--no-full")
      full = false;
    else if (a == "--round-max")
      round_max = std::stoi(next());
    else {
      std::cerr << "usage: bench_lp_bench [--jobs N]... [--repeat R] [--seed S] [--no-full] "
                   "[--round-max N]\n";
      return a == "--help" ? 0 : 2;
    }
  }
  if (sizes.empty()) sizes = {32, 64, 128, 256, 512, 1024, 2048, 10000};
  auto table = throughput_table::load_bundled();
  auto templates = bundled_job_templates();
  if (!table || !templates) {
    std::cerr << "lp_bench: cannot load the bundled throughput table or job templates\n";
    return 1;
  }

  for (int n : sizes) {
    for (bool distinct : {false, true}) {
      auto inst = make_instance(n, distinct, seed, table.value(), templates.value());
      if (!inst) {
        std::cerr << "lp_bench: " << inst.err().message << '\n';
        return 1;
      }
      const snapshot before = inst->snap_for(n);
      const snapshot after = inst->snap_for(n + 1);
      std::vector<double> cold, cold1, warm;
      int classes = 0, cold_it = 0, cold1_it = 0, warm_it = 0;
      bool crashed = false, warm_flag = false;
      double t_star = 0;
      for (int r = 0; r < repeat; ++r) {
        {
          max_min_fairness p(true);
          auto t0 = clock_type::now();
          auto a = p.allocate(before);
          cold.push_back(ms_since(t0));
          if (!a) {
            std::cerr << "lp_bench: " << a.err().message << '\n';
            return 1;
          }
          classes = p.last_solve().classes;
          cold_it = p.last_solve().iterations;
          crashed = p.last_solve().crashed;
          // One arrival, same policy object: warm start.
          t0 = clock_type::now();
          auto b = p.allocate(after);
          warm.push_back(ms_since(t0));
          if (!b) {
            std::cerr << "lp_bench: " << b.err().message << '\n';
            return 1;
          }
          warm_it = p.last_solve().iterations;
          warm_flag = p.last_solve().warm;
        }
        {
          max_min_fairness p(false);
          auto t0 = clock_type::now();
          auto a = p.allocate(before);
          cold1.push_back(ms_since(t0));
          if (!a) {
            std::cerr << "lp_bench: " << a.err().message << '\n';
            return 1;
          }
          cold1_it = p.last_solve().iterations;
          t_star = p.last_solve().value;
        }
      }
      nlohmann::json line = {{"bench", "lp"},
                             {"policy", "max_min_fairness_perf"},
                             {"case", distinct ? "distinct_rows" : "gavel_rows"},
                             {"jobs", n},
                             {"gpus", inst->cl.total_gpus()},
                             {"repeats", repeat},
                             {"classes", classes},
                             {"crashed", crashed},
                             {"t_star", t_star},
                             {"cold_ms", median(cold)},
                             {"cold_iterations", cold_it},
                             {"cold_single_stage_ms", median(cold1)},
                             {"cold_single_stage_iterations", cold1_it},
                             {"warm_arrival_ms", median(warm)},
                             {"warm_arrival_iterations", warm_it},
                             {"warm_started", warm_flag}};
      if (full) {
        // The plain LP over every job: no classes, no crash, no second stage.
        const int reps = n >= 4096 ? 1 : std::min(repeat, 3);
        std::vector<double> times;
        int it = 0;
        double value = 0;
        for (int r = 0; r < reps; ++r) {
          max_min_fairness p(false);
          p.settings().aggregate = false;
          p.settings().crash = false;
          auto t0 = clock_type::now();
          auto a = p.allocate(before);
          times.push_back(ms_since(t0));
          if (!a) {
            std::cerr << "lp_bench: " << a.err().message << '\n';
            return 1;
          }
          it = p.last_solve().iterations;
          value = p.last_solve().value;
        }
        line["full_lp_dual_ms"] = median(times);
        line["full_lp_iterations"] = it;
        line["full_lp_repeats"] = reps;
        line["full_lp_t_star_rel_diff"] = std::abs(value - t_star) / std::max(1e-300, t_star);
      }
      std::cout << line.dump() << std::endl;
    }
    if (n <= round_max) {
      if (int rc = round_policies(n, seed, repeat, table.value(), templates.value())) return rc;
    }
  }
  return 0;
}
