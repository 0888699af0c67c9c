/// @file choice_knapsack_bench.cpp
/// Sia's per-round program (policies/sia.hpp) solved exactly by dynamic programming
/// (runtime/solver/choice_knapsack.hpp) and by CBC (runtime/solver/milp.hpp), on Sia's
/// 64-GPU cluster (24 T4, 16 A100, 24 RTX 2080Ti) as the queue grows.
///
/// Instances: see make_round (the shape of a queued round of Sia's newtrace workloads). For
/// each N, one JSON line:
///   states        capacity states of the three types (25 x 17 x 25)
///   dp_ms         the dynamic program (median over --repeat fresh instances of that size)
///   cbc_ms        CBC to Sia's gap, 1e-4
///   cbc_exact_ms  CBC to a gap of 0
///   same_optimum  instances where the dynamic program's cost equals CBC's (gap 0) objective
/// A last line shows config/hops_512.toml's three types (160 V100, 224 P100, 128 K80):
/// 4.7 million states, so with 100 jobs the program is above `sia`'s default dp_cells and the
/// policy goes to CBC.
///
/// CBC is given the costs in Sia's units (millionths x 1e-6), as `sia` gives them.
/// --round FILE solves one round read from FILE instead (lines "job type gpus cost forced",
/// costs in millionths) by the dynamic program, by CBC in Sia's units and by CBC with the
/// costs as integers (an integral objective lets CBC prune by whole units), and prints times
/// and costs (in millionths).
///
/// usage: bench_choice_knapsack_bench [--jobs N,N,...] [--repeat R] [--seed S] [--round FILE]

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_cli.hpp"
#include "runtime/solver/choice_knapsack.hpp"
#include "runtime/solver/milp.hpp"

using namespace tessera;

namespace {

/// A random Sia-like round: N jobs over the given capacities, in the shape of a queued round
/// of Sia's newtrace workloads (scripts' diagnostics of newtrace-1 at 11 h: 79 jobs, 49 of
/// them of 12 GPUs and 22 of 16, a few of 4-8): GPU counts drawn with those weights, one of
/// six applications per job, each (application, GPU count) with its goodput per type drawn
/// from [1, 6] and normalised to the slowest, Sia's cost round(G^-0.5, 2) - 1.1, and a third
/// of the jobs 0.001 cheaper on one type (the type they ran on: the tie break to staying).
/// Many jobs cost the same: the symmetry that makes the search hard for CBC.
std::vector<choice_item> make_round(int n, const std::vector<int>& cap, std::mt19937& rng) {
  static const int gpus[] = {4, 4, 6, 6, 6, 8, 8, 14};  // with 12 and 16 below
  std::uniform_real_distribution<double> goodput(1.0, 6.0);
  // cost[app][k][type]: six applications, each with its own goodput on each type.
  std::vector<std::vector<std::vector<std::int64_t>>> cost(
      6, std::vector<std::vector<std::int64_t>>(17, std::vector<std::int64_t>(cap.size())));
  for (auto& app : cost)
    for (auto& row : app) {
      std::vector<double> g(cap.size());
      double slowest = 1e9;
      for (auto& x : g) slowest = std::min(slowest, x = goodput(rng));
      for (std::size_t r = 0; r < cap.size(); ++r)
        row[r] = std::llround((std::round(std::pow(g[r] / slowest, -0.5) * 100) / 100 - 1.1) * 1e6);
    }
  std::vector<choice_item> items(static_cast<std::size_t>(n));
  for (auto& it : items) {
    const unsigned u = rng() % 79;
    const int k = u < 49 ? 12 : u < 71 ? 16 : gpus[u - 71];
    const auto& row = cost[rng() % cost.size()][static_cast<std::size_t>(k)];
    const std::size_t stay = rng() % 3 == 0 ? rng() % cap.size() : cap.size();
    for (std::size_t r = 0; r < cap.size(); ++r)
      if (k <= cap[r])
        it.options.push_back({static_cast<int>(r), k, row[r] - (r == stay ? 1000 : 0)});
  }
  return items;
}

/// The same program as a MILP, solved to `gap`: its objective in millionths and the time.
std::pair<double, double> cbc(const std::vector<int>& cap, const std::vector<choice_item>& items,
                              double gap, double unit = 1e-6) {
  const milp_model m = choice_knapsack_milp(cap, items, unit);
  milp_settings set;
  set.relative_gap = gap;
  set.time_limit_s = 10;  // sia's ilp_time_limit
  const auto t0 = std::chrono::steady_clock::now();
  const auto sol = solve_milp(m, set);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return {sol && sol->has_solution ? std::round(sol->objective / unit) : NAN, ms};
}

/// A round read from FILE: lines "job type gpus cost_in_millionths forced" (jobs numbered from
/// 0 in order), as a diagnostic of `sia` can write them.
std::vector<choice_item> read_round(const std::string& path) {
  std::vector<choice_item> items;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  int job = 0, type = 0, k = 0, forced = 0;
  long long cost = 0;
  while (std::fscanf(f, "%d %d %d %lld %d", &job, &type, &k, &cost, &forced) == 5) {
    if (job >= static_cast<int>(items.size())) items.resize(static_cast<std::size_t>(job) + 1);
    items[static_cast<std::size_t>(job)].options.push_back({type, k, cost});
    items[static_cast<std::size_t>(job)].forced |= forced != 0;
  }
  std::fclose(f);
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {20, 40, 80, 160, 320};
  int repeat = 5;
  unsigned seed = 1;
  std::string round_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--jobs") {
      sizes = bench::parse_list<int>(bench::option_value(argc, argv, i));
    } else if (a == "--repeat") {
      repeat = std::max(1, std::atoi(bench::option_value(argc, argv, i).c_str()));
    } else if (a == "--round") {
      round_file = bench::option_value(argc, argv, i);
    } else if (a == "--seed") {
      seed = static_cast<unsigned>(std::atoi(bench::option_value(argc, argv, i).c_str()));
    } else {
      std::printf(
          "usage: bench_choice_knapsack_bench [--jobs N,N,...] [--repeat R] [--seed S] "
          "[--round FILE]\n"
          "Sia's per-round program by dynamic programming and by CBC (see the file "
          "comment).\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const std::vector<int> cap = {24, 16, 24};
  std::mt19937 rng(seed);
  if (!round_file.empty()) {  // one given round, once
    const auto items = read_round(round_file);
    const auto t0 = std::chrono::steady_clock::now();
    const auto sol = solve_choice_knapsack(cap, items, std::int64_t{1} << 26);
    const double dp =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto fast = cbc(cap, items, 1e-4);
    const auto integral = cbc(cap, items, 1e-4, 1.0);
    std::printf(
        "{\"round\": \"%s\", \"jobs\": %zu, \"dp_ms\": %.2f, \"dp_cost\": %lld, "
        "\"cbc_ms\": %.2f, \"cbc_cost\": %.0f, \"cbc_integer_costs_ms\": %.2f, "
        "\"cbc_integer_costs_cost\": %.0f}\n",
        round_file.c_str(), items.size(), dp, static_cast<long long>(sol.cost), fast.second,
        fast.first, integral.second, integral.first);
    return 0;
  }
  for (const int n : sizes) {
    std::vector<double> dp, fast, exact;
    int same = 0;
    for (int r = 0; r < repeat; ++r) {
      const auto items = make_round(n, cap, rng);
      const auto t0 = std::chrono::steady_clock::now();
      const auto sol = solve_choice_knapsack(cap, items, std::int64_t{1} << 26);
      dp.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      fast.push_back(cbc(cap, items, 1e-4).second);
      const auto [objective, ms] = cbc(cap, items, 0);
      exact.push_back(ms);
      same += sol.outcome == choice_outcome::optimal &&
              std::fabs(objective - static_cast<double>(sol.cost)) < 0.5;
    }
    std::printf(
        "{\"jobs\": %d, \"states\": %lld, \"dp_ms\": %.2f, \"cbc_ms\": %.2f, "
        "\"cbc_exact_ms\": %.2f, \"same_optimum\": \"%d/%d\"}\n",
        n, static_cast<long long>(choice_states(cap)), bench::median(dp), bench::median(fast),
        bench::median(exact), same, repeat);
  }
  const std::vector<int> big = {160, 224, 128};  // config/hops_512.toml by type
  const auto sol = solve_choice_knapsack(big, make_round(100, big, rng));
  std::printf("{\"cluster\": \"hops_512\", \"states\": %lld, \"outcome\": \"%s\"}\n",
              static_cast<long long>(choice_states(big)),
              sol.outcome == choice_outcome::too_large ? "too_large" : "solved");
  return 0;
}
