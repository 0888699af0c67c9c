// The job state machine (actors/job_life.hpp).
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "actors/job_life.hpp"

using namespace tessera;

namespace {

const std::vector<job_state> states = {job_state::queued,    job_state::running,
                                       job_state::preempted, job_state::finished,
                                       job_state::failed,    job_state::cancelled};
const std::vector<job_event> events = {job_event::placed, job_event::left_out, job_event::completed,
                                       job_event::failed, job_event::cancelled};

}  // namespace

TEST_CASE("the job state machine allows exactly the documented transitions", "[job_life]") {
  using S = job_state;
  using E = job_event;
  // The diagram of actors/job_life.hpp, edge by edge.
  const std::set<std::pair<std::pair<S, E>, S>> legal = {
      {{S::queued, E::placed}, S::running},        {{S::queued, E::left_out}, S::queued},
      {{S::queued, E::cancelled}, S::cancelled},   {{S::running, E::placed}, S::running},
      {{S::running, E::left_out}, S::preempted},   {{S::running, E::completed}, S::finished},
      {{S::running, E::failed}, S::failed},        {{S::running, E::cancelled}, S::cancelled},
      {{S::preempted, E::placed}, S::running},     {{S::preempted, E::left_out}, S::preempted},
      {{S::preempted, E::cancelled}, S::cancelled}};
  int allowed = 0;
  for (auto s : states)
    for (auto e : events) {
      auto to = next_state(s, e);
      bool expected = false;
      for (const auto& [from, dest] : legal)
        if (from == std::make_pair(s, e)) {
          expected = true;
          REQUIRE(to);
          CHECK(*to == dest);
        }
      if (!expected) {
        REQUIRE_FALSE(to);
        CHECK(to.err().message.find(state_name(s)) != std::string::npos);
        CHECK(to.err().message.find(event_name(e)) != std::string::npos);
      } else {
        ++allowed;
      }
    }
  CHECK(allowed == static_cast<int>(legal.size()));
}

TEST_CASE("random event sequences: final states absorb, a finish needs a running job",
          "[job_life]") {
  std::mt19937 rng(5);
  for (int walk = 0; walk < 2000; ++walk) {
    job_state s = job_state::queued;
    bool ran = false;
    for (int step = 0; step < 30; ++step) {
      const auto e = events[rng() % events.size()];
      auto to = next_state(s, e);
      if (is_final(s)) {
        CHECK_FALSE(to);  // nothing leaves a final state
        continue;
      }
      if (!to) continue;
      if (*to == job_state::finished || *to == job_state::failed) CHECK(s == job_state::running);
      if (*to == job_state::preempted) CHECK(ran);
      if (*to == job_state::running) ran = true;
      s = *to;
    }
  }
}

TEST_CASE("state names round trip", "[job_life]") {
  for (auto s : states) {
    auto back = parse_state(state_name(s));
    REQUIRE(back);
    CHECK(*back == s);
  }
  CHECK_FALSE(parse_state("cancelling"));
}
