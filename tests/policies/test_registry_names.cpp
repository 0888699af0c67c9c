// The policy registry: the Gavel names, building each, and errors for unknown names and
// bad options.
#include <catch2/catch.hpp>

#include <algorithm>

#include "policies/registry.hpp"

using namespace tessera;

TEST_CASE("registry: Gavel policies are listed and build", "[policies]") {
  const std::vector<std::string> gavel = {
      "fifo",               "fifo_perf",
      "max_min_fairness",   "max_min_fairness_perf",
      "finish_time_fairness", "finish_time_fairness_perf",
      "min_total_duration", "min_total_duration_perf",
      "max_sum_throughput", "max_sum_throughput_perf"};
  std::vector<std::string> listed;
  for (const auto& e : policy_registry()) {
    listed.push_back(e.name);
    CHECK_FALSE(e.summary.empty());
  }
  for (const auto& name : gavel) {
    INFO(name);
    CHECK(std::find(listed.begin(), listed.end(), name) != listed.end());
    auto p = make_policy(name);
    REQUIRE(p.ok());
    CHECK(p.value()->name() == name);
  }
}

TEST_CASE("registry: unknown names and bad options", "[policies]") {
  auto p = make_policy("no_such_policy");
  REQUIRE_FALSE(p.ok());
  CHECK(p.err().kind == error_kind::not_found);
  CHECK(p.err().message.find("no_such_policy") != std::string::npos);
  CHECK(p.err().message.find("max_min_fairness_perf") != std::string::npos);
  CHECK(p.err().message.find("fifo") != std::string::npos);

  auto q = make_policy("max_min_fairness_perf", {{"efficiency_stage", 2}}, "sim.toml:3");
  REQUIRE_FALSE(q.ok());
  CHECK(q.err().kind == error_kind::invalid_input);
  CHECK(q.err().message.find("sim.toml:3") != std::string::npos);

  CHECK(make_policy("finish_time_fairness", {{"tolerance", 1e-4}}).ok());
  CHECK(make_policy("max_min_fairness", {{"efficiency_stage", 0}}).ok());
  CHECK_FALSE(make_policy("fifo", {{"efficiency_stage", 1}}).ok());
}
