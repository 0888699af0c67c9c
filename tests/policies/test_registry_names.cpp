// The policy registry: the Gavel names, building each, the agnostic LP variants, and errors
// for unknown names and bad options.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "policies/finish_time_fairness.hpp"
#include "policies/gavel_family.hpp"
#include "policies/max_min_fairness.hpp"
#include "policies/max_sum_throughput.hpp"
#include "policies/min_total_duration.hpp"
#include "policies/registry.hpp"
#include "policies/type_blind.hpp"
#include "runtime/sim/sim.hpp"
#include "tests/support.hpp"

using namespace tessera;

TEST_CASE("registry: Gavel policies are listed and build", "[policies]") {
  const std::vector<std::string> gavel = {"fifo",
                                          "fifo_perf",
                                          "max_min_fairness",
                                          "max_min_fairness_perf",
                                          "finish_time_fairness",
                                          "finish_time_fairness_perf",
                                          "min_total_duration",
                                          "min_total_duration_perf",
                                          "max_sum_throughput",
                                          "max_sum_throughput_perf",
                                          "max_min_fairness_packed",
                                          "min_total_duration_packed",
                                          "fifo_packed",
                                          "finish_time_fairness_packed"};
  std::vector<std::string> listed;
  for (const auto& e : policy_registry()) {
    listed.push_back(e.name);
    CHECK_FALSE(e.summary.empty());
  }
  for (const auto& name : gavel) {
    INFO(name);
    CHECK(std::find(listed.begin(), listed.end(), name) != listed.end());
  }
}

TEST_CASE("registry: every policy reports its registry name and errors under it", "[policies]") {
  for (const auto& e : policy_registry()) {
    INFO(e.name);
    auto p = make_policy(e.name);
    REQUIRE(p.ok());
    CHECK(p.value()->name() == e.name);
    snapshot no_cluster;  // a broken snapshot: every policy refuses it, naming itself
    auto plan = p.value()->plan(no_cluster);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.err().message.rfind(e.name + ": ", 0) == 0);
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

TEST_CASE("registry: the agnostic LP variants are the aware policies on the type-blind view",
          "[policies]") {
  using factory = std::function<std::unique_ptr<allocation_policy>(const options&)>;
  struct variant {
    std::string name;
    std::vector<option_spec> specs;
    factory make;
    std::map<std::string, double> args;
  };
  const std::vector<variant> variants = {
      {"max_min_fairness", max_min_fairness_options(), make_max_min_fairness, {}},
      {"max_min_fairness",
       max_min_fairness_options(),
       make_max_min_fairness,
       {{"efficiency_stage", 0}}},
      {"finish_time_fairness",
       finish_time_fairness_options(),
       make_finish_time_fairness,
       {{"max_iterations", 5}}},
      {"min_total_duration", min_total_duration_options(), make_min_total_duration, {}},
      {"max_sum_throughput", max_sum_throughput_options(), make_max_sum_throughput, {}},
  };
  for (const auto& v : variants) {
    INFO(v.name << " with " << v.args.size() << " options set");
    std::mt19937 rng(77);
    for (int trial = 0; trial < 8; ++trial) {
      const auto in = test::random_instance(rng, test::instance_limits{5, 10, 5000});
      auto registered = make_policy(v.name, v.args);
      REQUIRE(registered.ok());
      auto opts = validate_options(v.specs, v.args, "test");
      REQUIRE(opts.ok());
      auto wrapped = make_gavel_policy(v.name, make_type_blind(v.make(opts.value())));
      auto a = simulate(in.cl, in.table, in.jobs, *registered.value(), sim_config{});
      auto b = simulate(in.cl, in.table, in.jobs, *wrapped, sim_config{});
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(a->jobs.size() == b->jobs.size());
      for (std::size_t i = 0; i < a->jobs.size(); ++i)
        CHECK(a->jobs[i].finish == b->jobs[i].finish);
    }
  }
}
