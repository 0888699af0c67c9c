// Gavel's space-sharing ("_packed") policies: their allocations on small cases worked by hand,
// and properties of their plans on random small clusters (no GPU holds more than two jobs,
// pairs only where the table has a co-location throughput, every job finishes).
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "policies/fifo_packed.hpp"
#include "policies/finish_time_fairness_packed.hpp"
#include "policies/max_min_fairness_packed.hpp"
#include "policies/min_total_duration_packed.hpp"
#include "policies/packed_lp.hpp"
#include "policies/registry.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// `n` jobs of type "a" (scale 1, 1000 steps) on `gpus` V100s; "a" alone at 10 steps/s and
/// beside another "a" at `shared` steps/s each.
struct same_type {
  cluster cl;
  throughput_table table;
  std::vector<job> jobs;
  same_type(int n, int gpus, double shared) : cl(make_cluster({{0, "s", "v100", 0, gpus, 1.0}})) {
    table.set_isolated("v100", {"a", 1}, 10);
    table.set_colocated("v100", {"a", 1}, {"a", 1}, {shared, shared});
    for (int i = 0; i < n; ++i) jobs.push_back(test::make_job(i, "a", 1, 1000));
  }
  /// A snapshot of every job fresh, with `rates` as the executor's model.
  snapshot snap(const server_throughput& rates) const {
    const std::vector<std::vector<double>> tput(jobs.size(), {10.0});
    snapshot s = test::make_snapshot(cl, jobs, tput);
    s.rates = &rates;
    return s;
  }
};

/// Each job's effective throughput under `a` (alone plus in pairs) with `shared` per pair.
std::vector<double> effective(const allocation& a, double alone, double shared) {
  std::vector<double> e(a.x.size(), 0.0);
  for (std::size_t m = 0; m < a.x.size(); ++m)
    for (double x : a.x[m]) e[m] += x * alone;
  for (const auto& p : a.pairs)
    for (double x : p.x) {
      e[p.a] += x * shared;
      e[p.b] += x * shared;
    }
  return e;
}

/// Wraps a policy and keeps every plan it makes.
class recording_policy final : public test::observed_policy {
 public:
  using observed_policy::observed_policy;
  std::vector<round_plan> plans;

 private:
  void see(const snapshot&, const round_plan& p) override { plans.push_back(p); }
};

}  // namespace

TEST_CASE("max_min_fairness_packed pairs two jobs on one GPU when sharing pays",
          "[policies][packing]") {
  same_type f(2, 1, 8);  // together 16 steps/s against 10 alone
  server_throughput rates(f.cl, f.table);
  max_min_fairness_packed pol(true);
  auto a = pol.allocate(f.snap(rates));
  REQUIRE(a);
  REQUIRE(a->pairs.size() == 1);
  CHECK(a->pairs[0].a == 0);
  CHECK(a->pairs[0].b == 1);
  const auto e = effective(*a, 10, 8);
  CHECK(e[0] == Approx(8));  // sharing all the time, against 5 time-sliced
  CHECK(e[1] == Approx(8));
}

TEST_CASE("max_min_fairness_packed time-slices when sharing does not pay", "[policies][packing]") {
  same_type f(2, 1, 4);  // together 8 steps/s against 10 alone
  server_throughput rates(f.cl, f.table);
  max_min_fairness_packed pol(true);
  auto a = pol.allocate(f.snap(rates));
  REQUIRE(a);
  const auto e = effective(*a, 10, 4);
  CHECK(e[0] == Approx(5));
  CHECK(e[1] == Approx(5));
  for (const auto& p : a->pairs)
    for (double x : p.x) CHECK(x == Approx(0).margin(1e-9));
}

TEST_CASE("packed LP: a class of identical jobs spreads its pairs over every member pair",
          "[policies][packing]") {
  same_type f(4, 2, 8);  // 4 jobs, 2 GPUs: every job can share all the time
  server_throughput rates(f.cl, f.table);
  const snapshot s = f.snap(rates);
  packed_lp_input in;
  in.alone.assign(4, {1.0});
  in.weight.assign(4, 0.1);
  auto r = solve_packed_lp(s, in);
  REQUIRE(r);
  CHECK(r->classes == 1);
  CHECK(r->value == Approx(0.8));     // each at 8 steps/s x weight 0.1
  CHECK(r->alloc.pairs.size() == 6);  // 4 choose 2, each 1/3 of the time
  std::vector<double> time(4, 0.0);
  double gpus = 0;
  for (const auto& p : r->alloc.pairs) {
    CHECK(p.x[0] == Approx(1.0 / 3));
    time[p.a] += p.x[0];
    time[p.b] += p.x[0];
    gpus += p.x[0];
  }
  for (double t : time) CHECK(t == Approx(1));
  CHECK(gpus == Approx(2));
}

TEST_CASE("packed LP: without rates or co-location entries it pairs nothing",
          "[policies][packing]") {
  same_type f(2, 1, 8);
  snapshot s = test::make_snapshot(f.cl, f.jobs, {{10.0}, {10.0}});
  packed_lp_input in;
  in.alone.assign(2, {1.0});
  in.weight.assign(2, 1.0);
  auto r = solve_packed_lp(s, in);  // no rates
  CHECK(shares_no_gpu(s));
  CHECK(f.table.has_colocated());
  CHECK_FALSE(throughput_table{}.has_colocated());
  REQUIRE(r);
  CHECK(r->alloc.pairs.empty());
  CHECK(r->value == Approx(0.5));
  in.weight.assign(1, 1.0);
  CHECK_FALSE(solve_packed_lp(s, in));  // rows and weights must match the jobs
}

TEST_CASE("min_total_duration_packed shortens the makespan when sharing pays",
          "[policies][packing]") {
  same_type f(2, 1, 8);
  server_throughput rates(f.cl, f.table);
  min_total_duration_packed pol(true);
  auto a = pol.allocate(f.snap(rates));
  REQUIRE(a);
  // Sharing: both finish 1000 steps at 8 steps/s in 125 s (200 s time-sliced).
  CHECK(pol.last_makespan() == Approx(125));
}

TEST_CASE(
    "packed policies: plans on random small clusters hold at most two jobs per GPU and "
    "pair only where the table has a co-location throughput",
    "[policies][packing][property]") {
  for (const char* name : {"max_min_fairness_packed", "min_total_duration_packed", "fifo_packed",
                           "finish_time_fairness_packed"}) {
    SECTION(name) {
      std::mt19937 rng(15);
      int pairs_seen = 0;
      for (int trial = 0; trial < 20; ++trial) {
        auto in = test::random_instance(rng, test::instance_limits{4, 10, 5000});
        test::add_random_colocations(in, rng);
        auto made = make_policy(name);
        REQUIRE(made);
        recording_policy pol(std::move(made.value()));
        auto r = simulate(in.cl, in.table, in.jobs, pol, sim_config{});
        INFO("trial " << trial);
        REQUIRE(r);
        CHECK(r->complete);
        for (const auto& p : pol.plans) {
          // Jobs on each GPU: a pair's two jobs fill its GPUs once, so count distinct
          // occupants per server and compare with twice its GPUs and with the units placed.
          std::map<int, int> units, occupants;
          for (const auto& as : p.assignments) {
            for (const auto& sh : as.shares) {
              occupants[sh.server] += sh.gpus;
              if (as.partner < 0 || as.job < as.partner) units[sh.server] += sh.gpus;
            }
            if (as.partner < 0) continue;
            ++pairs_seen;
            const job* a = nullptr;
            const job* b = nullptr;
            for (const auto& j : in.jobs) {
              if (j.id == as.job) a = &j;
              if (j.id == as.partner) b = &j;
            }
            REQUIRE(a);
            REQUIRE(b);
            CHECK(a->scale_factor == b->scale_factor);
            const auto& type = in.cl.types[as.type].name;
            const job_key ka{a->job_type, a->scale_factor}, kb{b->job_type, b->scale_factor};
            const auto own = in.table.colocated(type, ka, kb);
            const auto mirror = in.table.colocated(type, kb, ka);
            CHECK((own || mirror));
          }
          for (const auto& [server, n] : units) {
            CHECK(n <= in.cl.servers[server].gpus);
            CHECK(occupants[server] <= 2 * in.cl.servers[server].gpus);
          }
        }
        CHECK(compute_metrics(r.value()).utilisation <= 1.0 + 1e-9);
      }
      CHECK(pairs_seen > 0);  // the instances do exercise sharing
    }
  }
}

TEST_CASE("fifo_packed pairs the head of the queue only when sharing beats the threshold",
          "[policies][packing]") {
  // Three jobs on 2 GPUs: FIFO runs jobs 0 and 1, job 2 waits. At 8 steps/s each beside
  // another job the pair's normalised throughput is 8/10 + 8/10 = 1.6 > 1.5: job 2 shares
  // job 0's GPU (the first running job; both partners are equally good). At 7 it is 1.4.
  for (double shared : {8.0, 7.0}) {
    same_type f(3, 2, shared);
    server_throughput rates(f.cl, f.table);
    fifo_packed pol(1.5);
    auto a = pol.allocate(f.snap(rates));
    REQUIRE(a);
    CHECK(a->x[1][0] == 1.0);
    CHECK(a->x[2][0] == 0.0);
    if (shared == 8.0) {
      REQUIRE(a->pairs.size() == 1);
      CHECK(a->pairs[0].a == 0);
      CHECK(a->pairs[0].b == 2);
      CHECK(a->pairs[0].x[0] == 1.0);
      CHECK(a->x[0][0] == 0.0);  // job 0's GPU went to the pair
    } else {
      CHECK(a->pairs.empty());
      CHECK(a->x[0][0] == 1.0);
    }
  }
}

TEST_CASE("fifo_packed gives each running job at most one partner and keeps the queue's order",
          "[policies][packing]") {
  // Five jobs on 2 GPUs, sharing pays (1.6): jobs 2 and 3 pair with jobs 0 and 1; job 4 finds
  // every running job taken and waits.
  same_type f(5, 2, 8);
  server_throughput rates(f.cl, f.table);
  fifo_packed pol(1.5);
  auto a = pol.allocate(f.snap(rates));
  REQUIRE(a);
  REQUIRE(a->pairs.size() == 2);
  std::map<std::size_t, int> in_pairs;
  for (const auto& p : a->pairs) {
    ++in_pairs[p.a];
    ++in_pairs[p.b];
  }
  for (std::size_t m = 0; m < 4; ++m) CHECK(in_pairs[m] == 1);
  CHECK(in_pairs.count(4) == 0);
  CHECK(a->x[4][0] == 0.0);
  // Without the executor's rates there are no co-location entries: plain fifo_perf.
  auto plain =
      pol.allocate(test::make_snapshot(f.cl, f.jobs, std::vector<std::vector<double>>(5, {10.0})));
  REQUIRE(plain);
  CHECK(plain->pairs.empty());
}

TEST_CASE("finish_time_fairness_packed: rho falls to the shared rate's when sharing pays",
          "[policies][packing]") {
  // Two fresh jobs of 1000 steps on one V100 (10 steps/s alone): the isolated share is half
  // the GPU, so iso = 1000 / 5 = 200 s. Time-sliced each gets 5 steps/s, rho = 1; sharing the
  // GPU at 8 steps/s each gives rho = (1000 / 8) / 200 = 0.625; at 4 each sharing loses and
  // rho stays 1.
  for (double shared : {8.0, 4.0}) {
    same_type f(2, 1, shared);
    server_throughput rates(f.cl, f.table);
    finish_time_fairness_packed pol(true, 1e-4, 40, true);
    auto a = pol.allocate(f.snap(rates));
    REQUIRE(a);
    const double expect = shared == 8.0 ? 0.625 : 1.0;
    CHECK(pol.last_rho() == Approx(expect).epsilon(1e-3));
    const auto e = effective(*a, 10, shared);
    CHECK(std::min(e[0], e[1]) == Approx(1000.0 / (200.0 * expect)).epsilon(1e-3));
  }
}

TEST_CASE(
    "packed policies: where the table has no co-location entry, each runs as its unpacked "
    "twin, job for job, and the twin's LP optimum is the class LP's",
    "[policies][packing][property]") {
  // Twins with the same options: min_total_duration_packed's efficiency stage is off by
  // default and min_total_duration's on, so both are set.
  const std::vector<std::pair<const char*, const char*>> twins = {
      {"max_min_fairness_packed", "max_min_fairness_perf"},
      {"min_total_duration_packed", "min_total_duration_perf"},
      {"finish_time_fairness_packed", "finish_time_fairness_perf"}};
  std::mt19937 rng(23);
  int compared = 0, optima = 0;
  for (int trial = 0; trial < 15; ++trial) {
    const auto in = test::random_instance(rng, test::instance_limits{4, 10, 5000});
    REQUIRE_FALSE(in.table.has_colocated());
    for (const auto& [packed, plain] : twins) {
      const std::map<std::string, double> o =
          std::string(packed) == "min_total_duration_packed"
              ? std::map<std::string, double>{{"efficiency_stage", 0}}
              : std::map<std::string, double>{};
      auto a = make_policy(packed, o);
      auto b = make_policy(plain, o);
      REQUIRE(a);
      REQUIRE(b);
      auto ra = simulate(in.cl, in.table, in.jobs, **a, sim_config{});
      auto rb = simulate(in.cl, in.table, in.jobs, **b, sim_config{});
      INFO("trial " << trial << ": " << packed << " against " << plain);
      REQUIRE(ra);
      REQUIRE(rb);
      REQUIRE(ra->jobs.size() == rb->jobs.size());
      for (std::size_t i = 0; i < ra->jobs.size(); ++i) {
        CHECK(ra->jobs[i].finish == rb->jobs[i].finish);
        CHECK(ra->jobs[i].restarts == rb->jobs[i].restarts);
      }
      ++compared;
    }
    // The LP both solve, on the instance's jobs fresh: allocation_lp's t* is the class LP's
    // where every job can run somewhere (the class LP holds t* at 0 otherwise).
    server_throughput rates(in.cl, in.table);
    std::vector<std::vector<double>> tput;
    for (const auto& j : in.jobs) tput.push_back(type_throughputs(in.cl, in.table, j));
    snapshot s = test::make_snapshot(in.cl, in.jobs, tput);
    s.rates = &rates;
    packed_lp_input lp;
    bool runs_everywhere = true;
    for (std::size_t m = 0; m < in.jobs.size(); ++m) {
      double best = 0;
      for (std::size_t j = 0; j < tput[m].size(); ++j)
        if (in.cl.types[j].gpus >= in.jobs[m].scale_factor) best = std::max(best, tput[m][j]);
      runs_everywhere = runs_everywhere && best > 0;
      lp.alone.push_back(tput[m]);
      for (double& v : lp.alone.back()) v = best > 0 ? v / best : 0.0;
      lp.weight.push_back(1.0);
    }
    allocation_lp plain;
    allocation_lp_input rows = lp_input_for(s);
    rows.rows = lp.alone;
    auto fast = plain.solve(rows, allocation_objective::max_min);
    auto cold = solve_packed_lp(s, lp);
    REQUIRE(fast);
    REQUIRE(cold);
    CHECK(cold->pair_columns == 0);
    if (runs_everywhere) {
      CHECK(fast->value == Approx(cold->value).epsilon(1e-6));
      ++optima;
    }
  }
  CHECK(compared == 45);
  CHECK(optima >= 5);
}
