// Sia's rigid-job program (policies/sia.hpp): optimal against enumeration on random small
// clusters, a worked two-job example, and the restart damping and non-preemption it keeps
// across rounds.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>

#include "policies/sia.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// Sia's cost of job m on type c for fresh jobs (factor 1), restated from the paper's
/// objective: (normalised goodput)^p rounded to 2 decimals, minus lambda_n.
double cost(const snapshot& s, int m, int c, const sia_settings& set) {
  const auto& v = s.jobs[static_cast<std::size_t>(m)];
  double slowest = INFINITY;
  for (std::size_t t = 0; t < v.throughput.size(); ++t)
    if (v.throughput[t] > 0 && s.cl->types[t].gpus >= v.spec->scale_factor)
      slowest = std::min(slowest, v.throughput[t]);
  const double g = v.spec->scale_factor * v.throughput[static_cast<std::size_t>(c)] / slowest;
  return std::min(std::round(std::pow(g, set.p) * 100) / 100, set.clip) - set.lambda_n;
}

/// The least total cost over every choice of one type or none per job that fits.
double best_by_enumeration(const snapshot& s, const sia_settings& set) {
  const int n = static_cast<int>(s.jobs.size()), k = static_cast<int>(s.cl->types.size());
  std::vector<int> free(static_cast<std::size_t>(k));
  for (int c = 0; c < k; ++c) free[static_cast<std::size_t>(c)] = s.cl->types[c].gpus;
  double best = 0;
  std::function<void(int, double)> go = [&](int m, double sum) {
    if (m == n) {
      best = std::min(best, sum);
      return;
    }
    go(m + 1, sum);  // no GPUs
    const auto& v = s.jobs[static_cast<std::size_t>(m)];
    for (int c = 0; c < k; ++c) {
      auto& f = free[static_cast<std::size_t>(c)];
      if (!(v.throughput[static_cast<std::size_t>(c)] > 0) || f < v.spec->scale_factor) continue;
      f -= v.spec->scale_factor;
      go(m + 1, sum + cost(s, m, c, set));
      f += v.spec->scale_factor;
    }
  };
  go(0, 0);
  return best;
}

}  // namespace

TEST_CASE("sia: each round's choice is optimal and feasible on random small clusters",
          "[sia][policies]") {
  // Both solvers: the exact dynamic program (the default) and CBC (dp_cells 0).
  for (const double dp_cells : {sia_settings{}.dp_cells, 0.0}) {
    std::mt19937 rng(7);
    sia_settings set;
    set.dp_cells = dp_cells;
    set.ilp_gap = 0;
    for (int trial = 0; trial < 60; ++trial) {
      auto in = random_instance(rng, instance_limits{4, 6, 1000});
      std::vector<std::vector<double>> tput;
      for (const auto& j : in.jobs) {
        std::vector<double> row;
        for (const auto& t : in.cl.types)
          row.push_back(t.gpus >= j.scale_factor && rng() % 5
                            ? *in.table.isolated(t.name, {j.job_type, j.scale_factor})
                            : 0.0);
        tput.push_back(row);
      }
      const auto s = make_snapshot(in.cl, in.jobs, tput, 100);
      sia_policy p(set);
      auto a = p.allocate(s);
      REQUIRE(a);
      INFO("trial " << trial);
      std::vector<int> used(in.cl.types.size(), 0);
      double total = 0;
      for (std::size_t m = 0; m < in.jobs.size(); ++m) {
        int chosen = 0;
        for (std::size_t c = 0; c < in.cl.types.size(); ++c) {
          const double x = a->x[m][c];
          REQUIRE((x == 0.0 || x == 1.0));
          if (x == 0) continue;
          ++chosen;
          REQUIRE(tput[m][c] > 0);
          used[c] += in.jobs[m].scale_factor;
          total += cost(s, static_cast<int>(m), static_cast<int>(c), set);
        }
        REQUIRE(chosen <= 1);
      }
      for (std::size_t c = 0; c < in.cl.types.size(); ++c) REQUIRE(used[c] <= in.cl.types[c].gpus);
      CHECK(total == Approx(best_by_enumeration(s, set)).margin(1e-9));
    }
  }
}

TEST_CASE("sia: in the exact program a tie between waiting jobs goes to the first to arrive",
          "[sia][policies]") {
  // One 2-GPU type, three identical 2-GPU jobs that never ran, listed out of arrival order:
  // the one that arrived first (job 2, at 10 s) gets the GPUs.
  const cluster cl = make_cluster({{0, "s", "k80", 0, 2, 1.0}});
  const std::vector<job> jobs = {make_job(0, "a", 2, 1e6, 30), make_job(1, "a", 2, 1e6, 20),
                                 make_job(2, "a", 2, 1e6, 10)};
  sia_policy p({});
  auto a = p.allocate(make_snapshot(cl, jobs, {{1.0}, {1.0}, {1.0}}, 60));
  REQUIRE(a);
  CHECK(a->x[2][0] == 1.0);
  CHECK(a->x[0][0] + a->x[1][0] == 0.0);
}

TEST_CASE("sia: the job that gains most from the fast type gets it", "[sia][policies]") {
  // One slow and one fast GPU; job 0 runs 4x faster on the fast one, job 1 1.5x: goodputs
  // (1, 4) and (1, 1.5), powered by -0.5: (1, 0.5) and (1, 0.82). Job 0 fast, job 1 slow
  // costs 1.5 - 2.2; the swap 1.82 - 2.2.
  const cluster cl = make_cluster({{0, "s", "k80", 0, 1, 1.0}, {0, "f", "v100", 0, 1, 1.0}});
  const std::vector<job> jobs = {make_job(0, "a", 1, 100), make_job(1, "b", 1, 100)};
  sia_policy p({});
  auto a = p.allocate(make_snapshot(cl, jobs, {{1.0, 4.0}, {2.0, 3.0}}, 10));
  REQUIRE(a);
  CHECK(a->x[0] == std::vector<double>{0, 1});
  CHECK(a->x[1] == std::vector<double>{1, 0});
}

TEST_CASE("sia: a restarting job keeps its type, and restarts damp moves", "[sia][policies]") {
  // Two 2-GPU types; one job of 2 GPUs that ran last round on the first.
  const cluster cl = make_cluster({{0, "s", "k80", 0, 2, 1.0}, {0, "f", "v100", 0, 2, 1.0}});
  const std::vector<job> jobs = {make_job(0, "a", 2, 1e6)};
  double restart = 0;  // the executor's restart seconds for the job
  auto round = [&](sia_policy& p, const std::vector<double>& tput, double now, int last_type) {
    auto s = make_snapshot(cl, jobs, {tput}, now);
    s.round_length = 60;
    s.jobs[0].restart_seconds = restart;
    s.jobs[0].last_type = last_type;
    s.jobs[0].attained_service = now > 0 ? 1000 : 0;
    auto a = p.allocate(s);
    REQUIRE(a);
    return a->x[0];
  };
  restart = 120;  // more than a round: still restarting after one
  sia_policy keeps({});
  CHECK(round(keeps, {1.0, 4.0}, 0, -1) == std::vector<double>{0, 1});   // fresh: fast type
  CHECK(round(keeps, {1.0, 4.0}, 60, 0) == std::vector<double>{1, 0});   // started on slow
  CHECK(round(keeps, {1.0, 4.0}, 120, 0) == std::vector<double>{0, 1});  // restored: it moves
  restart = 30;
  // Default penalty 30 s, the second type 1.2x faster: at age 600 s with no restarts the
  // factor is 600 / 630, goodput 2.4 * 0.952 = 2.29 against 2 for staying: it moves.
  sia_policy moves({});
  CHECK(round(moves, {1.0, 1.2}, 600, 0) == std::vector<double>{0, 1});
  // After 4 restarts the factor is (600 - 120) / 630: 2.4 * 0.762 = 1.83 < 2, it stays.
  sia_policy tired({});
  for (int i = 0; i < 4; ++i) round(tired, {1.0, 1.2}, 300 + 60 * i, i % 2);
  CHECK(round(tired, {1.0, 1.2}, 600, 0) == std::vector<double>{1, 0});
}

TEST_CASE("sia: a tie between a running job and a waiting one goes to the running one",
          "[sia][policies]") {
  // One 2-GPU type and two identical 2-GPU jobs: the same cost either way. The one that ran
  // last round keeps the GPUs every round (stay_tie_break), so nothing pays a restart.
  const cluster cl = make_cluster({{0, "s", "k80", 0, 2, 1.0}});
  const std::vector<job> jobs = {make_job(0, "a", 2, 1e6), make_job(1, "a", 2, 1e6)};
  for (int runner : {0, 1}) {
    sia_policy p({});
    for (int r = 1; r <= 5; ++r) {
      auto s = make_snapshot(cl, jobs, {{1.0}, {1.0}}, 60.0 * r);
      s.round_length = 60;
      s.jobs[static_cast<std::size_t>(runner)].last_type = 0;
      s.jobs[static_cast<std::size_t>(runner)].attained_service = 120.0 * r;
      auto a = p.allocate(s);
      REQUIRE(a);
      CHECK(a->x[static_cast<std::size_t>(runner)][0] == 1.0);
      CHECK(a->x[static_cast<std::size_t>(1 - runner)][0] == 0.0);
    }
  }
}

TEST_CASE("sia: restarting jobs that no longer fit are not kept", "[sia][policies]") {
  // Both 2-GPU jobs ran last round and are still restarting (120 s in 60 s rounds), but the
  // type now has 2 GPUs (a server was lost): keeping both is infeasible, so neither is kept
  // and one of them runs.
  const cluster cl = make_cluster({{0, "s", "k80", 0, 2, 1.0}});
  const std::vector<job> jobs = {make_job(0, "a", 2, 1e6), make_job(1, "a", 2, 1e6)};
  sia_policy p({});
  auto s = make_snapshot(cl, jobs, {{1.0}, {1.0}}, 60);
  s.round_length = 60;
  for (auto& v : s.jobs) {
    v.last_type = 0;
    v.restart_seconds = 120;
  }
  auto a = p.allocate(s);
  REQUIRE(a);
  CHECK(a->x[0][0] + a->x[1][0] == 1.0);
}
