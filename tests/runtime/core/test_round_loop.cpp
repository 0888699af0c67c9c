// Tests of the round loop's shared decisions (runtime/core/round_loop.hpp): admission in arrival
// order, the snapshot plan_round gives a policy, the rules every plan is held to, and the
// round record metrics read.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "runtime/core/records.hpp"
#include "runtime/core/round_loop.hpp"

using namespace tessera;

namespace {

/// A policy that records the snapshot it was given and returns a fixed plan (or error).
class scripted_policy final : public policy {
 public:
  explicit scripted_policy(result<round_plan> answer) : answer_(std::move(answer)) {}
  std::string name() const override { return "scripted"; }
  result<round_plan> plan(const snapshot& s) override {
    seen = s;
    return answer_;
  }
  snapshot seen;

 private:
  result<round_plan> answer_;
};

cluster two_servers() {
  server a;
  a.name = "a";
  a.gpu_type = "v100";
  a.gpus = 2;
  server b = a;
  b.name = "b";
  return make_cluster({a, b});
}

job make_job(job_id id, double arrival, double steps = 100) {
  job j;
  j.id = id;
  j.arrival = arrival;
  j.total_steps = steps;
  return j;
}

}  // namespace

TEST_CASE("arrival_queue admits every job once, in arrival order, when its time comes",
          "[round_loop][property]") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<job> jobs;
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) jobs.push_back(make_job(i, static_cast<double>(rng() % 10)));
    std::vector<const job*> order;
    for (const auto& j : jobs) order.push_back(&j);
    std::shuffle(order.begin(), order.end(), rng);
    arrival_queue q;
    for (const job* j : order) q.push(j);
    std::vector<const job*> admitted;
    for (double t = 0; t < 10; t += 1) {
      CHECK(q.next_arrival() >= t);
      for (const job* j : q.admit(t)) {
        CHECK(j->arrival <= t);
        admitted.push_back(j);
      }
    }
    CHECK(q.empty());
    REQUIRE(admitted.size() == jobs.size());
    CHECK(std::is_sorted(admitted.begin(), admitted.end(), [](const job* a, const job* b) {
      return a->arrival != b->arrival ? a->arrival < b->arrival : a->id < b->id;
    }));
  }
}

TEST_CASE("plan_round gives the policy its snapshot in arrival order and stamps the plan",
          "[round_loop]") {
  const cluster cl = two_servers();
  const job late = make_job(1, 5), early = make_job(2, 1), tie = make_job(0, 5);
  std::vector<job_view> views(3);
  views[0].spec = &late;
  views[1].spec = &early;
  views[2].spec = &tie;
  views[0].steps_done = 40;
  views[0].remaining_steps = -1;  // stale: plan_round recomputes it
  round_plan answer;
  answer.assignments.push_back(assignment{2, 0, 0, {{0, 1}}, 0, -1});
  scripted_policy pol(answer);
  round_plan last;
  round_context ctx;
  ctx.now = 10;
  ctx.round_length = 6;
  ctx.cl = &cl;
  ctx.last_plan = &last;
  ctx.job_set_version = 7;
  ctx.copy_limit = 1;
  auto r = plan_round(pol, ctx, views);
  REQUIRE(r);
  REQUIRE(pol.seen.jobs.size() == 3);
  CHECK(pol.seen.jobs[0].spec == &early);
  CHECK(pol.seen.jobs[1].spec == &tie);
  CHECK(pol.seen.jobs[2].spec == &late);
  CHECK(pol.seen.jobs[2].remaining_steps == 60);
  CHECK(pol.seen.now == 10);
  CHECK(pol.seen.round_length == 6);
  CHECK(pol.seen.cl == &cl);
  CHECK(pol.seen.last_plan == &last);
  CHECK(pol.seen.job_set_version == 7);
  CHECK(pol.seen.copy_limit == 1);
  CHECK(r->plan.start == 10);
  CHECK(r->plan.length == 6);
  CHECK(r->snap.jobs.size() == 3);
}

TEST_CASE("plan_round refuses a plan that breaks the rules, and passes policy errors on",
          "[round_loop]") {
  const cluster cl = two_servers();
  const job j = make_job(1, 0);
  std::vector<job_view> views(1);
  views[0].spec = &j;
  round_context ctx;
  ctx.cl = &cl;
  round_plan over;
  over.assignments.push_back(assignment{1, 0, 0, {{0, 3}}, 0, -1});
  scripted_policy bad(over);
  auto r = plan_round(bad, ctx, views);
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "scripted over-filled server a");
  round_plan stranger;
  stranger.assignments.push_back(assignment{9, 0, 0, {{0, 1}}, 0, -1});
  scripted_policy unknown(stranger);
  r = plan_round(unknown, ctx, views);
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "scripted placed job 9, which is not active");
  scripted_policy failing(error{error_kind::solver_failed, "no solution"});
  r = plan_round(failing, ctx, views);
  REQUIRE_FALSE(r);
  CHECK(r.err().message == "no solution");
}

TEST_CASE("validate_plan holds every executor's plans to the same rules", "[round_loop]") {
  const cluster cl = two_servers();
  round_plan p;
  p.assignments.push_back(assignment{1, 0, 0, {{0, 2}}, 0, -1});
  p.assignments.push_back(assignment{2, 0, 0, {{1, 1}}, 0, -1});
  CHECK(validate_plan(cl, p, "pol"));
  auto twice = p;
  twice.assignments.push_back(assignment{1, 0, 0, {{1, 1}}, 0, -1});
  auto e = validate_plan(cl, twice, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol placed job 1 twice");
  auto over = p;
  over.assignments.push_back(assignment{3, 0, 0, {{0, 1}}, 0, -1});
  e = validate_plan(cl, over, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol over-filled server a");
  auto invalid = p;
  invalid.assignments.push_back(assignment{4, 0, 0, {{5, 1}}, 0, -1});
  CHECK_FALSE(validate_plan(cl, invalid, "pol"));
  const job j = make_job(3, 0);
  CHECK_FALSE(check_runnable(j, {0.0}));
  CHECK(check_runnable(j, {0.0, 1.0}));
}

TEST_CASE("record_round counts busy and idle GPUs and the jobs left waiting", "[round_loop]") {
  round_plan p;
  p.start = 30;
  p.assignments.push_back(assignment{1, 0, 0, {{0, 2}}, 0, -1});
  p.assignments.push_back(assignment{1, 1, 0, {{1, 1}}, 0, -1});  // a second copy of job 1
  const auto rr = record_round(p, 4, 3);
  CHECK(rr.start == 30);
  CHECK(rr.busy_gpus == 3);
  CHECK(rr.idle_gpus == 1);
  CHECK(rr.active_jobs == 3);
  CHECK(rr.waiting_jobs == 2);
  // A task split names its job on every part; whole gangs once each.
  round_plan split;
  split.assignments.push_back(assignment{5, 0, 0, {{0, 1}}, 1, -1});
  split.assignments.push_back(assignment{5, 0, 0, {{1, 1}}, 1, -1});
  split.assignments.push_back(assignment{6, 0, 0, {{2, 2}}, 0, -1});
  CHECK(record_round(split, 4, 3).waiting_jobs == 1);
  split.assignments.erase(split.assignments.begin());
  split.assignments.front().tasks = 0;
  CHECK(record_round(split, 4, 3).waiting_jobs == 1);
  CHECK(record_round(split, 4, 3).busy_gpus == 3);
}
