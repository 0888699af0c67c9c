// restart_clock: when jobs charged a restart (re)started, as the tessera and hops policies
// keep it from round to round.

#include <catch2/catch.hpp>

#include <vector>

#include "policies/restart_clock.hpp"

using namespace tessera;

namespace {

/// A plan placing copy 0 of each (job, servers) pair, one GPU per server.
round_plan plan_of(const std::vector<std::pair<job_id, std::vector<int>>>& placed) {
  round_plan p;
  for (const auto& [job, servers] : placed) {
    assignment as;
    as.job = job;
    for (int sv : servers) as.shares.push_back({sv, 1});
    p.assignments.push_back(as);
  }
  return p;
}

}  // namespace

TEST_CASE("restart_clock: a job's start holds while it stays, resets when it moves",
          "[restart_clock]") {
  std::vector<job> specs(2);
  specs[0].id = 1;
  specs[1].id = 2;
  snapshot s;
  s.jobs.resize(2);
  for (int i = 0; i < 2; ++i) {
    s.jobs[i].spec = &specs[i];
    s.jobs[i].restart_seconds = 100;  // amortised after 8 x 100 s
  }
  restart_clock clock;
  const round_plan r0 = plan_of({{1, {0}}, {2, {1, 2}}});
  s.now = 0;
  clock.note(s, r0, 8);
  s.now = 60;
  CHECK(clock.amortising(s.jobs[0], s.now, 8));
  CHECK_FALSE(clock.amortising(s.jobs[0], s.now, 0));    // off
  CHECK_FALSE(clock.amortising(s.jobs[0], s.now, 0.5));  // 60 s >= 0.5 x 100 s
  // Round 1: job 1 stays on server 0, job 2 moves from {1, 2} to {1, 3}.
  s.last_plan = &r0;
  const round_plan r1 = plan_of({{1, {0}}, {2, {1, 3}}});
  clock.note(s, r1, 8);
  s.now = 750;  // job 1 started at 0, job 2 at 60
  CHECK(clock.amortising(s.jobs[0], s.now, 8));
  CHECK(clock.amortising(s.jobs[1], s.now, 8));
  s.now = 820;  // 820 >= 800 for job 1; 760 < 800 for job 2
  CHECK_FALSE(clock.amortising(s.jobs[0], s.now, 8));
  CHECK(clock.amortising(s.jobs[1], s.now, 8));
  // Round 2: job 1 not placed, so forgotten; placed again later, it starts afresh.
  s.last_plan = &r1;
  const round_plan r2 = plan_of({{2, {1, 3}}});
  clock.note(s, r2, 8);
  CHECK_FALSE(clock.amortising(s.jobs[0], s.now, 8));
  CHECK(clock.amortising(s.jobs[1], s.now, 8));
  // Without a restart charged, nothing is kept.
  for (auto& v : s.jobs) v.restart_seconds = 0;
  s.last_plan = &r2;
  clock.note(s, r2, 8);
  CHECK_FALSE(clock.amortising(s.jobs[1], s.now, 8));
}
