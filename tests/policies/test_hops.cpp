// Hops: fill patterns, the ILP against brute force on random small clusters, packing within
// per-server capacity, latency ratio / sensitivity / fragmentation on hand-checked cases, and
// the policy's window, server-level placement, fragment filling and acceptable GPU counts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>

#include "policies/hops.hpp"
#include "policies/registry.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// Can `pieces` be packed into `bins` bins of `capacity`? (Backtracking, largest first.)
bool packs(std::vector<int> pieces, int bins, int capacity) {
  std::sort(pieces.begin(), pieces.end(), std::greater<int>());
  std::vector<int> room(bins, capacity);
  std::function<bool(std::size_t)> place = [&](std::size_t i) {
    if (i == pieces.size()) return true;
    for (int b = 0; b < bins; ++b) {
      if (room[b] < pieces[i]) continue;
      if (b > 0 && room[b] == room[b - 1]) continue;  // symmetric to the previous bin
      room[b] -= pieces[i];
      if (place(i + 1)) return true;
      room[b] += pieces[i];
    }
    return false;
  };
  return place(0);
}

/// A random ILP instance: 1-2 classes of 1-3 servers with 2-4 GPUs, 1-4 jobs with 1-3
/// configurations each (one server, whole servers plus a remainder, or two halves).
hops_ilp_input random_ilp(std::mt19937& rng, int max_jobs = 4) {
  hops_ilp_input in;
  const int n_classes = 1 + static_cast<int>(rng() % 2);
  int next_server = 0;
  for (int k = 0; k < n_classes; ++k) {
    hops_class c;
    c.capacity = 2 + static_cast<int>(rng() % 3);
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int q = 0; q < n; ++q) c.servers.push_back(next_server++);
    in.classes.push_back(c);
  }
  const int n_jobs = 1 + static_cast<int>(rng() % max_jobs);
  std::uniform_real_distribution<double> val(0.5, 5.0);
  for (int i = 0; i < n_jobs; ++i) {
    std::vector<hops_config> cfgs;
    std::vector<double> vals;
    const int n_cfg = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < n_cfg; ++c) {
      const int k = static_cast<int>(rng() % n_classes);
      const auto& cls = in.classes[k];
      hops_config cf;
      cf.cls = k;
      const int shape = static_cast<int>(rng() % 3);
      if (shape == 0) {  // one server
        cf.gpus = 1 + static_cast<int>(rng() % cls.capacity);
        cf.pieces = {cf.gpus};
      } else if (shape == 1 && cls.servers.size() >= 2) {  // whole server(s) + remainder
        cf.whole_servers = 1;
        const int rem = static_cast<int>(rng() % cls.capacity);
        if (rem > 0) cf.pieces = {rem};
        cf.gpus = cls.capacity + rem;
      } else {  // two halves
        const int g = 2 + static_cast<int>(rng() % (2 * cls.capacity - 1));
        const int a = (g + 1) / 2, b = g / 2;
        if (a > cls.capacity) continue;
        cf.gpus = g;
        cf.pieces = {a, b};
      }
      cf.throughput = 1;
      cfgs.push_back(cf);
      vals.push_back(val(rng));
    }
    if (cfgs.empty()) {
      hops_config cf;
      cf.cls = 0;
      cf.gpus = 1;
      cf.pieces = {1};
      cf.throughput = 1;
      cfgs.push_back(cf);
      vals.push_back(val(rng));
    }
    in.configs.push_back(cfgs);
    in.value.push_back(vals);
  }
  return in;
}

/// Best objective over every choice of at most one configuration per job that packs.
double brute_force(const hops_ilp_input& in) {
  const std::size_t n = in.configs.size();
  std::vector<int> choice(n, -1);
  double best = 0;
  std::function<void(std::size_t, double)> rec = [&](std::size_t i, double v) {
    if (i == n) {
      for (std::size_t k = 0; k < in.classes.size(); ++k) {
        std::vector<int> pieces;
        for (std::size_t j = 0; j < n; ++j) {
          if (choice[j] < 0) continue;
          const auto& cf = in.configs[j][choice[j]];
          if (cf.cls != static_cast<int>(k)) continue;
          for (int w = 0; w < cf.whole_servers; ++w) pieces.push_back(in.classes[k].capacity);
          for (int d : cf.pieces) pieces.push_back(d);
        }
        if (!packs(pieces, static_cast<int>(in.classes[k].servers.size()), in.classes[k].capacity))
          return;
      }
      best = std::max(best, v);
      return;
    }
    choice[i] = -1;
    rec(i + 1, v);
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      choice[i] = static_cast<int>(c);
      rec(i + 1, v + in.value[i][c]);
    }
    choice[i] = -1;
  };
  rec(0, 0.0);
  return best;
}

/// Checks a packing against the instance and the ILP's choice; returns GPUs used per server.
void check_packing(const hops_ilp_input& in, const hops_ilp_result& r,
                   const std::vector<std::vector<server_share>>& packed) {
  std::map<int, int> used, cap, class_of;
  for (std::size_t k = 0; k < in.classes.size(); ++k)
    for (int sv : in.classes[k].servers) {
      cap[sv] = in.classes[k].capacity;
      class_of[sv] = static_cast<int>(k);
    }
  REQUIRE(packed.size() == in.configs.size());
  for (std::size_t i = 0; i < packed.size(); ++i) {
    if (r.choice[i] < 0) {
      CHECK(packed[i].empty());
      continue;
    }
    const auto& cf = in.configs[i][r.choice[i]];
    int total = 0;
    for (const auto& sh : packed[i]) {
      REQUIRE(cap.count(sh.server));
      CHECK(class_of[sh.server] == cf.cls);
      CHECK(sh.gpus > 0);
      used[sh.server] += sh.gpus;
      total += sh.gpus;
    }
    CHECK(total == cf.gpus);  // the chosen configuration, placed whole
  }
  for (const auto& [sv, u] : used) CHECK(u <= cap[sv]);
}

/// A snapshot over `jobs` with per-server rates `rt` at time `now`.
snapshot make_snapshot(const cluster& cl, const server_throughput& rt, const std::vector<job>& jobs,
                       double now, const std::vector<double>& run_time = {}) {
  snapshot s;
  s.now = now;
  s.cl = &cl;
  s.rates = &rt;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    job_view v;
    v.spec = &jobs[i];
    v.remaining_steps = jobs[i].total_steps;
    v.run_time = i < run_time.size() ? run_time[i] : 0;
    v.throughput = type_throughputs(cl, rt.type_table(), jobs[i]);
    s.jobs.push_back(v);
  }
  return s;
}

const assignment* find(const round_plan& p, job_id id) {
  for (const auto& as : p.assignments)
    if (as.job == id) return &as;
  return nullptr;
}

}  // namespace

TEST_CASE("hops: fill patterns are the maximal multisets", "[policies]") {
  // Sizes 1, 2, 4, 8 into 8 GPUs: every maximal multiset sums to exactly 8 (1 fits in any
  // gap), i.e. the partitions of 8 into powers of two: 8; 4+4; 4+2+2; 4+2+1+1; 4+1x4; 2x4;
  // 2x3+1x2; 2x2+1x4; 2+1x6; 1x8 -- ten.
  auto p = fill_patterns({1, 2, 4, 8}, 8);
  CHECK(p.size() == 10);
  for (const auto& pat : p) CHECK(std::accumulate(pat.begin(), pat.end(), 0) == 8);
  // Sizes 3 and 5 into 8: {5,3} (full) and {3,3} (2 left, nothing fits); {5} and {3} alone
  // are not maximal (a 3 still fits).
  auto q = fill_patterns({3, 5}, 8);
  REQUIRE(q.size() == 2);
  CHECK(q[0] == std::vector<int>{5, 3});
  CHECK(q[1] == std::vector<int>{3, 3});
  // Sizes above the server are dropped; too many patterns give none.
  CHECK(fill_patterns({9}, 8).empty());
  std::vector<int> all(16);
  std::iota(all.begin(), all.end(), 1);
  CHECK(fill_patterns(all, 16, 10).empty());  // 231 partitions of 16 > 10
  CHECK(fill_patterns(all, 16).size() == 231);
}

TEST_CASE("hops: the ILP is optimal against brute force and its packing fits", "[policies]") {
  std::mt19937 rng(6);
  milp_settings ms;
  ms.relative_gap = 0;
  ms.absolute_gap = 1e-9;
  for (int trial = 0; trial < 150; ++trial) {
    INFO("trial " << trial);
    const auto in = random_ilp(rng);
    ms.preprocess = trial % 2 == 0;  // every other trial without CBC's preprocessing
    auto r = solve_hops_ilp(in, ms);
    REQUIRE(r);
    REQUIRE(r->solution.optimal());
    // One configuration per job.
    REQUIRE(r->choice.size() == in.configs.size());
    double obj = 0;
    for (std::size_t i = 0; i < in.configs.size(); ++i) {
      CHECK(r->choice[i] < static_cast<int>(in.configs[i].size()));
      if (r->choice[i] >= 0) obj += in.value[i][r->choice[i]];
    }
    CHECK(obj == Approx(r->solution.objective));
    CHECK(obj == Approx(brute_force(in)));  // the pattern ILP loses no packing
    check_packing(in, *r, pack_hops_solution(in, *r, {}));
  }
}

TEST_CASE("hops: the ILP answered from its relaxation is within the gap and fits", "[policies]") {
  // Hops' default solve (milp_settings::relaxation_first, option ilp_relaxation_first): the
  // plan's value within the gap of brute force, on the same random instances.
  std::mt19937 rng(6);
  milp_settings ms;
  ms.relaxation_first = true;
  ms.relative_gap = 0.01;
  int from_relaxation = 0;
  for (int trial = 0; trial < 150; ++trial) {
    INFO("trial " << trial);
    const auto in = random_ilp(rng);
    auto r = solve_hops_ilp(in, ms);
    REQUIRE(r);
    REQUIRE(r->solution.optimal());
    double obj = 0;
    for (std::size_t i = 0; i < in.configs.size(); ++i)
      if (r->choice[i] >= 0) obj += in.value[i][r->choice[i]];
    CHECK(obj == Approx(r->solution.objective));
    const double best = brute_force(in);
    CHECK(obj >= best * (1 - 0.01) - 1e-9);
    CHECK(r->solution.best_bound >= best - 1e-6);
    check_packing(in, *r, pack_hops_solution(in, *r, {}));
    if (r->solution.from_relaxation) ++from_relaxation;
  }
  CHECK(from_relaxation > 50);  // the relaxation path answered most of them
}

TEST_CASE("hops: larger random ILPs respect capacity and one configuration per job", "[policies]") {
  std::mt19937 rng(11);
  milp_settings ms;
  ms.time_limit_s = 5;
  for (int trial = 0; trial < 20; ++trial) {
    INFO("trial " << trial);
    auto in = random_ilp(rng, 40);
    // Previous placements: every job "ran" on the first server of its first configuration.
    std::vector<std::vector<server_share>> prev(in.configs.size());
    for (std::size_t i = 0; i < in.configs.size(); ++i) {
      const auto& cf = in.configs[i][0];
      if (cf.whole_servers == 0 && cf.pieces.size() == 1)
        prev[i] = {{in.classes[cf.cls].servers[0], cf.gpus}};
    }
    auto r = solve_hops_ilp(in, ms);
    REQUIRE(r);
    REQUIRE(r->solution.has_solution);
    check_packing(in, *r, pack_hops_solution(in, *r, prev));
  }
}

/// Copies of `base`'s jobs (1-3 each, at most `max_jobs` in all), each copy's values scaled
/// by a weight in [1, 1.3): jobs of one shape with different weights.
hops_ilp_input replicate_shapes(std::mt19937& rng, const hops_ilp_input& base,
                                std::size_t max_jobs) {
  hops_ilp_input in;
  in.classes = base.classes;
  std::uniform_real_distribution<double> weight(1.0, 1.3);
  for (std::size_t i = 0; i < base.configs.size(); ++i)
    for (int n = 1 + static_cast<int>(rng() % 3); n > 0 && in.configs.size() < max_jobs; --n) {
      const double w = weight(rng);
      in.configs.push_back(base.configs[i]);
      in.value.push_back(base.value[i]);
      for (double& v : in.value.back()) v *= w;
    }
  return in;
}

TEST_CASE("hops: the grouped ILP is within its tolerance of brute force and fits", "[policies]") {
  std::mt19937 rng(23);
  milp_settings ms;
  ms.relative_gap = 0;
  for (int trial = 0; trial < 120; ++trial) {
    INFO("trial " << trial);
    auto in = replicate_shapes(rng, random_ilp(rng, 3), 7);
    in.group_tolerance = trial % 3 == 0 ? 0.05 : 0.5;  // some bins split a shape, some not
    auto r = solve_hops_ilp(in, ms);
    REQUIRE(r);
    REQUIRE(r->solution.optimal());
    REQUIRE(r->choice.size() == in.configs.size());
    CHECK(r->groups <= static_cast<int>(in.configs.size()));
    double value = 0;
    for (std::size_t i = 0; i < in.configs.size(); ++i) {
      REQUIRE(r->choice[i] < static_cast<int>(in.configs[i].size()));
      if (r->choice[i] >= 0) value += in.value[i][r->choice[i]];
    }
    // The handed-out plan is worth at least the grouped optimum, and that is within 1 + t of
    // the per-job optimum.
    CHECK(value >= r->solution.objective - 1e-6);
    CHECK(value * (1 + in.group_tolerance) >= brute_force(in) - 1e-6);
    check_packing(in, *r, pack_hops_solution(in, *r, {}));
    // Within a shape (same configurations, proportional values) a heavier job never gets a
    // worse configuration than a lighter one, nor waits while it runs.
    for (std::size_t a = 0; a < in.configs.size(); ++a)
      for (std::size_t b = 0; b < in.configs.size(); ++b) {
        if (in.configs[a].size() != in.configs[b].size() || in.value[a][0] <= in.value[b][0])
          continue;
        const double ratio = in.value[a][0] / in.value[b][0];
        bool same = true;
        for (std::size_t c = 0; c < in.configs[a].size(); ++c) {
          const auto &x = in.configs[a][c], &y = in.configs[b][c];
          same = same && x.cls == y.cls && x.gpus == y.gpus && x.pieces == y.pieces &&
                 x.whole_servers == y.whole_servers &&
                 std::abs(in.value[a][c] / in.value[b][c] - ratio) < 1e-9 * ratio;
        }
        if (!same || r->choice[b] < 0) continue;
        INFO("jobs " << a << " and " << b);
        REQUIRE(r->choice[a] >= 0);
        CHECK(in.value[a][r->choice[a]] / ratio >= in.value[b][r->choice[b]] - 1e-9);
      }
  }
}

TEST_CASE("hops: grouping shrinks the ILP to one group per shape and weight bin", "[policies]") {
  // Three shapes, 30 jobs each, weights within 1.3x: one group per shape at t = 0.5; one
  // per job at t = 0, with the per-job model's optimum.
  std::mt19937 rng(5);
  hops_ilp_input base;
  while (base.configs.size() != 3) base = random_ilp(rng, 3);
  base.configs.resize(3);
  for (auto& v : base.value) {  // weight (max value) 1, so that t = 0.5 bins [1, 1.5) together
    const double w = *std::max_element(v.begin(), v.end());
    for (double& x : v) x /= w;
  }
  hops_ilp_input in;
  in.classes = base.classes;
  for (int copy = 0; copy < 30; ++copy)
    for (std::size_t i = 0; i < 3; ++i) {
      in.configs.push_back(base.configs[i]);
      in.value.push_back(base.value[i]);
      for (double& v : in.value.back()) v *= 1.0 + 0.01 * copy;
    }
  milp_settings ms;
  in.group_tolerance = 0.5;
  auto grouped = solve_hops_ilp(in, ms);
  in.group_tolerance = 0;
  auto per_job = solve_hops_ilp(in, ms);
  REQUIRE(grouped);
  REQUIRE(per_job);
  CHECK(grouped->groups == 3);
  CHECK(per_job->groups == 90);
  CHECK(grouped->columns < per_job->columns);
  CHECK(grouped->solution.objective * 1.5 >= per_job->solution.objective);
}

TEST_CASE("hops: latency ratio and placement sensitivity by hand", "[policies]") {
  // Arrived at 100 s, now 1000 s, held GPUs for 300 s: waited 1000 - 100 - 300 = 600 s.
  // Expected run time 1200 steps / 2 steps/s = 600 s, so LR = 600 / 600 = 1.
  job j = test::make_job(1, "M", 1, 1200, 100);
  job_view v;
  v.spec = &j;
  v.run_time = 300;
  CHECK(latency_ratio(1000, v, 1200.0 / 2.0) == Approx(1.0));
  CHECK(latency_ratio(1000, v, 0) == 0);
  v.run_time = 2000;  // ran longer than it existed: no negative wait
  CHECK(latency_ratio(1000, v, 600) == 0);
  // One server 10 steps/s, two servers 8 steps/s: 10/8 = 1.25 (< 1.4: low sensitivity).
  CHECK(placement_sensitivity(4, 10, 8) == Approx(1.25));
  CHECK(placement_sensitivity(1, 10, 0) == 1.0);  // one GPU never spans
  CHECK(placement_sensitivity(2, 10, 0) > 1e300);
}

TEST_CASE("metrics: latency ratio and fragmentation by hand", "[policies]") {
  schedule_result r;
  r.total_gpus = 8;
  // Job 0: arrived 0, finished 100, held GPUs 40 s: waited 60 s, LR = 60/40 = 1.5.
  // Job 1: arrived 10, finished 30, held GPUs 20 s: waited 0 s, LR = 0.
  job_record a;
  a.id = 0;
  a.arrival = 0;
  a.finish = 100;
  a.run_time = 40;
  job_record b;
  b.id = 1;
  b.arrival = 10;
  b.finish = 30;
  b.run_time = 20;
  r.jobs = {a, b};
  // Rounds: 3 idle GPUs while 2 jobs wait (counts 3); 5 idle, nobody waits (counts 0); 1 idle
  // while 1 waits (counts 1). Fragmentation = (3 + 0 + 1) / 3 rounds = 4/3.
  round_record r1{0, 5, 3, 4, 2};
  round_record r2{360, 3, 5, 1, 0};
  round_record r3{720, 7, 1, 2, 1};
  r.rounds = {r1, r2, r3};
  const auto m = compute_metrics(r);
  CHECK(m.lr_max == Approx(1.5));
  CHECK(m.lr_avg == Approx(0.75));
  CHECK(m.avg_wait == Approx(30));  // (60 + 0) / 2
  CHECK(m.fragmentation == Approx(4.0 / 3.0));
}

TEST_CASE("hops: the window takes the highest latency ratios first", "[policies]") {
  // One 4-GPU v100 server; both jobs need all 4 GPUs at 1 step/s. Both arrived at 0 and have
  // not run; now = 500 s. E0 = 1000 s -> LR 0.5; E1 = 100 s -> LR 5. The window stops once
  // minimum needs reach 4 GPUs: it holds job 1 only, which runs.
  const cluster cl = make_cluster({{0, "v", "v100", 0, 4, 1.0}});
  throughput_table t;
  t.set_isolated("v100", {"M", 4}, 1.0);
  server_throughput rt(cl, t);
  std::vector<job> jobs = {test::make_job(0, "M", 4, 1000), test::make_job(1, "M", 4, 100)};
  SECTION("latency ratio alone (critical_slack = 0, the paper's rule)") {
    hops_params hp;
    hp.critical_slack = 0;
    hops h("hops", hp);
    auto p = h.plan(make_snapshot(cl, rt, jobs, 500));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 1);
    CHECK(p->assignments[0].job == 1);
    CHECK(h.last_round().window_jobs == 1);
    CHECK(h.last_round().max_latency_ratio == Approx(5.0));
    CHECK(h.last_round().ilp_ran);
  }
  SECTION("a makespan-critical job goes first") {
    // Remaining work 4 x 1000 + 4 x 100 GPU-s over 4 GPUs drains in 1100 s; the longest job
    // needs 1000 s. L = max(1100, 1000) = 1100 and job 0's 1000 s is within 10% of it:
    // delaying job 0 by a round (360 s) would end the queue at 1360 s instead of ~1100 s.
    hops h("hops", hops_params{});
    auto p = h.plan(make_snapshot(cl, rt, jobs, 500));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 1);
    CHECK(p->assignments[0].job == 0);
  }
}

TEST_CASE("hops: the higher latency ratio gets the faster server of one GPU type", "[policies]") {
  // Two 1-GPU v100 servers, speed 1 and 2 (Gavel sees one type). Job X waited 200 s with
  // E = 100 s (LR 2), job Y arrived now (LR 0); bias 1, lambda 1: weights 3 and 1. G = 2 on
  // the fast server, 1 on the slow one. X fast + Y slow = 3*2 + 1*1 = 7 beats 3*1 + 1*2 = 5.
  const cluster cl = make_cluster({{0, "slow", "v100", 0, 1, 1.0}, {0, "fast", "v100", 0, 1, 2.0}});
  throughput_table t;
  t.set_isolated("v100", {"M", 1}, 1.0);
  server_throughput rt(cl, t);
  std::vector<job> jobs = {test::make_job(0, "M", 1, 200, 0), test::make_job(1, "M", 1, 200, 200)};
  // E: best config is the fast server, 2 steps/s: 100 s for both.
  hops_params hp;
  hp.critical_slack = 0;  // both would be makespan-critical in so small a queue
  hp.size_value = 0;      // the paper's objective, as computed above
  hops h("hops", hp);
  auto p = h.plan(make_snapshot(cl, rt, jobs, 200));
  REQUIRE(p);
  REQUIRE(p->assignments.size() == 2);
  CHECK(find(*p, 0)->shares == std::vector<server_share>{{1, 1}});
  CHECK(find(*p, 1)->shares == std::vector<server_share>{{0, 1}});
}

TEST_CASE("hops: fragments go to low-sensitivity jobs beyond the window", "[policies]") {
  // Two 4-GPU v100 servers. A and B need 3 GPUs each and are placement-sensitive (one server
  // 10 steps/s, two servers 5: ratio 2). C needs 2 GPUs. With window = 0.75 the window holds
  // jobs while their minimum needs stay within 6 GPUs: A (3), B (6), not C (8). A and B are
  // sensitive, so the ILP offers them one server each and puts them on different servers,
  // leaving 1 + 1 GPUs. C is beyond the window; fragment filling spreads it over both servers
  // when it has low sensitivity (10 vs 9: 1.11 < 1.4), not when it is sensitive.
  const cluster cl = make_cluster({{0, "a", "v100", 0, 4, 1.0}, {0, "b", "v100", 0, 4, 1.0}});
  throughput_table t;
  t.set_isolated("v100", {"S", 3}, 10);
  t.set_isolated("v100", {"S", 3}, 5, false);
  t.set_isolated("v100", {"L", 2}, 10);
  t.set_isolated("v100", {"L", 2}, 9, false);
  t.set_isolated("v100", {"H", 2}, 10);
  t.set_isolated("v100", {"H", 2}, 5, false);
  server_throughput rt(cl, t);
  hops_params hp;
  hp.window = 0.75;
  hp.critical_slack = 0;
  for (const char* c_type : {"L", "H"}) {
    SECTION(c_type) {
      // A and B waited longer (arrived at 0), C arrived at 100: LR(C) < LR(A), LR(B).
      std::vector<job> jobs = {test::make_job(0, "S", 3, 1000, 0),
                               test::make_job(1, "S", 3, 1000, 0),
                               test::make_job(2, c_type, 2, 1000, 100)};
      hops h("hops", hp);
      auto p = h.plan(make_snapshot(cl, rt, jobs, 200));
      REQUIRE(p);
      CHECK(h.last_round().window_jobs == 2);
      REQUIRE(find(*p, 0));
      REQUIRE(find(*p, 1));
      CHECK(find(*p, 0)->shares.size() == 1);
      CHECK(find(*p, 1)->shares.size() == 1);
      if (std::string(c_type) == "L") {
        REQUIRE(find(*p, 2));
        CHECK(find(*p, 2)->shares == std::vector<server_share>{{0, 1}, {1, 1}});
        CHECK(h.last_round().placed_by_filling == 1);
        CHECK(h.last_round().idle_gpus == 0);
      } else {
        CHECK_FALSE(find(*p, 2));
        CHECK(h.last_round().idle_gpus == 2);
      }
    }
  }
  SECTION("filling off") {
    hops_params off = hp;
    off.fill_fragments = false;
    std::vector<job> jobs = {test::make_job(0, "S", 3, 1000, 0), test::make_job(1, "S", 3, 1000, 0),
                             test::make_job(2, "L", 2, 1000, 100)};
    hops h("hops", off);
    auto p = h.plan(make_snapshot(cl, rt, jobs, 200));
    REQUIRE(p);
    CHECK_FALSE(find(*p, 2));
  }
}

TEST_CASE("hops: a job's acceptable GPU counts, end to end", "[policies]") {
  // One 4-GPU server. The job accepts 1, 2 or 4 GPUs at 1, 1.8 and 3.2 steps/s; G against the
  // slowest (1 GPU) is 1, 1.8 and 3.2, so alone it takes 4 GPUs and its 3200 steps take
  // 1000 s: finish at 1000 s, 4 GPUs x 1000 s = 4000 GPU-seconds. (The default size_value
  // term, + GPUs, only strengthens the choice: 2, 3.8, 7.2.)
  const cluster cl = make_cluster({{0, "a", "v100", 0, 4, 1.0}});
  throughput_table t;
  t.set_isolated("v100", {"M", 1}, 1.0);
  t.set_isolated("v100", {"M", 2}, 1.8);
  t.set_isolated("v100", {"M", 4}, 3.2);
  job j = test::make_job(0, "M", 1, 3200);
  j.acceptable_gpus = {4, 2, 1, 2};
  CHECK(gpu_options(j) == std::vector<int>{1, 2, 4});
  auto pol = make_policy("hops");
  REQUIRE(pol);
  sim_config cfg;
  auto r = simulate(cl, t, {j}, *pol.value(), cfg);
  REQUIRE(r);
  REQUIRE(r->complete);
  CHECK(r->jobs[0].finish == Approx(1000));
  CHECK(r->jobs[0].gpu_seconds == Approx(4000));
}

TEST_CASE("hops: plans without executor rates and with the greedy pass", "[policies]") {
  // The same small instance planned three ways stays valid: no snapshot::rates (the policy
  // builds estimates from the per-type rows), and use_ilp = 0.
  const cluster cl = make_cluster({{0, "a", "v100", 0, 4, 1.0}, {0, "b", "k80", 0, 4, 1.0}});
  throughput_table t;
  for (const char* g : {"v100", "k80"}) {
    t.set_isolated(g, {"M", 1}, std::string(g) == "v100" ? 3.0 : 1.0);
    t.set_isolated(g, {"M", 2}, std::string(g) == "v100" ? 5.0 : 1.8);
  }
  server_throughput rt(cl, t);
  std::vector<job> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(test::make_job(i, "M", 1 + i % 2, 500, 10.0 * i));
  for (int mode = 0; mode < 3; ++mode) {
    INFO("mode " << mode);
    hops_params hp;
    hp.use_ilp = mode != 2;
    hops h("hops", hp);
    snapshot s = make_snapshot(cl, rt, jobs, 100);
    if (mode == 1) s.rates = nullptr;
    auto p = h.plan(s);
    REQUIRE(p);
    std::vector<int> used(cl.servers.size(), 0);
    for (const auto& as : p->assignments) {
      const job& j = jobs[as.job];
      CHECK(as.gpus() == j.scale_factor);
      for (const auto& sh : as.shares) used[sh.server] += sh.gpus;
    }
    for (const auto& sv : cl.servers) CHECK(used[sv.id] <= sv.gpus);
    // Demand 1+2+1+2+1+2 = 9 GPUs on 8: all but one job fit, nothing idles needlessly.
    CHECK(h.last_round().idle_gpus <= 1);
  }
}

TEST_CASE("hops: the job-set file carries acceptable GPU counts", "[policies]") {
  const std::string path = "/tmp/tessera_test_hops_jobs.toml";
  {
    std::ofstream f(path);
    f << "[[job]]\njob_type = \"M\"\nscale_factor = 2\ntotal_steps = 10\n"
         "acceptable_gpus = [1, 2, 4]\n\n[[job]]\njob_type = \"M\"\ntotal_steps = 5\n";
  }
  auto jobs = load_jobs(path);
  REQUIRE(jobs);
  REQUIRE(jobs->size() == 2);
  CHECK((*jobs)[0].acceptable_gpus == std::vector<int>{1, 2, 4});
  CHECK((*jobs)[1].acceptable_gpus.empty());
  CHECK(gpu_options((*jobs)[1]) == std::vector<int>{1});
  {
    std::ofstream f(path);
    f << "[[job]]\njob_type = \"M\"\ntotal_steps = 10\nacceptable_gpus = [2, 0]\n";
  }
  auto bad = load_jobs(path);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains(":4: field 'acceptable_gpus'"));
  std::remove(path.c_str());
}

TEST_CASE("hops: a configuration's share sizes live inline, compare by value, refuse a fifth",
          "[hops]") {
  share_sizes a{3, 1};
  CHECK(a.size() == 2);
  CHECK(a.to_vector() == std::vector<int>{3, 1});
  share_sizes b;
  CHECK(b.empty());
  b.push_back(3);
  CHECK(a != b);
  b.push_back(1);
  CHECK(a == b);
  b.push_back(1);
  CHECK(a != b);  // same prefix, one more
  b.push_back(2);
  CHECK(b.size() == share_sizes::max_size);
  CHECK_THROWS_AS(b.push_back(1), std::length_error);
}

TEST_CASE("hops: a job charged a restart keeps its servers until the restart is amortised",
          "[policies]") {
  // One 4-GPU v100 server. Round A (t = 0): job 0 (4 GPUs, 100,000 steps at 1 step/s) alone,
  // placed. Round B (t = 60): job 1 (4 GPUs, E = 100 s) arrived at 10 s, LR 0.5 against job
  // 0's 0, so Hops' latency-ratio rule gives it the server. With a 100 s restart charged to
  // job 0 and restart_amortize 8, job 0 started 60 s ago (< 800 s): it keeps the server.
  const cluster cl = make_cluster({{0, "v", "v100", 0, 4, 1.0}});
  throughput_table t;
  t.set_isolated("v100", {"M", 4}, 1.0);
  server_throughput rt(cl, t);
  std::vector<job> jobs = {test::make_job(0, "M", 4, 100000, 0),
                           test::make_job(1, "M", 4, 100, 10)};
  auto plan_b = [&](double amortize, double restart) {
    hops_params hp;
    hp.critical_slack = 0;
    hp.restart_amortize = amortize;
    hops h("hops", hp);
    snapshot a = make_snapshot(cl, rt, {jobs[0]}, 0);
    a.jobs[0].spec = &jobs[0];  // the snapshot's own copy of the list is gone
    a.jobs[0].restart_seconds = restart;
    auto pa = h.plan(a);
    REQUIRE(pa);
    REQUIRE(pa->assignments.size() == 1);
    snapshot b = make_snapshot(cl, rt, jobs, 60, {60, 0});
    for (auto& v : b.jobs) v.restart_seconds = restart;
    b.last_plan = &pa.value();
    auto pb = h.plan(b);
    REQUIRE(pb);
    REQUIRE(pb->assignments.size() == 1);
    return pb->assignments[0].job;
  };
  CHECK(plan_b(8, 100) == 0);    // pinned
  CHECK(plan_b(0, 100) == 1);    // off: the paper's rule
  CHECK(plan_b(8, 0) == 1);      // no restart cost: unchanged
  CHECK(plan_b(0.5, 100) == 1);  // amortised after 50 s: 60 s have passed
}
