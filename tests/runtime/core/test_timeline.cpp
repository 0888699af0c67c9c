// The timeline (runtime/core/timeline.hpp): the shared round loop records exactly the plans it
// validated, so a simulation's timeline holds each round's placements, and bad lines are
// reported with the file, line and field.
#include <catch2/catch.hpp>

#include <sstream>

#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/timeline.hpp"
#include "runtime/workload/trace_gen.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

/// Forwards to a registry policy and keeps every plan it returned.
class plan_keeper final : public test::observed_policy {
 public:
  using observed_policy::observed_policy;
  std::vector<round_plan> plans;

 private:
  void see(const snapshot&, const round_plan& p) override { plans.push_back(p); }
};

/// The placements a plan makes, written out from its assignments (not by placements_of).
std::vector<timeline_placement> expected_placements(const cluster& cl, const round_plan& p) {
  std::vector<timeline_placement> out;
  for (const auto& as : p.assignments)
    for (const auto& sh : as.shares)
      out.push_back({as.job, as.copy, cl.servers.at(sh.server).name, sh.gpus, as.tasks});
  return out;
}

}  // namespace

TEST_CASE("timeline: a simulation records each round's plan, placement by placement",
          "[timeline]") {
  auto cl = parse_cluster_shorthand("8 v100 : 8 p100 : 8 k80, 2 per server", "test");
  REQUIRE(cl);
  auto table = throughput_table::load_bundled();
  auto templates = bundled_job_templates();
  REQUIRE(table);
  REQUIRE(templates);
  trace_gen_config tg;
  tg.num_jobs = 25;
  tg.rate_per_hour = 20;
  tg.multi_gpu = true;
  tg.seed = 3;
  auto jobs = generate_trace(tg, *templates, *table);
  REQUIRE(jobs);
  auto inner = make_policy("max_min_fairness_perf", {}, "test");
  REQUIRE(inner);
  plan_keeper keeper(std::move(inner.value()));
  std::ostringstream out;
  timeline_recorder rec(out, *cl, "simulate", keeper.name(), 360);
  sim_config cfg;
  cfg.timeline = &rec;
  auto r = simulate(*cl, *table, *jobs, keeper, cfg);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  REQUIRE(r->complete);
  std::istringstream in(out.str());
  auto rounds = read_timeline(in, "timeline");
  REQUIRE(rounds);
  REQUIRE(rounds->size() == keeper.plans.size());
  REQUIRE(rounds->size() == r->rounds.size());
  std::size_t placed = 0;
  for (std::size_t i = 0; i < rounds->size(); ++i) {
    INFO("round " << i);
    const auto& tl = (*rounds)[i];
    CHECK(tl.round == static_cast<std::int64_t>(i));
    CHECK(tl.start == r->rounds[i].start);
    CHECK(tl.length == 360);
    CHECK(tl.active == r->rounds[i].active_jobs);
    CHECK(tl.placements == expected_placements(*cl, keeper.plans[i]));
    placed += tl.placements.size();
  }
  CHECK(placed > rounds->size());  // multi-GPU jobs on 2-GPU servers: several a round
}

TEST_CASE("timeline: plan_round records a plan only once it is validated", "[timeline]") {
  cluster cl = make_cluster({{0, "a", "v100", 0, 2, 1.0}, {0, "b", "k80", 0, 2, 1.0}});
  const job j = test::make_job(7, "m", 2, 100);
  job_view v;
  v.spec = &j;
  v.throughput = {1.0, 0.5};
  std::ostringstream out;
  timeline_recorder rec(out, cl, "run", "fixed", 1);
  round_context ctx;
  ctx.now = 5;
  ctx.round_length = 1;
  ctx.cl = &cl;
  ctx.timeline = &rec;
  assignment good;
  good.job = 7;
  good.type = -1;
  good.shares = {{0, 1}, {1, 1}};
  test::fixed_plan ok_policy({good});
  REQUIRE(plan_round(ok_policy, ctx, {v}));
  assignment too_wide = good;
  too_wide.shares = {{0, 3}};  // server a has 2 GPUs: validate_plan refuses it
  test::fixed_plan bad_policy({too_wide});
  REQUIRE_FALSE(plan_round(bad_policy, ctx, {v}));
  std::istringstream in(out.str());
  auto rounds = read_timeline(in, "t");
  REQUIRE(rounds);
  REQUIRE(rounds->size() == 1);
  CHECK((*rounds)[0].start == 5);
  const std::vector<timeline_placement> want = {{7, 0, "a", 1, 0}, {7, 0, "b", 1, 0}};
  CHECK((*rounds)[0].placements == want);
}

TEST_CASE("timeline: a bad line names the file, the line and the field", "[timeline]") {
  std::istringstream no_head("{\"round\":0}\n");
  auto a = read_timeline(no_head, "t.jsonl");
  REQUIRE_FALSE(a);
  CHECK_THAT(a.err().message, Catch::Contains("t.jsonl:1") && Catch::Contains("timeline"));
  std::istringstream bad_round("{\"timeline\":1}\n{\"round\":0,\"start\":0,\"length\":1}\n");
  auto b = read_timeline(bad_round, "t.jsonl");
  REQUIRE_FALSE(b);
  CHECK_THAT(b.err().message, Catch::Contains("t.jsonl:2") && Catch::Contains("active"));
  std::istringstream not_json("{\"timeline\":1}\nnot json\n");
  auto c = read_timeline(not_json, "t.jsonl");
  REQUIRE_FALSE(c);
  CHECK_THAT(c.err().message, Catch::Contains("t.jsonl:2"));
}
