// tessera's own policy (policies/tessera_policy.hpp): its order (critical, starving, least
// served), the fork test under the copy-efficiency model, hand-checked plans, and properties
// of its plans on random small clusters under the simulator.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "policies/hare.hpp"
#include "policies/registry.hpp"
#include "policies/tessera_policy.hpp"
#include "policies/type_plan.hpp"
#include "runtime/core/copy_efficiency.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/task_split.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::make_job;
using tessera::test::make_snapshot;
using tessera::test::random_instance;

namespace {

/// Checks every plan of the wrapped policy: per-server capacity; each copy of a job runs
/// exactly K tasks on servers whose type the job can use; copies numbered 0..n-1, at most
/// `max_copies`, on pairwise distinct servers; a job without a copy finds no free GPU it could
/// use, and no forked copy (copy > 0) holds one (forks only take GPUs nobody in the order
/// wanted). Without relaxed synchronisation (gangs) a job without a copy finds fewer than K
/// free GPUs it could use.
class tessera_checker final : public test::observed_policy {
 public:
  tessera_checker(std::unique_ptr<policy> inner, int max_copies, bool relaxed)
      : observed_policy(std::move(inner)), max_copies_(max_copies), relaxed_(relaxed) {}
  int plans = 0;
  int forked_plans = 0;

 private:
  void see(const snapshot& s, const round_plan& p) override {
    const cluster& cl = *s.cl;
    std::map<job_id, const job_view*> view;
    for (const auto& jv : s.jobs) view[jv.spec->id] = &jv;
    std::vector<int> used(cl.servers.size(), 0);
    std::map<copy_id, int> tasks;
    std::map<copy_id, std::set<int>> servers;
    std::vector<bool> forked_on(cl.servers.size(), false);
    for (const auto& as : p.assignments) {
      REQUIRE(view.count(as.job) == 1);
      REQUIRE(as.gpus() > 0);
      REQUIRE(as.tasks >= as.gpus());
      tasks[as.id()] += as.tasks;
      for (const auto& sh : as.shares) {
        used[sh.server] += sh.gpus;
        servers[as.id()].insert(sh.server);
        REQUIRE(split_runs_on(s, *view[as.job], sh.server));
        if (as.copy > 0) forked_on[sh.server] = true;
      }
    }
    for (const auto& sv : cl.servers) REQUIRE(used[sv.id] <= sv.gpus);
    std::map<job_id, int> copies;
    std::map<job_id, std::set<int>> job_servers;
    for (const auto& [id, t] : tasks) {
      REQUIRE(t == view[id.job]->spec->scale_factor);
      ++copies[id.job];
      for (const int u : servers[id]) REQUIRE(job_servers[id.job].insert(u).second);
    }
    for (const auto& [job, n] : copies) {
      REQUIRE(n <= max_copies_);
      for (int c = 0; c < n; ++c) REQUIRE(tasks.count(copy_id{job, c}) == 1);
      if (n > 1) ++forked_plans;
    }
    for (const auto& jv : s.jobs) {
      if (copies.count(jv.spec->id)) continue;
      int usable_free = 0;
      for (const auto& sv : cl.servers)
        if (split_runs_on(s, jv, sv.id)) {
          usable_free += sv.gpus - used[sv.id];
          if (relaxed_) REQUIRE_FALSE(forked_on[sv.id]);
        }
      if (relaxed_)
        REQUIRE(usable_free == 0);
      else
        REQUIRE(usable_free < jv.spec->scale_factor);
    }
    ++plans;
  }

  int max_copies_;
  bool relaxed_;
};

/// Three one-GPU servers of one type.
cluster three_ones() {
  return make_cluster(
      {{0, "a", "v100", 0, 1, 1.0}, {0, "b", "v100", 0, 1, 1.0}, {0, "c", "v100", 0, 1, 1.0}});
}

/// One fast GPU (type "fast") and one slow one, each on its own server.
cluster fast1_slow1() {
  return make_cluster({{0, "f0", "fast", 0, 1, 1.0}, {0, "s0", "slow", 0, 1, 1.0}});
}

/// The (first) server of each job in a plan.
std::map<job_id, int> server_of(const round_plan& p) {
  std::map<job_id, int> out;
  for (const auto& as : p.assignments) out[as.job] = as.shares[0].server;
  return out;
}

/// Copies in a plan of job `id`.
int copies_of(const round_plan& p, job_id id) {
  std::set<int> c;
  for (const auto& as : p.assignments)
    if (as.job == id) c.insert(as.copy);
  return static_cast<int>(c.size());
}

/// At t = 1100 s on fast1_slow1 (4 and 1 steps/s): job 0 of 1e6 steps arrived at 1000 s,
/// job 1 of 1000 steps at 0 s has made `done` steps in `ran` seconds of run time. `jobs`
/// receives the specs the snapshot points at.
snapshot late_long_and_early_short(const cluster& cl, std::vector<job>& jobs, double done,
                                   double ran) {
  jobs = {make_job(0, "m", 1, 1e6, 1000), make_job(1, "m", 1, 1000, 0)};
  auto s = make_snapshot(cl, jobs, {{4.0, 1.0}, {4.0, 1.0}}, 1100);
  s.jobs[1].steps_done = done;
  s.jobs[1].remaining_steps = 1000 - done;
  s.jobs[1].run_time = ran;
  return s;
}

}  // namespace

TEST_CASE("tessera: valid plans, every job finishes, on random clusters",
          "[policies][tessera][property]") {
  for (const int max_copies : {1, 3}) {
    for (const int relaxed : {1, 0}) {
      std::mt19937 rng(1801 + 10 * max_copies + relaxed);
      int forked = 0;
      for (int trial = 0; trial < 40; ++trial) {
        auto in = random_instance(rng);
        INFO("max_copies " << max_copies << " relaxed " << relaxed << " trial " << trial);
        auto made = make_policy("tessera", {{"max_copies", max_copies}, {"relaxed", relaxed}});
        REQUIRE(made);
        tessera_checker pol(std::move(made.value()), max_copies, relaxed != 0);
        auto r = simulate(in.cl, in.table, in.jobs, pol, sim_config{});
        REQUIRE(r);
        CHECK(r->complete);
        CHECK(pol.plans > 0);
        for (const auto& j : r->jobs) {
          CHECK(j.finish >= j.arrival);
          CHECK(j.steps_done == Approx(j.total_steps));
        }
        const auto m = compute_metrics(r.value());
        CHECK(m.utilisation <= 1.0 + 1e-9);
        forked += pol.forked_plans;
      }
      if (max_copies == 1)
        CHECK(forked == 0);
      else
        CHECK(forked > 0);  // it did fork somewhere
    }
  }
}

TEST_CASE("tessera: order is critical, then starving by latency ratio, then least served",
          "[policies][tessera]") {
  const auto cl = make_cluster({{0, "a", "v100", 0, 4, 1.0}});
  // All at 1 step/s on the one type. Expected run times E = total steps.
  std::vector<job> jobs = {
      make_job(0, "m", 1, 1000, 0),  // served 500 of 1000, never waited: normal
      make_job(1, "m", 1, 1000, 0),  // served 100: normal, ahead of job 0
      make_job(2, "m", 1, 100, 0),   // waited 300 on E = 100: LR 3, starving
      make_job(3, "m", 1, 200, 0),   // waited 300 on E = 200: LR 1.5, starving
      make_job(4, "m", 1, 1e6, 0)};  // 1e6 s left, far beyond 2 x drain: critical
  auto s = make_snapshot(cl, jobs, {{1}, {1}, {1}, {1}, {1}}, 300);
  s.jobs[0].steps_done = 500;
  s.jobs[0].remaining_steps = 500;
  s.jobs[0].run_time = 300;
  s.jobs[1].steps_done = 100;
  s.jobs[1].remaining_steps = 900;
  s.jobs[1].run_time = 300;
  s.jobs[4].run_time = 300;
  s.round_length = 3600;  // the guard is lr_guard x round length / 3600 s: here lr_guard in LR
  tessera_params p;
  p.lr_guard = 1;
  p.ftf_guard = 0;
  p.critical_share = 2;
  p.by_remaining = false;  // the default is by remaining work: checked below
  std::vector<tessera_class> cls;
  CHECK(tessera_order(s, p, &cls) == std::vector<std::size_t>{4, 2, 3, 1, 0});
  CHECK(cls == std::vector<tessera_class>{tessera_class::normal, tessera_class::normal,
                                          tessera_class::starving, tessera_class::starving,
                                          tessera_class::critical});
  // Option by_remaining: the normal jobs by least remaining work (job 0: 500 steps left,
  // job 1: 900), the classes above them unchanged.
  p.by_remaining = true;
  CHECK(tessera_order(s, p) == std::vector<std::size_t>{4, 2, 3, 0, 1});
  p.by_remaining = false;
  // Guards off: least attained service alone (ties by arrival, then id).
  p.lr_guard = 0;
  p.critical_share = 0;
  CHECK(tessera_order(s, p) == std::vector<std::size_t>{2, 3, 4, 1, 0});
  // A guard of 2 leaves job 3 (LR 1.5) among the normal jobs, job 2 (LR 3) starving.
  p.lr_guard = 2;
  p.critical_share = 2;
  CHECK(tessera_order(s, p, &cls) == std::vector<std::size_t>{4, 2, 3, 1, 0});
  CHECK(cls[2] == tessera_class::starving);
  CHECK(cls[3] == tessera_class::normal);
  // The guard counts rounds: at 360 s rounds the same lr_guard 2 is LR 0.2, so job 3 (LR 1.5)
  // is starving too, and lr_guard 20 is LR 2 again.
  s.round_length = 360;
  tessera_order(s, p, &cls);
  CHECK(cls[3] == tessera_class::starving);
  p.lr_guard = 20;
  tessera_order(s, p, &cls);
  CHECK(cls[2] == tessera_class::starving);
  CHECK(cls[3] == tessera_class::normal);
  // A type plan's horizon: with the drain test off, job 1 (900 s left) is critical once it
  // is at least critical_horizon 0.9 x the horizon (900 >= 0.9 x 999 = 899.1, not 0.9 x
  // 1,001 = 900.9); job 4 (1e6 s) is critical at any horizon up to 1.1e6 s; no horizon, no
  // such test.
  p.critical_share = 0;
  tessera_order(s, p, &cls, 999);
  CHECK(cls[1] == tessera_class::critical);
  CHECK(cls[0] == tessera_class::normal);
  tessera_order(s, p, &cls, 1001);
  CHECK(cls[1] == tessera_class::normal);
  CHECK(cls[4] == tessera_class::critical);
  tessera_order(s, p, &cls, 0);
  CHECK(cls[4] == tessera_class::normal);
  p.critical_horizon = 0;
  tessera_order(s, p, &cls, 999);
  CHECK(cls[1] == tessera_class::normal);
}

TEST_CASE("tessera: the early guard puts the most urgent waiting jobs first within its share",
          "[policies][tessera]") {
  const auto cl = make_cluster({{0, "a", "v100", 0, 40, 1.0}});
  // All at 1 step/s: E = total steps; at t = 300 s a job that never ran has LR 300 / E.
  std::vector<job> jobs = {make_job(0, "m", 1, 100, 0),    // LR 3: past the early guard only
                           make_job(1, "m", 1, 150, 0),    // LR 2: the same
                           make_job(2, "m", 1, 200, 0),    // LR 1.5: the same
                           make_job(3, "m", 2, 60, 0),     // LR 5: past the main guard
                           make_job(4, "m", 1, 1000, 0)};  // ran all along: LR 0
  auto s = make_snapshot(cl, jobs, {{1}, {1}, {1}, {1}, {1}}, 300);
  s.jobs[4].run_time = 300;
  s.jobs[4].steps_done = 300;
  s.jobs[4].remaining_steps = 700;
  s.round_length = 3600;  // guards in LR
  tessera_params p;
  p.lr_guard = 4;
  p.ftf_guard = 0;
  p.critical_share = 0;
  p.early_guard = 1;
  p.early_share = 0.05;  // 2 of the 40 GPUs: jobs 0 and 1, by LR, not job 2
  std::vector<tessera_class> cls;
  CHECK(tessera_order(s, p, &cls) == std::vector<std::size_t>{3, 0, 1, 2, 4});
  CHECK(cls == std::vector<tessera_class>{tessera_class::starving, tessera_class::starving,
                                          tessera_class::normal, tessera_class::starving,
                                          tessera_class::normal});
  p.early_share = 0.025;  // one GPU: job 0 alone
  tessera_order(s, p, &cls);
  CHECK(cls[0] == tessera_class::starving);
  CHECK(cls[1] == tessera_class::normal);
  p.early_guard = 0;  // off: the normal jobs by least remaining work, job 2 (200) first
  CHECK(tessera_order(s, p, &cls) == std::vector<std::size_t>{3, 0, 1, 2, 4});
  CHECK(cls[0] == tessera_class::normal);
  p.early_guard = 1;
  p.early_share = 0.05;
  p.lr_guard = 0;  // the early guard alone: job 3 (LR 5, 2 GPUs) fills its share
  tessera_order(s, p, &cls);
  CHECK(cls[3] == tessera_class::starving);
  CHECK(cls[0] == tessera_class::normal);

  // Property on random queues: the jobs admitted by the early guard alone hold at most its
  // share of the GPUs, each is past it, and a job past it left out did not fit in what the
  // more urgent ones left.
  std::mt19937 rng(41);
  int admitted_seen = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<job> js;
    std::vector<std::vector<double>> tput;
    for (int i = 0; i < 30; ++i) {
      js.push_back(make_job(i, "m", 1 + static_cast<int>(rng() % 4),
                            50 + static_cast<double>(rng() % 2000), 0));
      tput.push_back({1});
    }
    auto rs = make_snapshot(cl, js, tput, 300);
    rs.round_length = 3600;
    tessera_params q;
    q.ftf_guard = 0;
    q.critical_share = 0;
    q.lr_guard = 4;
    q.early_guard = 0.5;
    q.early_share = 0.05 + 0.05 * (trial % 4);
    tessera_order(rs, q, &cls);
    const double budget = q.early_share * 40;
    std::vector<std::pair<double, std::size_t>> past;  // (LR, job) past the early guard only
    double used = 0;
    for (std::size_t i = 0; i < js.size(); ++i) {
      const double lr = 300 / js[i].total_steps;
      if (lr >= q.early_guard && lr < q.lr_guard) past.push_back({lr, i});
      if (cls[i] == tessera_class::starving && lr < q.lr_guard) {
        CHECK(lr >= q.early_guard);
        used += js[i].scale_factor;
        ++admitted_seen;
      }
    }
    CHECK(used <= budget + 1e-9);
    std::sort(past.rbegin(), past.rend());
    double before = 0;  // GPUs admitted to jobs at least as urgent
    for (const auto& [lr, i] : past) {
      if (cls[i] == tessera_class::starving)
        before += js[i].scale_factor;
      else
        CHECK(before + js[i].scale_factor > budget);
    }
  }
  CHECK(admitted_seen > 100);
}

TEST_CASE("tessera: a copy pays when the averaged rate grows by fork_gain", "[policies][tessera]") {
  // Equal copies: eff(2) x 2 against (1 + gain) x eff(1) x 1.
  CHECK(tessera_fork_pays(1.0, 1.0, 1, 0.1, 1.0, 0.6));        // 1.2 >= 1.1
  CHECK_FALSE(tessera_fork_pays(1.0, 1.0, 1, 0.1, 1.0, 0.5));  // 1.0 < 1.1
  CHECK_FALSE(tessera_fork_pays(1.0, 0.0, 1, 0.0, 1.0, 1.0));  // a copy that makes no steps
  // A slow copy next to a fast one: 0.9 x (4 + 0.5) = 4.05 < 1.1 x 4.
  CHECK_FALSE(tessera_fork_pays(4.0, 0.5, 1, 0.1, 1.0, 0.9));
  // Third copy: eff(3) x 3 = 1.86 against 1.1 x eff(2) x 2 = 1.672.
  CHECK(tessera_fork_pays(2.0, 1.0, 2, 0.1, 0.8, 0.62));
}

TEST_CASE("tessera: forks as far as the averaging loss allows", "[policies][tessera]") {
  // One 1-GPU job at 1 step/s, 1e5 steps, on three free 1-GPU servers. With the calibrated
  // model (B_noise 74): batch 32 gives eff(2) = 106/138 = 0.768, eff(3) = 106/170 = 0.624:
  // 1.536 >= 1.1 and 1.871 >= 1.1 x 1.536 = 1.690, three copies. Batch 256: eff(2) =
  // 330/586 = 0.563 (1.126 >= 1.1, a copy), eff(3) = 330/842 = 0.392 (1.176 < 1.1 x 1.126 =
  // 1.239, no third).
  const auto cl = three_ones();
  copy_efficiency ce;
  auto pol = make_policy("tessera", {{"fork_gain", 0.1}});  // the arithmetic above
  REQUIRE(pol);
  for (const auto& [type, want] : std::vector<std::pair<std::string, int>>{
           {"ResNet-18 (batch size 32)", 3}, {"ResNet-18 (batch size 256)", 2}}) {
    std::vector<job> jobs = {make_job(0, type, 1, 1e5)};
    auto s = make_snapshot(cl, jobs, {{1}});
    s.fork_efficiency = &ce;
    auto p = pol.value()->plan(s);
    REQUIRE(p);
    CHECK(copies_of(p.value(), 0) == want);
    // Without a model every copy counts in full: three copies.
    s.fork_efficiency = nullptr;
    p = pol.value()->plan(s);
    REQUIRE(p);
    CHECK(copies_of(p.value(), 0) == 3);
    // The executor's limit (a --local runtime without aggregation): one copy.
    s.copy_limit = 1;
    p = pol.value()->plan(s);
    REQUIRE(p);
    CHECK(copies_of(p.value(), 0) == 1);
  }
  // The default gain, 0.02, takes the third copy at batch 256 too: 1.176 >= 1.02 x 1.126.
  {
    auto dflt = make_policy("tessera");
    REQUIRE(dflt);
    std::vector<job> jobs = {make_job(0, "ResNet-18 (batch size 256)", 1, 1e5)};
    auto s = make_snapshot(cl, jobs, {{1}});
    s.fork_efficiency = &ce;
    auto p = dflt.value()->plan(s);
    REQUIRE(p);
    CHECK(copies_of(p.value(), 0) == 3);
  }
  // A job that one copy finishes within the round (300 steps, 360 s) is not forked.
  std::vector<job> short_job = {make_job(0, "ResNet-18 (batch size 32)", 1, 300)};
  auto s = make_snapshot(cl, short_job, {{1}});
  auto p = pol.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) == 1);
  // A job that waited 1000 s and has 2000 s of work left: two copies (1.536 steps/s) would
  // end its run after 1302 s, a latency ratio of 0.77 above the cap (2.4 x 360 s / 3600 s =
  // 0.24): no copy. Without the cap it forks.
  std::vector<job> waited = {make_job(0, "ResNet-18 (batch size 32)", 1, 2000)};
  s = make_snapshot(cl, waited, {{1}}, 1000);
  p = pol.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) == 1);
  auto uncapped = make_policy("tessera", {{"fork_lr_cap", 0}});
  REQUIRE(uncapped);
  p = uncapped.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) == 3);
  // The cap is in rounds: after a 130 s wait, two copies give a latency ratio of 0.1, under
  // the cap at 360 s rounds (0.24), above it at 30 s rounds (0.02).
  s = make_snapshot(cl, waited, {{1}}, 130);
  p = pol.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) >= 2);
  s.round_length = 30;
  p = pol.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) == 1);
  // A waiting job takes a GPU before anyone forks: two jobs, three GPUs, one fork at most.
  std::vector<job> two = {make_job(0, "m", 1, 1e5), make_job(1, "m", 1, 1e5)};
  s = make_snapshot(cl, two, {{1}, {1}});
  p = pol.value()->plan(s);
  REQUIRE(p);
  CHECK(copies_of(p.value(), 0) + copies_of(p.value(), 1) == 3);
  CHECK(copies_of(p.value(), 0) >= 1);
  CHECK(copies_of(p.value(), 1) >= 1);
}

TEST_CASE("tessera: a starving job gets the fast GPU ahead of a less served one",
          "[policies][tessera]") {
  // One fast GPU (4 steps/s) and one slow (1 step/s). Job 0 has the least service (none) but
  // arrived last; job 1 has served 400 steps (100 ideal GPU-s) and waited 1000 s on an
  // expected run time of 250 s (1000 steps at 4/s): LR 4 >= 1, so it goes first.
  const auto cl = fast1_slow1();
  std::vector<job> jobs;
  auto s = late_long_and_early_short(cl, jobs, 400, 100);
  tessera_params p;
  p.critical_share = 0;
  p.ftf_guard = 0;
  p.max_copies = 1;
  p.by_remaining = false;  // least attained service, below
  auto plan = make_tessera_policy("tessera", p)->plan(s);
  REQUIRE(plan);
  CHECK(server_of(plan.value()).at(1) == 0);
  CHECK(server_of(plan.value()).at(0) == 1);
  // Without the guard, least attained service puts job 0 first.
  p.lr_guard = 0;
  plan = make_tessera_policy("tessera", p)->plan(s);
  REQUIRE(plan);
  CHECK(server_of(plan.value()).at(0) == 0);
  CHECK(server_of(plan.value()).at(1) == 1);
  // By least remaining work (the default order) job 1, 600 steps left against job 0's 1e6,
  // goes first without any guard.
  p.by_remaining = true;
  plan = make_tessera_policy("tessera", p)->plan(s);
  REQUIRE(plan);
  CHECK(server_of(plan.value()).at(1) == 0);
  CHECK(server_of(plan.value()).at(0) == 1);
}

TEST_CASE("tessera: a job behind its fair share gets the fast GPU (FTF guard)",
          "[policies][tessera]") {
  // One fast GPU (4 steps/s) and one slow (1 step/s): the cluster's mix gives a 1-GPU job
  // (4 + 1) / 2 = 2.5 steps/s, f = min(1, 2 GPUs / (2 jobs x 1)) = 1. Job 1 arrived at 0 and
  // ran all 1100 s on the slow GPU: 200 of 1000 steps (service 200 / 4 = 50, never waited).
  // Its projected FTF is (1100 x 2.5 + 800) / 1000 = 3.55 >= 1.2: it goes first. Job 0
  // arrived at 1000 with 1e6 steps: (100 x 2.5 + 1e6) / 1e6 = 1.00025, normal.
  const auto cl = fast1_slow1();
  std::vector<job> jobs;
  auto s = late_long_and_early_short(cl, jobs, 200, 1100);
  tessera_params p;
  p.lr_guard = 0;
  p.max_copies = 1;
  p.by_remaining = false;  // least attained service, below
  std::vector<tessera_class> cls;
  CHECK(tessera_order(s, p, &cls) == std::vector<std::size_t>{1, 0});
  CHECK(cls == std::vector<tessera_class>{tessera_class::normal, tessera_class::starving});
  auto plan = make_tessera_policy("tessera", p)->plan(s);
  REQUIRE(plan);
  CHECK(server_of(plan.value()).at(1) == 0);
  // A guard of 4 leaves it normal: least attained service puts job 0 (none) first.
  p.ftf_guard = 4;
  CHECK(tessera_order(s, p) == std::vector<std::size_t>{0, 1});
}

namespace {

/// One fast GPU: round 1 at t = 0 holds job 0 (1e5 steps) alone; at t = 60 job 1 (10 steps)
/// arrives, less remaining work, so the order puts it first. The job holding the GPU in each
/// of 32 rounds of 60 s, every job charged `restart` seconds per start.
std::vector<job_id> gpu_holders(double restart, bool sticky) {
  const cluster cl = make_cluster({{0, "f0", "fast", 0, 1, 1.0}});
  const std::vector<job> jobs = {make_job(0, "m", 1, 1e5, 0), make_job(1, "m", 1, 10, 60)};
  tessera_params p;
  p.max_copies = 1;
  p.sticky = sticky;
  p.critical_horizon = 0;  // job 0 alone bounds the type plan's horizon: it would be critical
  auto pol = make_tessera_policy("tessera", p);
  round_plan last;
  std::vector<job_id> holders;
  for (int r = 0; r < 32; ++r) {
    std::vector<job> active = {jobs[0]};
    if (r >= 1) active.push_back(jobs[1]);
    std::vector<std::vector<double>> tput(active.size(), std::vector<double>{4.0});
    auto s = make_snapshot(cl, active, tput, 60.0 * r);
    s.round_length = 60;
    if (r > 0) s.last_plan = &last;
    for (auto& v : s.jobs) v.restart_seconds = restart;
    auto plan = pol->plan(s);
    REQUIRE(plan);
    holders.push_back(plan->assignments.at(0).job);
    last = *plan;
  }
  return holders;
}

}  // namespace

TEST_CASE("tessera: a job amortising its restart keeps its GPUs against a shorter job",
          "[policies][tessera]") {
  // With a restart of 100 s and restart_amortize 16 (the default), job 0 keeps the GPU until
  // it has run 1,600 s; then job 1 gets it. With no restart cost (R = 0) job 1 takes the GPU
  // at once.
  for (const double restart : {100.0, 0.0}) {
    INFO("restart " << restart);
    const auto holders = gpu_holders(restart, false);
    for (int r = 1; r < 32; ++r) CHECK(holders[r] == (restart > 0 && 60.0 * r < 1600 ? 0 : 1));
  }
}

TEST_CASE("tessera: with sticky, a job charged restarts keeps its GPUs while they are its best",
          "[policies][tessera]") {
  // Job 0 runs on its best type with all its GPUs, so it keeps the GPU past its amortisation
  // (to the end of the 32 rounds); with no restart cost nothing changes.
  for (const double restart : {100.0, 0.0}) {
    INFO("restart " << restart);
    const auto holders = gpu_holders(restart, true);
    for (int r = 1; r < 32; ++r) CHECK(holders[r] == (restart > 0 ? 0 : 1));
  }
}

TEST_CASE(
    "tessera: the fit floor is min_fit x the best rate, for jobs charged restarts, until "
    "the patience runs out",
    "[policies][tessera]") {
  // 1000 steps, 4 steps/s on its best type: an expected run time of 250 s, so a latency ratio
  // of 10 (the default patience) after 2,500 s of waiting.
  const std::vector<job> jobs = {make_job(0, "m", 1, 1000, 0)};
  const cluster cl = fast1_slow1();
  auto s = make_snapshot(cl, jobs, {{4.0, 1.0}}, 2499);
  const tessera_params p;
  CHECK(tessera_fit_floor(s.jobs[0], s.now, p) == 0);  // no restart charged: no floor
  s.jobs[0].restart_seconds = 100;
  CHECK(tessera_fit_floor(s.jobs[0], s.now, p) == Approx(0.3 * 4));
  CHECK(tessera_fit_floor(s.jobs[0], 2501, p) == 0);  // waited 10 x 250 s: any placement
  s.jobs[0].run_time = 100;                           // 100 s of run time is not waiting
  CHECK(tessera_fit_floor(s.jobs[0], 2501, p) == Approx(1.2));
  tessera_params off = p;
  off.min_fit = 0;
  CHECK(tessera_fit_floor(s.jobs[0], s.now, off) == 0);
  off = p;
  off.fit_patience = 0;  // no patience: the floor always applies
  CHECK(tessera_fit_floor(s.jobs[0], 1e9, off) == Approx(1.2));
}

TEST_CASE("tessera: a job charged restarts waits rather than start below its fit floor",
          "[policies][tessera]") {
  // fast1_slow1 (4 and 1 steps/s): job 0 (less remaining work) takes the fast GPU; the slow
  // one would run job 1 at 1/4 of its best rate, under the floor of 0.3: it waits. Without a
  // restart cost, or at min_fit 0.25, or once it has waited 10 x its 2,500 s, it runs there.
  const cluster cl = fast1_slow1();
  const std::vector<job> jobs = {make_job(0, "m", 1, 1000, 0), make_job(1, "m", 1, 1e4, 0)};
  tessera_params p;
  p.max_copies = 1;
  p.critical_horizon = 0;  // job 1 bounds the type plan's horizon: it would go first
  const auto placed = [&](double restart, double now, const tessera_params& q) {
    auto s = make_snapshot(cl, jobs, {{4.0, 1.0}, {4.0, 1.0}}, now);
    for (auto& v : s.jobs) v.restart_seconds = restart;
    auto plan = make_tessera_policy("tessera", q)->plan(s);
    REQUIRE(plan);
    REQUIRE(server_of(plan.value()).at(0) == 0);
    return server_of(plan.value()).count(1) == 1;
  };
  CHECK_FALSE(placed(100, 0, p));
  CHECK_FALSE(placed(100, 24999, p));
  CHECK(placed(100, 25001, p));
  CHECK(placed(0, 0, p));
  tessera_params lower = p;
  lower.min_fit = 0.25;
  CHECK(placed(100, 0, lower));
}

namespace {

/// Checks that every copy 0 in every plan runs at least at its job's fit floor
/// (tessera_fit_floor with the default settings), and counts the rounds in which a job under
/// a floor waited while GPUs it could use stood free. Checks the type plan's hold (default
/// settings): a long job placed anew (not on last round's servers) uses no bottleneck type
/// outside its plan; counts such placements.
class fit_checker final : public test::observed_policy {
 public:
  using observed_policy::observed_policy;
  int waited_for_fit = 0;
  int held_placements = 0;

 private:
  void see(const snapshot& s, const round_plan& p) override {
    check_hold(s, p);
    std::vector<int> used(s.cl->servers.size(), 0);
    for (const auto& as : p.assignments)
      for (const auto& sh : as.shares) used[sh.server] += sh.gpus;
    for (const auto& jv : s.jobs) {
      std::vector<const assignment*> parts;
      for (const auto& as : p.assignments)
        if (as.job == jv.spec->id && as.copy == 0) parts.push_back(&as);
      const double floor = tessera_fit_floor(jv, s.now, tessera_params{});
      if (!parts.empty()) {
        REQUIRE(s.rates);
        CHECK(split_rate(*s.rates, *jv.spec, parts) >= floor * (1 - 1e-9));
        continue;
      }
      bool free_usable = false;
      for (const auto& sv : s.cl->servers)
        free_usable |= used[sv.id] < sv.gpus && split_runs_on(s, jv, sv.id);
      if (free_usable && floor > 0) ++waited_for_fit;
    }
  }

  void check_hold(const snapshot& s, const round_plan& p) {
    const tessera_params d;
    type_plan_params tpp;  // the plan tessera makes with its defaults
    tpp.min_fit = d.min_fit;
    tpp.least_share = d.plan_share;
    const type_plan tp = fluid_type_plan(s, tpp);
    if (!tp.solved) return;
    const auto servers = [](const round_plan* plan, job_id job) {
      std::set<int> out;
      if (plan)
        for (const auto& as : plan->assignments)
          if (as.job == job && as.copy == 0)
            for (const auto& sh : as.shares) out.insert(sh.server);
      return out;
    };
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      const job_view& jv = s.jobs[i];
      const double best = hare_best_rate(jv);
      if (tp.prefer(i).empty() || !(best > 0) ||
          jv.remaining_steps / best < d.plan_hold * tp.horizon)
        continue;
      const std::set<int> now = servers(&p, jv.spec->id);
      if (now.empty() || now == servers(s.last_plan, jv.spec->id)) continue;
      ++held_placements;
      for (const int u : now) {
        const auto t =
            static_cast<std::size_t>(s.cl->servers[static_cast<std::size_t>(u)].type_index);
        const auto& pref = tp.prefer(i);
        CHECK((!tp.bottleneck[t] || std::find(pref.begin(), pref.end(), t) != pref.end()));
      }
    }
  }
};

}  // namespace

TEST_CASE(
    "tessera: with restart costs, every start is at its fit floor, long jobs keep off unplanned "
    "bottleneck types, and every job finishes",
    "[policies][tessera][property]") {
  std::mt19937 rng(2207);
  int waited = 0, held = 0;
  for (int trial = 0; trial < 40; ++trial) {
    auto in = random_instance(rng);
    INFO("trial " << trial);
    auto made = make_policy("tessera");
    REQUIRE(made);
    fit_checker pol(std::move(made.value()));
    sim_config cfg;
    cfg.round_length = 60;
    cfg.restart_cost = 30;
    auto r = simulate(in.cl, in.table, in.jobs, pol, cfg);
    REQUIRE(r);
    CHECK(r->complete);  // the patience bounds every wait for a fit
    for (const auto& j : r->jobs) CHECK(j.steps_done == Approx(j.total_steps));
    waited += pol.waited_for_fit;
    held += pol.held_placements;
  }
  CHECK(waited > 0);  // the floor held some job back somewhere
  CHECK(held > 0);    // the hold was checked on some placements
}

TEST_CASE("tessera: a job charged restarts takes its planned type before its fastest one",
          "[policies][tessera]") {
  // One fast and one slow server of 4 GPUs. Jobs 0-3 ("x": 10 steps/s fast, 1 slow, 2e4
  // steps) need the fast GPUs; jobs 4-7 ("y": 1 fast, 0.97 slow, 970 steps) run almost as
  // fast on the slow ones. y has less remaining work, so it goes first in the order. The
  // fluid plan fills the fast type with x's 8,000 GPU-seconds (T = 2,000 s) and puts y on
  // the slow type, so with the plan each job runs on its own type. Without it (type_plan 0,
  // or no restart charged, where no plan is made) y takes its fastest free GPUs, the fast
  // ones, and x waits (charged a restart: the slow type is under its fit floor) or runs on
  // the slow ones at a tenth of its rate (no restart).
  const cluster cl = make_cluster({{0, "f0", "fast", 0, 4, 1.0}, {0, "s0", "slow", 0, 4, 1.0}});
  std::vector<job> jobs;
  std::vector<std::vector<double>> tput;
  for (int m = 0; m < 8; ++m) {
    jobs.push_back(make_job(m, m < 4 ? "x" : "y", 1, m < 4 ? 2e4 : 970));
    tput.push_back(m < 4 ? std::vector<double>{10, 1} : std::vector<double>{1, 0.97});
  }
  for (const double restart : {60.0, 0.0}) {
    for (const bool planned : {true, false}) {
      INFO("restart " << restart << " type_plan " << planned);
      auto s = make_snapshot(cl, jobs, tput);
      for (auto& v : s.jobs) v.restart_seconds = restart;
      tessera_params p;
      p.max_copies = 1;
      p.type_plan = planned;
      p.critical_horizon = 0;  // x bounds the horizon: it would go first and take fast anyway
      auto plan = make_tessera_policy("tessera", p)->plan(s);
      REQUIRE(plan);
      const auto at = server_of(plan.value());
      const bool plan_used = planned && restart > 0;
      for (int m = 4; m < 8; ++m) CHECK(at.at(m) == (plan_used ? 1 : 0));
      for (int m = 0; m < 4; ++m) {
        if (plan_used)
          CHECK(at.at(m) == 0);
        else if (restart > 0)
          CHECK(at.count(m) == 0);
        else
          CHECK(at.at(m) == 1);
      }
    }
  }
}
