// The statistical efficiency of a forked job's averaged copies (runtime/core/copy_efficiency.hpp)
// and its use in the simulator's executor (runtime/sim/sim_executor.hpp): the function's limits
// and monotonicity, its calibration against the measured forked runs, hand-computed finish
// times, unforked jobs untouched, and a property test with HadarE's plans on random clusters.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "policies/registry.hpp"
#include "runtime/core/copy_efficiency.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/sim/sim_executor.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::fixed_plan;
using tessera::test::make_job;
using tessera::test::random_instance;

TEST_CASE("copy efficiency: one copy is worth exactly its steps", "[runtime][copy_eff]") {
  for (double b : {1.0, 8.0, 32.0, 8192.0})
    for (double n : {0.0, 1.0, 74.0, 1e6}) {
      CHECK(averaged_copy_efficiency(1, b, n) == 1.0);
      CHECK(averaged_round_value({37.0}, {1.0}, b, n) == Approx(37.0).epsilon(1e-12));
    }
  copy_efficiency ce;
  CHECK(ce.factor("ResNet-18 (batch size 64)", 1) == 1.0);
  ce.enabled = false;
  CHECK(ce.factor("ResNet-18 (batch size 64)", 3) == 1.0);
}

TEST_CASE("copy efficiency: monotone in copies, batch and noise scale, and its limits",
          "[runtime][copy_eff]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (double b : {8.0, 32.0, 256.0})
    for (double n : {0.0, 10.0, 74.0, 1000.0}) {
      double prev = 1.0;
      for (int c = 2; c <= 8; ++c) {
        const double e = averaged_copy_efficiency(c, b, n);
        CHECK(e < prev);                                       // more copies: less per copy-step
        CHECK(e >= 1.0 / c - 1e-15);                           // never below one copy's worth
        CHECK(e * c >= prev * (c - 1) * (1 - 1e-12));          // but each copy adds progress
        CHECK(averaged_copy_efficiency(c, b, n * 2 + 1) > e);  // more noise: more worth
        CHECK(averaged_copy_efficiency(c, b * 2, n) <= e);     // larger batch: less worth
        prev = e;
      }
    }
  // Gradient-dominated (no noise): the average moves like one copy, 1/C.
  CHECK(averaged_copy_efficiency(3, 32, 0) == Approx(1.0 / 3));
  CHECK(averaged_copy_efficiency(4, 1e12, 74) == Approx(0.25).epsilon(1e-6));
  // Noise-dominated: the copies' steps count in full (the old upper bound).
  CHECK(averaged_copy_efficiency(3, 32, inf) == 1.0);
  CHECK(averaged_copy_efficiency(3, 1e-9, 74) == Approx(1.0).epsilon(1e-9));
  // Hand-computed: C = 3, B = 32, B_noise = 74: 106 / 170.
  CHECK(averaged_copy_efficiency(3, 32, 74) == Approx(106.0 / 170.0));
}

TEST_CASE("copy efficiency: unequal copies under the mean and the weighted merge",
          "[runtime][copy_eff]") {
  const std::vector<double> steps{50, 25, 12};
  const std::vector<double> mean{1.0 / 3, 1.0 / 3, 1.0 / 3};
  // The mean merge: eff(C, B) x the total steps, whatever their split.
  for (double n : {0.0, 5.0, 74.0, 500.0})
    CHECK(averaged_round_value(steps, mean, 32, n) ==
          Approx(87 * averaged_copy_efficiency(3, 32, n)));
  // Gradient-dominated: the mean moves 29 steps, less than the fast copy's 50; the weighted
  // mean sum n^2 / N = 3269 / 87.
  CHECK(averaged_round_value(steps, mean, 32, 0) == Approx(29));
  const std::vector<double> weighted{50.0 / 87, 25.0 / 87, 12.0 / 87};
  CHECK(averaged_round_value(steps, weighted, 32, 0) == Approx(3269.0 / 87));
  // Noise-dominated: the weighted merge's worth tends to k B_eff / B = k^2 / sum w^2 n.
  const double k = 3269.0 / 87, var = (125000.0 + 15625 + 1728) / (87.0 * 87);
  CHECK(averaged_round_value(steps, weighted, 1e-9, 74) == Approx(k * k / var).epsilon(1e-6));
  CHECK(averaged_round_value({0, 0}, {0.5, 0.5}, 32, 74) == 0);
}

TEST_CASE("copy efficiency: the batch size a job type names", "[runtime][copy_eff]") {
  CHECK(batch_size_of("ResNet-18 (batch size 64)") == 64.0);
  CHECK(batch_size_of("Recommendation (batch size 8192)") == 8192.0);
  CHECK_FALSE(batch_size_of("A3C"));
  CHECK_FALSE(batch_size_of("LM (batch size )"));
  CHECK_FALSE(batch_size_of("LM (batch size 0)"));
  CHECK_FALSE(batch_size_of("LM (batch size 12x)"));
  copy_efficiency ce;
  CHECK(ce.factor("CycleGAN", 2) == Approx(averaged_copy_efficiency(2, 32, 74)));
  CHECK(ce.factor("LM (batch size 5)", 2) == Approx(averaged_copy_efficiency(2, 5, 74)));
}

namespace {

/// One measured forked-vs-unforked pair (docs/benchmarks/runtime.md, "Forked copies'
/// statistical efficiency: the fit"): batch, the forked copies' steps per round and merge
/// weights, and the measured efficiency per copy-step (the single-copy steps the unforked
/// run needed over the steps the forked copies made).
struct forked_run {
  double batch;
  std::vector<double> steps, weights;
  double measured;
};

std::vector<forked_run> measured_runs() {
  std::vector<forked_run> out;
  const std::vector<double> mean(3, 1.0 / 3);
  // bench/fork_merge_bench.cpp (copies 50/25/12 steps per round, unforked 50) and the MPI
  // fork run (49/24/12, unforked 49): rounds unforked, rounds forked.
  auto rounds = [&](double b, std::vector<double> n, double single, double ru, double rf) {
    out.push_back({b, n, mean, single * ru / (rf * (n[0] + n[1] + n[2]))});
  };
  using pairs = std::vector<std::pair<double, double>>;
  for (auto [ru, rf] :
       pairs{{86, 33}, {9, 2}, {14, 5}, {2, 1}, {5, 2}, {25, 18}, {2, 1}, {116, 34}})
    rounds(8, {50, 25, 12}, 50, ru, rf);
  for (auto [ru, rf] : pairs{{87, 61}, {2, 2}, {7, 11}, {13, 16}})
    rounds(32, {50, 25, 12}, 50, ru, rf);
  for (auto [ru, rf] :
       pairs{{86, 40}, {8, 3}, {10, 5}, {2, 1}, {3, 2}, {28, 16}, {2, 1}, {118, 33}})
    rounds(8, {49, 24, 12}, 49, ru, rf);
  // bench/program_fork_rounds.py, weighted merge, copies at speeds 4:2:1: steps unforked
  // over steps forked to the target.
  for (auto [su, sf] : pairs{{1087, 2473}, {1138, 2554}, {1146, 2712}})
    out.push_back({32, {4, 2, 1}, {4.0 / 7, 2.0 / 7, 1.0 / 7}, su / sf});
  return out;
}

/// Sum of squared log residuals of the model at `b_noise`, measured values capped at 1.
double fit_loss(double b_noise) {
  double loss = 0;
  for (const auto& r : measured_runs()) {
    const double total = r.steps[0] + r.steps[1] + r.steps[2];
    const double model = averaged_round_value(r.steps, r.weights, r.batch, b_noise) / total;
    const double d = std::log(model) - std::log(std::min(1.0, r.measured));
    loss += d * d;
  }
  return loss;
}

}  // namespace

TEST_CASE("copy efficiency: the default noise scale is the fit to the measured runs",
          "[runtime][copy_eff]") {
  REQUIRE(measured_runs().size() == 23);
  const double b = copy_efficiency{}.b_noise;
  CHECK(fit_loss(b) < fit_loss(b * 0.9));
  CHECK(fit_loss(b) < fit_loss(b * 1.1));
  CHECK(fit_loss(b) < fit_loss(1e9));  // better than the upper bound (efficiency 1)
}

TEST_CASE("run_copies: the efficiency scales progress and delays the finish",
          "[runtime][copy_eff]") {
  // Rates 2 and 3, copy 1 loses 20 s, round 360 s, averaging 10 s, start 1000 s, efficiency
  // 0.5: 500 effective steps need P = 1000 raw: 40 + 5 (t - 20) = 1000 at t* = 212, finish
  // 1222; copy 0 is credited 0.5 x 424 = 212, copy 1 0.5 x 3 x 192 = 288.
  auto out =
      run_copies(7, 500, {copy_run{0, 2, 0, -1}, copy_run{1, 3, 20, -1}}, 1000, 360, 10, 0.5);
  REQUIRE(out.size() == 2);
  CHECK(out[0].finished);
  CHECK(out[0].finish_time == Approx(1222));
  CHECK(out[0].steps == Approx(212));
  CHECK(out[1].steps == Approx(288));
  auto part = run_copies(7, 1e6, {copy_run{0, 2, 0, -1}, copy_run{1, 3, 20, -1}}, 0, 360, 10, 0.5);
  CHECK(part[0].steps == Approx(350));
  CHECK(part[1].steps == Approx(495));
}

namespace {

/// The two-GPU cluster of tests/policies/test_hadar.cpp: copy 0 on a V100 at 2 steps/s,
/// copy 1 on a K80 at 3 steps/s, averaging 10 s per round.
/// Copy `copy` of job 0 on the one GPU of server `server` (of GPU type index `server`).
assignment copy_on(int copy, int server) {
  assignment as;
  as.job = 0;
  as.copy = copy;
  as.type = server;
  as.shares = {{server, 1}};
  return as;
}

struct two_copies {
  cluster cl = make_cluster({{0, "v", "v100", 0, 1, 1.0}, {0, "k", "k80", 0, 1, 1.0}});
  throughput_table t;
  sim_config cfg;
  explicit two_copies(const std::string& type) {
    t.set_isolated("v100", {type, 1}, 2);
    t.set_isolated("k80", {type, 1}, 3);
    cfg.aggregation = copy_aggregation{0, 1, 10};  // 10 s per averaging
  }
  result<schedule_result> run(const std::string& type, double steps) {
    fixed_plan pol({copy_on(0, 0), copy_on(1, 1)});
    return simulate(cl, t, {make_job(0, type, 1, steps)}, pol, cfg);
  }
};

}  // namespace

TEST_CASE("sim: a forked job is charged its copies' efficiency", "[runtime][copy_eff][sim]") {
  const std::string type = "ResNet-18 (batch size 32)";
  two_copies f(type);
  // eff(2, 32, 74) = 106 / 138. 1000 steps at 5 x 106/138 steps/s: t* = 1000 x 138 / 530.
  const double eff = 106.0 / 138.0;
  auto on = f.run(type, 1000);
  REQUIRE(on);
  CHECK(on->jobs[0].finish == Approx(1000 / (5 * eff) + 10));
  CHECK(on->jobs[0].steps_done == Approx(1000));
  f.cfg.fork_efficiency.enabled = false;
  auto off = f.run(type, 1000);
  REQUIRE(off);
  CHECK(off->jobs[0].finish == Approx(210));  // the upper bound: 1000 / 5 + 10
  CHECK(on->jobs[0].finish > off->jobs[0].finish);
  // Across rounds: 2000 steps, round 1 credits 5 x 350 x eff, the rest at 5 x eff per s.
  f.cfg.fork_efficiency.enabled = true;
  auto two = f.run(type, 2000);
  REQUIRE(two);
  CHECK(two->jobs[0].finish == Approx(360 + (2000 - 1750 * eff) / (5 * eff) + 10));
  // A bad noise scale is refused.
  f.cfg.fork_efficiency.b_noise = 0;
  CHECK_FALSE(f.run(type, 1000));
}

TEST_CASE("sim: unforked jobs are untouched by the efficiency model", "[runtime][copy_eff][sim]") {
  std::mt19937 rng(1818);
  for (int trial = 0; trial < 20; ++trial) {
    auto in = random_instance(rng);
    for (const char* name : {"fifo_perf", "hadar", "max_min_fairness_perf"}) {
      INFO("trial " << trial << " policy " << name);
      sim_config on, off;
      off.fork_efficiency.enabled = false;
      auto p1 = make_policy(name);
      auto p2 = make_policy(name);
      REQUIRE(p1);
      REQUIRE(p2);
      auto a = simulate(in.cl, in.table, in.jobs, *p1.value(), on);
      auto b = simulate(in.cl, in.table, in.jobs, *p2.value(), off);
      REQUIRE(a);
      REQUIRE(b);
      REQUIRE(a->jobs.size() == b->jobs.size());
      for (std::size_t i = 0; i < a->jobs.size(); ++i) {
        CHECK(a->jobs[i].finish == b->jobs[i].finish);  // bit for bit
        CHECK(a->jobs[i].gpu_seconds == b->jobs[i].gpu_seconds);
        CHECK(a->jobs[i].run_time == b->jobs[i].run_time);
      }
    }
  }
}

namespace {

/// Runs HadarE and, on each of its plans, two fresh executors, one with the efficiency model
/// and one without, checking the model's effect copy by copy.
class efficiency_checker final : public test::observed_policy {
 public:
  efficiency_checker(std::unique_ptr<policy> inner, const cluster& cl, const throughput_table& t)
      : observed_policy(std::move(inner)), cl_(cl), t_(t) {}
  void see(const snapshot& s, const round_plan& p) override {
    // The policy sees the simulator's setting (the default, on).
    REQUIRE(s.fork_efficiency != nullptr);
    REQUIRE(s.fork_efficiency->enabled);
    model_ = *s.fork_efficiency;
    sim_executor on(cl_, t_, 0, copy_aggregation{}, model_);
    sim_executor off(cl_, t_, 0, copy_aggregation{});
    auto a = on.execute(s, p);
    auto b = off.execute(s, p);
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(a->size() == b->size());
    std::map<job_id, int> copies;
    for (const auto& as : p.assignments) copies[as.job] = std::max(copies[as.job], as.copy + 1);
    std::map<job_id, const job_view*> views;
    for (const auto& v : s.jobs) views[v.spec->id] = &v;
    for (std::size_t i = 0; i < a->size(); ++i)
      check((*a)[i], (*b)[i], copies.at((*a)[i].job), *views.at((*a)[i].job));
  }
  int forked_copies = 0;  ///< copies of forked jobs checked

 private:
  void check(const copy_progress& x, const copy_progress& y, int c, const job_view& v) {
    REQUIRE(x.job == y.job);
    REQUIRE(x.copy == y.copy);
    if (c == 1) {  // unforked: identical
      CHECK(x.steps == y.steps);
      CHECK(x.busy_seconds == y.busy_seconds);
      CHECK(x.finished == y.finished);
      return;
    }
    ++forked_copies;
    const double eff = model_.factor(v.spec->job_type, c);
    CHECK(eff < 1.0);
    CHECK(x.steps <= y.steps + 1e-9 * (1 + y.steps));  // never more than the upper bound
    if (!y.finished) {  // both run the whole round: the steps scale by the efficiency
      CHECK_FALSE(x.finished);
      CHECK(x.steps == Approx(eff * y.steps));
    } else if (x.finished) {  // finishing later with the model
      CHECK(x.finish_time >= y.finish_time - 1e-9);
    }
    CHECK(x.busy_seconds >= y.busy_seconds - 1e-9);
    CHECK(x.steps <= v.remaining_steps + 1e-9 * v.remaining_steps);
  }
  copy_efficiency model_;
  const cluster& cl_;
  const throughput_table& t_;
};

}  // namespace

TEST_CASE("hadare: forked copies progress at the model's efficiency on random clusters",
          "[runtime][copy_eff][property]") {
  std::mt19937 rng(2018);
  int forked = 0;
  for (int trial = 0; trial < 30; ++trial) {
    auto in = random_instance(rng);
    INFO("trial " << trial);
    auto made = make_policy("hadare", {{"max_copies", 3}});
    REQUIRE(made);
    efficiency_checker pol(std::move(made.value()), in.cl, in.table);
    auto r = simulate(in.cl, in.table, in.jobs, pol, sim_config{});
    REQUIRE(r);
    CHECK(r->complete);
    for (const auto& j : r->jobs) CHECK(j.steps_done == Approx(j.total_steps));
    forked += pol.forked_copies;
  }
  CHECK(forked > 0);  // HadarE did fork somewhere
}
