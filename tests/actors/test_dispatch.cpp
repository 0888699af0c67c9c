// Tests of dispatch_plan (actors/dispatch.hpp): the plain function that turns a round plan
// into each node's round_orders, without actors. Golden cases for each rule, and a property
// test over random plans of gangs and task splits on small clusters.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "actors/dispatch.hpp"
#include "actors/run_rates.hpp"

using namespace tessera;
using namespace tessera::actors;

namespace {

cluster one_gpu_servers(const std::vector<double>& speeds) {
  std::vector<server> sv;
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    server s;
    s.name = "n" + std::to_string(i);
    s.gpu_type = "v100";
    s.gpus = 1;
    s.speed = speeds[i];
    sv.push_back(s);
  }
  return make_cluster(std::move(sv));
}

run_job make_job(job_id id, int scale, double steps, double step_time = 0.1) {
  run_job j;
  j.spec.id = id;
  j.spec.job_type = "mlp";
  j.spec.scale_factor = scale;
  j.spec.total_steps = steps;
  j.kind = "mlp";
  j.seed = static_cast<std::uint64_t>(id) + 1;
  j.step_time = step_time;
  return j;
}

dispatch_context context(const cluster& cl, bool can_sync) {
  dispatch_context c;
  c.configured = &cl;
  for (std::size_t r = 0; r < cl.servers.size(); ++r) c.live_ranks.push_back(static_cast<int>(r));
  c.can_sync = can_sync;
  c.round = 4;
  c.round_length = 2;
  c.report_grace = 6;
  c.checkpoint_dir = "/ckpt";
  return c;
}

/// Looks jobs up in a map, as the scheduler does.
struct book {
  std::map<std::int64_t, dispatch_job> jobs;
  std::function<const dispatch_job*(std::int64_t)> lookup() const {
    return [this](std::int64_t id) -> const dispatch_job* {
      auto it = jobs.find(id);
      return it == jobs.end() ? nullptr : &it->second;
    };
  }
};

}  // namespace

TEST_CASE("dispatch_plan orders a gang on one node with the job's settings", "[dispatch]") {
  const cluster cl = one_gpu_servers({1.0, 0.5});
  const run_job j = make_job(7, 1, 100);
  book b;
  checkpoint_book ck(9);
  ck.confirm({"/ckpt/job-7.r2.ckpt", 2, 20});
  ck.confirm({"/ckpt/job-7.r3.ckpt", 3, 30});
  b.jobs[7] = dispatch_job{&j, 30, 2, &ck};
  round_plan p;
  p.assignments.push_back(assignment{7, 0, 0, {{1, 1}}, 0, 12.5});
  auto orders = dispatch_plan(p, context(cl, true), b.lookup(), "pol");
  REQUIRE(orders);
  REQUIRE(orders->size() == 2);  // every live rank gets orders, possibly empty
  CHECK(orders->at(0).copies.empty());
  CHECK(orders->at(0).round == 4);
  const auto& o = orders->at(1);
  CHECK(o.round == 4);
  CHECK(o.length == 2);
  REQUIRE(o.copies.size() == 1);
  const auto& c = o.copies[0];
  CHECK(c.job == 7);
  CHECK(c.copy == 0);
  CHECK(c.kind == "mlp");
  CHECK(c.seed == 8);
  CHECK(c.scale == 1);
  CHECK(c.gpus == 1);
  CHECK(c.total_steps == 100);
  CHECK(c.resume_step == 30);
  CHECK(c.step_budget == 13);  // ceil of the plan's budget
  CHECK(c.part_ranks.empty());
  CHECK(c.fork_ranks.empty());
  CHECK(c.shard_begin == 0);
  CHECK(c.shards == 1);
  CHECK(c.task_times == 1);
  CHECK(c.channel == ((std::uint64_t{7} << 20) ^ 2));
  CHECK(c.aggregate_timeout == Approx(3 + 0.1 / 0.5));  // grace / 2 + slowest part's step
  // Its checkpoints: this round's file, the book's resume and fallback, epoch and fence.
  CHECK(c.checkpoint_path == "/ckpt/job-7.r4.ckpt");
  CHECK(c.resume_path == "/ckpt/job-7.r3.ckpt");
  CHECK(c.fallback_path == "/ckpt/job-7.r2.ckpt");
  CHECK(c.fallback_step == 20);
  CHECK(c.epoch == 9);
  CHECK(c.fence_path == "/ckpt/job-7.fence");
}

TEST_CASE("dispatch_plan: forked copies get one share of the rest and their leaders",
          "[dispatch]") {
  const cluster cl = one_gpu_servers({1.0, 1.0, 1.0});
  const run_job j = make_job(1, 1, 100);
  book b;
  b.jobs[1] = dispatch_job{&j, 90, 0};
  round_plan p;
  for (int c = 0; c < 3; ++c) p.assignments.push_back(assignment{1, c, 0, {{2 - c, 1}}, 0, -1});
  auto orders = dispatch_plan(p, context(cl, true), b.lookup(), "pol");
  REQUIRE(orders);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(orders->at(r).copies.size() == 1);
    const auto& c = orders->at(r).copies[0];
    CHECK(c.copy == 2 - r);
    CHECK(c.step_budget == 4);  // ceil(10 remaining / 3 copies)
    CHECK(c.fork_ranks == std::vector<std::int32_t>{2, 1, 0});
  }
  SECTION("without aggregators a fork is refused") {
    auto no = dispatch_plan(p, context(cl, false), b.lookup(), "pol");
    REQUIRE_FALSE(no);
    CHECK(no.err().message ==
          "policy pol forked job 1 but this launch cannot merge copies "
          "(use mpirun)");
  }
  SECTION("copies must be numbered 0..n-1") {
    p.assignments.pop_back();
    p.assignments[1].copy = 5;
    auto bad = dispatch_plan(p, context(cl, true), b.lookup(), "pol");
    REQUIRE_FALSE(bad);
    CHECK(bad.err().message == "policy pol gave job 1 copies that are not numbered 0..1");
  }
}

TEST_CASE(
    "dispatch_plan: a spread copy steps in rank order, or runs on one node without "
    "aggregators",
    "[dispatch]") {
  const cluster cl = one_gpu_servers({1.0, 0.25, 1.0});
  const run_job j = make_job(3, 4, 50);
  book b;
  b.jobs[3] = dispatch_job{&j, 0, 0};
  round_plan p;  // a task split: 1 task on rank 2, 3 tasks on rank 1
  p.assignments.push_back(assignment{3, 0, 0, {{2, 1}}, 1, -1});
  p.assignments.push_back(assignment{3, 0, 0, {{1, 1}}, 3, -1});
  auto orders = dispatch_plan(p, context(cl, true), b.lookup(), "pol");
  REQUIRE(orders);
  const auto& a = orders->at(1).copies.at(0);
  const auto& c = orders->at(2).copies.at(0);
  CHECK(a.part_ranks == std::vector<std::int32_t>{1, 2});
  CHECK(c.part_ranks == a.part_ranks);
  CHECK(a.shard_begin == 0);
  CHECK(a.shards == 3);
  CHECK(a.task_times == 3);
  CHECK(c.shard_begin == 3);
  CHECK(c.shards == 1);
  CHECK(a.aggregate_timeout == Approx(3 + 3 * 0.1 / 0.25));
  auto alone = dispatch_plan(p, context(cl, false), b.lookup(), "pol");
  REQUIRE(alone);
  CHECK(alone->at(2).copies.empty());
  const auto& one = alone->at(1).copies.at(0);
  CHECK(one.gpus == 2);    // it holds both parts' GPUs
  CHECK(one.shards == 4);  // and runs every task
  CHECK(one.part_ranks.empty());
}

TEST_CASE("dispatch_plan: every task of every copy is ordered exactly once, in shard order",
          "[dispatch][property]") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int nodes = 1 + static_cast<int>(rng() % 4);
    std::vector<double> speeds;
    for (int r = 0; r < nodes; ++r) speeds.push_back(0.25 * (1 + rng() % 4));
    const cluster cl = one_gpu_servers(speeds);
    std::vector<run_job> jobs;
    round_plan p;
    std::vector<bool> used(nodes, false);
    for (job_id id = 0; id < 3; ++id) {
      const int k = 1 + static_cast<int>(rng() % 4);
      jobs.push_back(make_job(id, k, 100));
      // A task split over free nodes, tasks spread so every part has at least one.
      std::vector<int> free;
      for (int r = 0; r < nodes; ++r)
        if (!used[r]) free.push_back(r);
      if (free.empty()) break;
      const int parts = 1 + static_cast<int>(rng() % std::min<std::size_t>(free.size(), k));
      int left = k;
      for (int q = 0; q < parts; ++q) {
        const int t =
            q + 1 == parts ? left : 1 + static_cast<int>(rng() % (left - (parts - q - 1)));
        left -= t;
        used[free[q]] = true;
        p.assignments.push_back(assignment{id, 0, 0, {{free[q], 1}}, t, -1});
      }
    }
    book b;
    for (const auto& j : jobs) b.jobs[j.spec.id] = dispatch_job{&j, 0, 0};
    const bool sync = rng() % 2 == 0;
    auto orders = dispatch_plan(p, context(cl, sync), b.lookup(), "pol");
    REQUIRE(orders);
    std::map<std::int64_t, std::vector<std::pair<int, int>>> shards;  // job -> (begin, count)
    std::map<std::int64_t, int> gpus;
    for (const auto& [rank, o] : *orders)
      for (const auto& c : o.copies) {
        shards[c.job].push_back({c.shard_begin, c.shards});
        gpus[c.job] += c.gpus;
        if (!c.part_ranks.empty()) CHECK(std::is_sorted(c.part_ranks.begin(), c.part_ranks.end()));
      }
    for (const auto& [id, ranges] : shards) {
      int k = b.jobs[id].spec->spec.scale_factor;
      std::vector<int> hit(k, 0);
      for (auto [begin, count] : ranges)
        for (int s = begin; s < begin + count; ++s) ++hit[s];
      CHECK(std::all_of(hit.begin(), hit.end(), [](int h) { return h == 1; }));
      int planned = 0;
      for (const auto& as : p.assignments)
        if (as.job == id) planned += as.gpus();
      CHECK(gpus[id] == planned);  // the GPUs held match the plan, with or without aggregators
    }
  }
}

TEST_CASE("dispatch_plan sends a pair to one node, each copy at its speed share",
          "[dispatch][packing]") {
  const cluster cl = one_gpu_servers({1.0, 0.5});
  auto source = std::make_shared<throughput_table>();
  source->set_isolated("v100", {"A", 1}, 10.0);
  source->set_isolated("v100", {"B", 1}, 20.0);
  source->set_colocated("v100", {"A", 1}, {"B", 1}, {8.0, 5.0});  // A at 0.8, B at 0.25
  run_rates rates(cl, source);
  run_job a = make_job(3, 1, 100, 0.1);
  run_job b = make_job(5, 1, 100, 0.05);
  a.spec.job_type = "A";
  b.spec.job_type = "B";
  rates.add(a);
  rates.add(b);
  book bk;
  bk.jobs[3] = dispatch_job{&a, 0, 0, nullptr};
  bk.jobs[5] = dispatch_job{&b, 0, 0, nullptr};
  round_plan p;
  p.assignments.push_back(assignment{3, 0, 0, {{1, 1}}, 0, -1, 5});
  p.assignments.push_back(assignment{5, 0, 0, {{1, 1}}, 0, -1, 3});
  auto ctx = context(cl, true);
  ctx.rates = &rates.for_live(cl, {0, 1});
  auto orders = dispatch_plan(p, ctx, bk.lookup(), "pol");
  REQUIRE(orders);
  CHECK(orders->at(0).copies.empty());
  const auto& both = orders->at(1).copies;
  REQUIRE(both.size() == 2);
  CHECK(both[0].job == 3);
  CHECK(both[0].partner == 5);
  CHECK(both[0].speed_share == Approx(0.8));
  CHECK(both[0].gpus == 1);
  CHECK(both[1].job == 5);
  CHECK(both[1].partner == 3);
  CHECK(both[1].speed_share == Approx(0.25));
  // A single copy keeps the whole speed.
  round_plan alone;
  alone.assignments.push_back(assignment{3, 0, 0, {{0, 1}}, 0, -1});
  auto single = dispatch_plan(alone, ctx, bk.lookup(), "pol");
  REQUIRE(single);
  REQUIRE(single->at(0).copies.size() == 1);
  CHECK(single->at(0).copies[0].partner == -1);
  CHECK(single->at(0).copies[0].speed_share == 1.0);
  // A pair the rate model cannot price is refused, naming the policy.
  auto bare = context(cl, true);
  auto refused = dispatch_plan(p, bare, bk.lookup(), "pol");
  REQUIRE_FALSE(refused);
  CHECK(refused.err().message.find("pol") != std::string::npos);
}
