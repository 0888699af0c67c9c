// Hadar / HadarE (policies/hadar.hpp) and the simulator's support for forked jobs
// (runtime/sim/sim_executor.hpp: run_copies, copy_aggregation): property tests on random small
// clusters, hand-checked prices and admissions, and hand-computed finish times of copies.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "policies/hadar.hpp"
#include "policies/registry.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::fixed_plan;
using tessera::test::make_job;
using tessera::test::make_snapshot;
using tessera::test::random_instance;

namespace {

/// Checks every plan of the wrapped policy: per-server capacity, each (job, copy) once,
/// copies numbered 0..n-1, copies of a job on pairwise distinct servers, at most `max_copies`
/// copies, scale-factor GPUs per copy on types the job can run on.
class hadar_checker final : public test::observed_policy {
 public:
  hadar_checker(std::unique_ptr<policy> inner, int max_copies)
      : observed_policy(std::move(inner)), max_copies_(max_copies) {}
  void see(const snapshot& s, const round_plan& p) override {
    std::vector<int> used(s.cl->servers.size(), 0);
    std::set<std::pair<job_id, int>> seen;
    std::map<job_id, std::set<int>> servers_of;
    std::map<job_id, int> copies;
    for (const auto& as : p.assignments) {
      REQUIRE(seen.insert({as.job, as.copy}).second);
      const job_view* jv = nullptr;
      for (const auto& v : s.jobs)
        if (v.spec->id == as.job) jv = &v;
      REQUIRE(jv != nullptr);
      REQUIRE(as.gpus() == jv->spec->scale_factor);
      ++copies[as.job];
      for (const auto& sh : as.shares) {
        const auto& sv = s.cl->servers.at(sh.server);
        REQUIRE(sh.gpus > 0);
        REQUIRE(jv->throughput[sv.type_index] > 0);
        used[sh.server] += sh.gpus;
        // Copies on separate servers: no server holds two copies of one job.
        REQUIRE(servers_of[as.job].insert(sh.server).second);
      }
    }
    for (const auto& sv : s.cl->servers) REQUIRE(used[sv.id] <= sv.gpus);
    for (const auto& [id, n] : copies) {
      REQUIRE(n <= max_copies_);
      for (int c = 0; c < n; ++c) REQUIRE(seen.count({id, c}) == 1);
      max_seen = std::max(max_seen, n);
    }
  }
  int max_seen = 0;

 private:
  int max_copies_;
};

/// Records the most copies each job was planned as.
class copy_counter final : public test::observed_policy {
 public:
  using observed_policy::observed_policy;
  std::map<job_id, int> most;
  bool forked = false;

 private:
  void see(const snapshot&, const round_plan& p) override {
    for (const auto& as : p.assignments) {
      most[as.job] = std::max(most[as.job], as.copy + 1);
      forked = forked || as.copy > 0;
    }
  }
};

hadar_params hand_params() {
  hadar_params p;
  p.price_low = 0.15;
  p.price_high = 1.0;
  p.critical_share = 0;
  p.value_prices = false;
  return p;
}

}  // namespace

TEST_CASE("hadar/hadare: valid plans on random clusters, every job finishes",
          "[policies][hadar][property]") {
  for (const int max_copies : {1, 3}) {
    std::mt19937 rng(77 + max_copies);
    int forked_rounds = 0;
    for (int trial = 0; trial < 40; ++trial) {
      auto in = random_instance(rng);
      INFO("max_copies " << max_copies << " trial " << trial);
      auto made = max_copies == 1 ? make_policy("hadar")
                                  : make_policy("hadare", {{"max_copies", max_copies}});
      REQUIRE(made);
      hadar_checker pol(std::move(made.value()), max_copies);
      sim_config cfg;
      auto r = simulate(in.cl, in.table, in.jobs, pol, cfg);
      REQUIRE(r);
      CHECK(r->complete);
      for (const auto& j : r->jobs) {
        CHECK(j.finish >= j.arrival);
        CHECK(j.steps_done == Approx(j.total_steps));
      }
      auto m = compute_metrics(r.value());
      CHECK(m.utilisation <= 1.0 + 1e-9);
      CHECK(m.avg_wait >= -1e-9);
      if (pol.max_seen > 1) ++forked_rounds;
      if (max_copies == 1) CHECK(pol.max_seen <= 1);
    }
    if (max_copies > 1) CHECK(forked_rounds > 0);  // HadarE did fork somewhere
  }
}

TEST_CASE("forking policies never fork a job past its own max_copies", "[policies][property]") {
  // Half the jobs may not be forked (max_copies = 1, as a program that does not average), the
  // rest at most twice: hadare and tessera keep to both on random clusters, and the round
  // loop's validation would refuse a plan that did not.
  for (const char* name : {"hadare", "tessera"}) {
    std::mt19937 rng(4242);
    int forked = 0;
    for (int trial = 0; trial < 30; ++trial) {
      auto in = random_instance(rng);
      for (auto& j : in.jobs) j.max_copies = j.id % 2 == 0 ? 1 : 2;
      INFO(name << " trial " << trial);
      auto made = make_policy(name, {{"max_copies", 3}});
      REQUIRE(made);
      copy_counter pol(std::move(made.value()));
      auto r = simulate(in.cl, in.table, in.jobs, pol, sim_config{});
      REQUIRE(r);  // validate_plan ran every round
      CHECK(r->complete);
      for (const auto& [id, n] : pol.most) CHECK(n <= (id % 2 == 0 ? 1 : 2));
      forked += pol.forked ? 1 : 0;
    }
    CHECK(forked > 0);  // the jobs that may be forked were, somewhere
  }
}

TEST_CASE("validate_plan refuses a copy past the job's max_copies", "[policies][round_loop]") {
  const cluster cl = make_cluster({{0, "a", "v100", 0, 1, 1.0}, {0, "b", "v100", 0, 1, 1.0}});
  job j;
  j.id = 4;
  j.job_type = "x";
  j.total_steps = 100;
  j.max_copies = 1;
  std::vector<job_view> views(1);
  views[0].spec = &j;
  views[0].throughput = {1.0};
  snapshot s;
  s.cl = &cl;
  s.jobs = views;
  round_plan p;
  p.assignments.push_back(assignment{4, 0, 0, {{0, 1}}});
  p.assignments.push_back(assignment{4, 1, 0, {{1, 1}}});
  auto st = validate_plan(s, p, "somepolicy");
  REQUIRE_FALSE(st);
  CHECK(st.err().message ==
        "somepolicy forked job 4 into copy 1; it allows at most 1 (max_copies)");
  j.max_copies = 2;
  CHECK(validate_plan(s, p, "somepolicy"));
}

TEST_CASE("hadar: the exponential price, hand-checked", "[policies][hadar]") {
  // p(f) = L (U/L)^f.  f = 0 gives L; f = 1 gives U.
  CHECK(hadar_price(0.05, 1.0, 0, 4) == Approx(0.05));
  CHECK(hadar_price(0.05, 1.0, 4, 4) == Approx(1.0));
  // L = 0.25, U = 1, f = 2/4: 0.25 * 4^0.5 = 0.5.
  CHECK(hadar_price(0.25, 1.0, 2, 4) == Approx(0.5));
  // L = 0.05, U = 1, f = 3/4: 0.05 * 20^0.75 = 0.05 * 9.4574 = 0.47287.
  CHECK(hadar_price(0.05, 1.0, 3, 4) == Approx(0.472871).epsilon(1e-5));
  // Two GPUs from an empty 2-GPU pool, L = 0.25, U = 1: p(0/2) + p(1/2) = 0.25 + 0.5.
  CHECK(hadar_cost(0.25, 1.0, 0, 2, 2) == Approx(0.75));
  // Monotone in utilisation.
  for (int u = 0; u < 8; ++u) CHECK(hadar_price(0.1, 2, u, 8) < hadar_price(0.1, 2, u + 1, 8));
}

TEST_CASE("hadar: admission only when utility exceeds the priced cost", "[policies][hadar]") {
  // One 1-GPU V100 server and one 1-GPU K80 server; two fresh 1-GPU jobs (weight w = 1, no
  // wait), equal size, so job 0 goes first. L = 0.15, U = 1, prices not value-scaled.
  const cluster cl = make_cluster({{0, "v", "v100", 0, 1, 1.0}, {0, "k", "k80", 0, 1, 1.0}});
  std::vector<job> jobs = {make_job(0, "a", 1, 1000), make_job(1, "a", 1, 1000)};

  SECTION("a placement at 10% of the job's best speed is turned away") {
    // Job 0: V100 payoff = 1*1*(10/10) - p(0/1) = 1 - 0.15 = 0.85; K80 payoff 0.1 - 0.15 < 0
    // -> V100. Job 1: only the K80 is free: payoff = 1*1*(1/10) - 0.15 = -0.05 -> rejected.
    auto pol = make_hadar_policy("hadar", hand_params());
    auto p = pol->plan(make_snapshot(cl, jobs, {{10, 1}, {10, 1}}));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 1);
    CHECK(p->assignments[0].job == 0);
    CHECK(p->assignments[0].shares == std::vector<server_share>{{0, 1}});
  }
  SECTION("at 20% of its best speed it is admitted") {
    // Job 1 on the K80: payoff = 1*1*(2/10) - 0.15 = +0.05 > 0 -> admitted.
    auto pol = make_hadar_policy("hadar", hand_params());
    auto p = pol->plan(make_snapshot(cl, jobs, {{10, 1}, {10, 2}}));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 2);
    CHECK(p->assignments[1].job == 1);
    CHECK(p->assignments[1].shares == std::vector<server_share>{{1, 1}});
    CHECK(p->assignments[1].type == 1);
  }
  SECTION("value-scaled prices make the slow pool cheap") {
    // K80 pool value = mean over both jobs of rate/best = (1/10 + 1/10) / 2 = 0.1, so its
    // price is 0.1 * 0.15 = 0.015 and job 1's payoff is 0.1 - 0.015 = 0.085 > 0.
    auto hp = hand_params();
    hp.value_prices = true;
    auto pol = make_hadar_policy("hadar", hp);
    auto p = pol->plan(make_snapshot(cl, jobs, {{10, 1}, {10, 1}}));
    REQUIRE(p);
    CHECK(p->assignments.size() == 2);
  }
  SECTION("an ageing weight admits the waiting job") {
    // At t = 3600 s job 1 (arrived at 0, never ran) has waited 3600 s; rem = 1000/10 = 100 s
    // < the 360 s round, so w = 1 + 3600/360 = 11 and it goes before job 0, which arrives
    // now (w = 1): job 1 takes the V100 (payoff 11 - 0.15), and job 0, left with the K80,
    // is turned away (payoff 1*0.1 - 0.15 < 0).
    jobs[0].arrival = 3600;
    auto pol = make_hadar_policy("hadar", hand_params());
    auto p = pol->plan(make_snapshot(cl, jobs, {{10, 1}, {10, 1}}, 3600));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 1);  // job 0 (w = 1) is now the one turned away
    CHECK(p->assignments[0].job == 1);
    CHECK(p->assignments[0].shares == std::vector<server_share>{{0, 1}});
  }
}

TEST_CASE("hadar: one job's GPUs span GPU types when no type has room", "[policies][hadar]") {
  // V100 server and K80 server, 4 GPUs each. Order by weight: A (1 GPU, V100 only, w = 3),
  // C (3 GPUs, K80 only, w = 2), B (4 GPUs, both types, w = 1). A takes one V100, C three
  // K80s; B fits on no single server but can run on the 3 free V100s + 1 free K80, at
  // 4 x the slowest per-GPU rate = min(8, 4) = 4 steps/s, i.e. half its best (8 on V100).
  // Payoff (L = 0.05, U = 1): utility 1*4*0.5 = 2; cost = V100 p(1/4)+p(2/4)+p(3/4)
  // = 0.05*(2.115+4.472+9.457) = 0.802, plus K80 p(3/4) = 0.473; payoff 0.725 > 0.
  const cluster cl = make_cluster({{0, "v", "v100", 0, 4, 1.0}, {0, "k", "k80", 0, 4, 1.0}});
  std::vector<job> jobs = {make_job(0, "A", 1, 1e6, 0, 3), make_job(1, "C", 3, 1e6, 0, 2),
                           make_job(2, "B", 4, 400, 0, 1)};
  auto hp = hand_params();
  hp.price_low = 0.05;
  auto pol = make_hadar_policy("hadar", hp);
  auto p = pol->plan(make_snapshot(cl, jobs, {{1, 0}, {0, 3}, {8, 4}}));
  REQUIRE(p);
  REQUIRE(p->assignments.size() == 3);
  const auto& b = p->assignments[2];
  CHECK(b.job == 2);
  CHECK(b.type == -1);
  CHECK(b.shares == std::vector<server_share>{{0, 3}, {1, 1}});

  SECTION("the simulator runs it at the slowest GPU's rate") {
    // Same cluster through simulate(): B's 400 steps at 4 steps/s end at t = 100 s.
    throughput_table t;
    t.set_isolated("v100", {"A", 1}, 1);
    t.set_isolated("k80", {"C", 3}, 3);
    t.set_isolated("v100", {"B", 4}, 8);
    t.set_isolated("k80", {"B", 4}, 4);
    auto pol2 = make_hadar_policy("hadar", hp);
    sim_config cfg;
    cfg.max_time = 1000;
    auto r = simulate(cl, t, jobs, *pol2, cfg);
    REQUIRE(r);
    CHECK(r->jobs[2].finish == Approx(100));
  }
}

TEST_CASE("hadare: forks onto distinct servers, not beyond what the round needs",
          "[policies][hadar]") {
  // Three 1-GPU V100 servers, one 1-GPU job at 1 step/s.
  const cluster cl = make_cluster(
      {{0, "a", "v100", 0, 1, 1.0}, {0, "b", "v100", 0, 1, 1.0}, {0, "c", "v100", 0, 1, 1.0}});
  auto hp = hand_params();
  hp.max_copies = 3;
  SECTION("a long job runs as three copies") {
    std::vector<job> jobs = {make_job(0, "m", 1, 1e5)};
    auto p = make_hadar_policy("hadare", hp)->plan(make_snapshot(cl, jobs, {{1}}));
    REQUIRE(p);
    REQUIRE(p->assignments.size() == 3);
    std::set<int> servers;
    for (int c = 0; c < 3; ++c) {
      CHECK(p->assignments[c].copy == c);
      servers.insert(p->assignments[c].shares[0].server);
    }
    CHECK(servers.size() == 3);
  }
  SECTION("a job one copy finishes this round is not forked") {
    // 300 steps at 1 step/s fit in a 360 s round: no second copy.
    std::vector<job> jobs = {make_job(0, "m", 1, 300)};
    auto p = make_hadar_policy("hadare", hp)->plan(make_snapshot(cl, jobs, {{1}}));
    REQUIRE(p);
    CHECK(p->assignments.size() == 1);
  }
  SECTION("max_copies bounds the copies") {
    hp.max_copies = 2;
    std::vector<job> jobs = {make_job(0, "m", 1, 1e5)};
    auto p = make_hadar_policy("hadare", hp)->plan(make_snapshot(cl, jobs, {{1}}));
    REQUIRE(p);
    CHECK(p->assignments.size() == 2);
  }
}

TEST_CASE("sim: copies of one job add their rates, minus one averaging per round",
          "[runtime][sim][hadar]") {
  // Copy 0 on a V100 at 2 steps/s, copy 1 on a K80 at 3 steps/s; averaging 0 B / 1 B/s +
  // 10 s = 10 s per round. Round 1 trains 350 s: 5 * 350 = 1750 steps.
  const cluster cl = make_cluster({{0, "v", "v100", 0, 1, 1.0}, {0, "k", "k80", 0, 1, 1.0}});
  throughput_table t;
  t.set_isolated("v100", {"m", 1}, 2);
  t.set_isolated("k80", {"m", 1}, 3);
  assignment c0, c1;
  c0.job = c1.job = 0;
  c0.copy = 0;
  c0.type = 0;
  c0.shares = {{0, 1}};
  c1.copy = 1;
  c1.type = 1;
  c1.shares = {{1, 1}};
  sim_config cfg;
  cfg.aggregation.param_bytes = 0;
  cfg.aggregation.bytes_per_s = 1;
  cfg.aggregation.latency_s = 10;
  // The time model alone: every copy's steps at full value (tests/runtime/
  // test_copy_efficiency.cpp charges the statistical efficiency).
  cfg.fork_efficiency.enabled = false;

  SECTION("finishing within the first round") {
    // 1000 steps at 5 steps/s: t* = 200 s, plus the final 10 s averaging -> 210 s.
    fixed_plan pol({c0, c1});
    auto r = simulate(cl, t, {make_job(0, "m", 1, 1000)}, pol, cfg);
    REQUIRE(r);
    CHECK(r->jobs[0].finish == Approx(210));
    CHECK(r->jobs[0].run_time == Approx(210));     // copies side by side: wall time
    CHECK(r->jobs[0].gpu_seconds == Approx(420));  // two GPUs x 210 s
    CHECK(r->jobs[0].steps_done == Approx(1000));
  }
  SECTION("finishing in the second round") {
    // Round 1: 1750 of 2000 steps. Round 2 (from 360 s): 250 steps at 5/s = 50 s, plus
    // 10 s averaging -> 420 s. Run time 360 + 60; GPU-seconds 2 x 420.
    fixed_plan pol({c0, c1});
    auto r = simulate(cl, t, {make_job(0, "m", 1, 2000)}, pol, cfg);
    REQUIRE(r);
    CHECK(r->jobs[0].finish == Approx(420));
    CHECK(r->jobs[0].run_time == Approx(420));
    CHECK(r->jobs[0].gpu_seconds == Approx(840));
  }
  SECTION("the default averaging model: 100 MB at 10 GB/s + 1 ms = 11 ms") {
    CHECK(copy_aggregation{}.seconds() == Approx(0.011));
    fixed_plan pol({c0, c1});
    sim_config plain;
    plain.fork_efficiency.enabled = false;
    auto r = simulate(cl, t, {make_job(0, "m", 1, 1000)}, pol, plain);
    REQUIRE(r);
    CHECK(r->jobs[0].finish == Approx(200.011));
  }
  SECTION("one copy alone is charged no averaging") {
    fixed_plan pol({c1});
    auto r = simulate(cl, t, {make_job(0, "m", 1, 900)}, pol, cfg);
    REQUIRE(r);
    CHECK(r->jobs[0].finish == Approx(300));  // 900 / 3
  }
}

TEST_CASE("run_copies: staggered starts (restart cost) are solved piecewise",
          "[runtime][sim][hadar]") {
  // Rates 2 and 3, copy 1 loses 20 s, round 360 s, averaging 10 s, start 1000 s.
  // P(t) = 2t + 3(t - 20)^+: P(20) = 40, then slope 5, so 500 steps at t* = 20 + 460/5 = 112;
  // finish = 1000 + 112 + 10 = 1122; copy 0 did 2*112 = 224 steps, copy 1 3*92 = 276.
  auto out = run_copies(7, 500, {copy_run{0, 2, 0, -1}, copy_run{1, 3, 20, -1}}, 1000, 360, 10);
  REQUIRE(out.size() == 2);
  CHECK(out[0].finished);
  CHECK(out[0].finish_time == Approx(1122));
  CHECK(out[0].steps == Approx(224));
  CHECK(out[1].steps == Approx(276));
  CHECK(out[1].copy == 1);
  // Not finishing: the copies train 350 - lost seconds each.
  auto part = run_copies(7, 1e6, {copy_run{0, 2, 0, -1}, copy_run{1, 3, 20, -1}}, 0, 360, 10);
  CHECK_FALSE(part[0].finished);
  CHECK(part[0].steps == Approx(700));
  CHECK(part[1].steps == Approx(990));
  CHECK(part[1].busy_seconds == Approx(360));
}
