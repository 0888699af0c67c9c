// Property tests over every registered policy: on random small clusters and job sets, each
// round plan respects per-server and per-type capacity, places no job twice, meets every
// job's scale factor (GPUs, or tasks summed over a task split's parts), uses only GPU types
// the job can run on, counts a space-sharing pair's GPUs once, and a whole simulation is
// deterministic and finishes every job.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "policies/registry.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/sim/sim.hpp"
#ifdef TESSERA_WITH_ACTORS  // the runtime's layout (actors/): not in a build without CAF
#include "actors/task_layout.hpp"
#endif
#include "runtime/core/task_split.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// Smaller instances than the default: every policy simulates each to completion.
test::instance random_instance(std::mt19937& rng) {
  return test::random_instance(rng, test::instance_limits{5, 10, 5000});
}

/// Wraps a policy and checks every plan it makes against the snapshot.
class checking_policy final : public test::observed_policy {
 public:
  using observed_policy::observed_policy;
  int plans_checked = 0;

 private:
  void see(const snapshot& s, const round_plan& p) override {
    std::vector<int> used(s.cl->servers.size(), 0), type_used(s.cl->types.size(), 0);
    std::set<std::pair<job_id, int>> seen;
    std::map<std::pair<job_id, int>, int> split_tasks;  // task splits (Hare): tasks per copy
    for (const auto& as : p.assignments) {
      const job_view* jv = nullptr;
      for (const auto& v : s.jobs)
        if (v.spec->id == as.job) jv = &v;
      REQUIRE(jv != nullptr);
      if (as.tasks > 0) {
        // A part of a task split: at least one task per GPU; the parts sum to K (below).
        REQUIRE(as.tasks >= as.gpus());
        split_tasks[{as.job, as.copy}] += as.tasks;
      } else {
        REQUIRE(seen.insert({as.job, as.copy}).second);
        REQUIRE(as.gpus() == jv->spec->scale_factor);
      }
      for (const auto& sh : as.shares) {
        REQUIRE(sh.gpus > 0);
        const auto& sv = s.cl->servers.at(sh.server);
        // A gang needs the type (its view); a task split may also use a type with fewer
        // GPUs than K where the rate model knows the job (runtime/core/task_split.hpp).
        if (as.tasks > 0)
          REQUIRE(split_runs_on(s, *jv, sh.server));
        else
          REQUIRE(jv->throughput[sv.type_index] > 0);
        if (as.partner >= 0 && as.job > as.partner) continue;  // a pair's GPUs count once
        used[sh.server] += sh.gpus;
        type_used[sv.type_index] += sh.gpus;
      }
    }
    for (const auto& [key, tasks] : split_tasks) {
      REQUIRE(seen.count(key) == 0);  // not also placed as a gang
      for (const auto& v : s.jobs)
        if (v.spec->id == key.first) REQUIRE(tasks == v.spec->scale_factor);
    }
    for (const auto& sv : s.cl->servers) REQUIRE(used[sv.id] <= sv.gpus);
    for (std::size_t j = 0; j < s.cl->types.size(); ++j)
      REQUIRE(type_used[j] <= s.cl->types[j].gpus);
#ifdef TESSERA_WITH_ACTORS
    check_layout(s, p);
#endif
    ++plans_checked;
  }

#ifdef TESSERA_WITH_ACTORS
  /// The runtime's layout of the plan (actors/task_layout.hpp): every copy's parts, in
  /// server order, take consecutive shards covering 0..K-1, hold the plan's GPUs, and give
  /// each server the task-times its busiest GPU runs.
  static void check_layout(const snapshot& s, const round_plan& p) {
    std::map<job_id, int> scale;
    for (const auto& v : s.jobs) scale[v.spec->id] = v.spec->scale_factor;
    std::map<std::pair<job_id, int>, int> planned_gpus;
    for (const auto& as : p.assignments) planned_gpus[{as.job, as.copy}] += as.gpus();
    const auto layout = layout_copies(p, [&](job_id id) { return scale.at(id); });
    REQUIRE(layout.size() == planned_gpus.size());
    for (const auto& c : layout) {
      int next = 0, prev = -1, gpus = 0;
      for (const auto& part : c.parts) {
        REQUIRE(part.server > prev);
        REQUIRE(part.shard_begin == next);
        REQUIRE(part.tasks >= 0);
        REQUIRE(part.task_times >= (part.tasks + part.gpus - 1) / part.gpus);
        REQUIRE((part.task_times == 0) == (part.tasks == 0));
        prev = part.server;
        next += part.tasks;
        gpus += part.gpus;
      }
      REQUIRE(next == c.scale);
      REQUIRE(gpus == planned_gpus.at({c.job, c.copy}));
    }
  }
#endif
};

}  // namespace

TEST_CASE("every registered policy makes valid plans and finishes every job",
          "[policies][property]") {
  REQUIRE_FALSE(policy_registry().empty());
  for (const auto& entry : policy_registry()) {
    SECTION(entry.name) {
      std::mt19937 rng(2024);
      for (int trial = 0; trial < 25; ++trial) {
        auto in = random_instance(rng);
        std::mt19937 pair_rng(static_cast<unsigned>(trial));  // leaves `rng`'s draws as they were
        test::add_random_colocations(in, pair_rng);           // for the space-sharing policies
        auto made = make_policy(entry.name);
        REQUIRE(made);
        checking_policy pol(std::move(made.value()));
        sim_config cfg;
        auto r = simulate(in.cl, in.table, in.jobs, pol, cfg);
        INFO("trial " << trial);
        REQUIRE(r);
        CHECK(r->complete);
        CHECK(pol.plans_checked > 0);
        for (const auto& j : r->jobs) {
          CHECK(j.finish >= j.arrival);
          CHECK(j.steps_done == Approx(j.total_steps));
        }
        // Determinism: a fresh instance of the policy gives the same finish times.
        auto again = make_policy(entry.name);
        REQUIRE(again);
        auto r2 = simulate(in.cl, in.table, in.jobs, *again.value(), cfg);
        REQUIRE(r2);
        for (std::size_t i = 0; i < r->jobs.size(); ++i)
          CHECK(r2->jobs[i].finish == r->jobs[i].finish);
        auto m = compute_metrics(r.value());
        CHECK(m.utilisation <= 1.0 + 1e-9);
        CHECK(m.avg_wait >= 0);
      }
    }
  }
}

TEST_CASE("an unknown policy name lists the valid ones", "[policies]") {
  auto p = make_policy("no_such_policy");
  REQUIRE_FALSE(p);
  CHECK(p.err().kind == error_kind::not_found);
  CHECK_THAT(p.err().message, Catch::Contains("no_such_policy"));
  CHECK_THAT(p.err().message, Catch::Contains("max_min_fairness_perf"));
}
