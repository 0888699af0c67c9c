// Typed policy options: kinds, validation messages and the kind-checked accessors.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

#include "policies/options.hpp"
#include "policies/registry.hpp"

using namespace tessera;

namespace {

const std::vector<option_spec> specs = {
    {"ratio", "a real option", 0.5, 0.0, 1.0},
    int_option("count", "an integer option", 3, 1, 16),
    bool_option("enabled", "a boolean option", true),
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("options: kinds and defaults of the constructors", "[policies]") {
  CHECK(specs[0].kind == option_kind::real);
  CHECK(specs[1].kind == option_kind::integer);
  CHECK(specs[1].default_value == 3);
  CHECK(specs[2].kind == option_kind::boolean);
  CHECK(specs[2].default_value == 1);
  CHECK(specs[2].min == 0);
  CHECK(specs[2].max == 1);
  CHECK(std::string(to_string(option_kind::real)) == "real");
  CHECK(std::string(to_string(option_kind::integer)) == "int");
  CHECK(std::string(to_string(option_kind::boolean)) == "bool");
}

TEST_CASE("options: typed accessors read defaults and given values", "[policies]") {
  auto d = validate_options(specs, {}, "test");
  REQUIRE(d.ok());
  CHECK(d->get("ratio") == 0.5);
  CHECK(d->integer("count") == 3);
  CHECK(d->flag("enabled"));
  auto g = validate_options(specs, {{"ratio", 0.25}, {"count", 16}, {"enabled", 0}}, "test");
  REQUIRE(g.ok());
  CHECK(g->get("ratio") == 0.25);
  CHECK(g->integer("count") == 16);
  CHECK_FALSE(g->flag("enabled"));
}

TEST_CASE("options: an accessor of the wrong kind or an undeclared name throws", "[policies]") {
  auto d = validate_options(specs, {}, "test");
  REQUIRE(d.ok());
  CHECK_THROWS_AS(d->get("enabled"), std::logic_error);
  CHECK_THROWS_AS(d->flag("count"), std::logic_error);
  CHECK_THROWS_AS(d->integer("ratio"), std::logic_error);
  CHECK_THROWS_AS(d->get("nothing"), std::logic_error);
}

TEST_CASE("options: values not of the option's kind are errors naming where and the field",
          "[policies]") {
  auto half = validate_options(specs, {{"count", 0.5}}, "sim.toml:4");
  REQUIRE_FALSE(half.ok());
  CHECK(half.err().kind == error_kind::invalid_input);
  CHECK(half.err().message == "sim.toml:4: field 'count': expected an integer, got 0.5");

  auto two = validate_options(specs, {{"enabled", 2}}, "--policy-arg");
  REQUIRE_FALSE(two.ok());
  CHECK(two.err().kind == error_kind::invalid_input);
  CHECK(two.err().message == "--policy-arg: field 'enabled': expected 0 or 1 (a boolean), got 2");

  auto some = validate_options(specs, {{"enabled", 0.5}}, "x");
  REQUIRE_FALSE(some.ok());
  CHECK(has(some.err().message, "field 'enabled'"));

  auto range = validate_options(specs, {{"count", 17}}, "x");
  REQUIRE_FALSE(range.ok());
  CHECK(range.err().message == "x: field 'count': 17 is outside [1, 16]");

  CHECK(validate_options(specs, {{"ratio", 0.3}}, "x").ok());  // reals take fractions
}

TEST_CASE("options: registry policies reject bad kinds through make_policy", "[policies]") {
  auto ilp = make_policy("hops", {{"use_ilp", 2}}, "--policy-arg");
  REQUIRE_FALSE(ilp.ok());
  CHECK(has(ilp.err().message, "--policy-arg: field 'use_ilp'"));
  auto copies = make_policy("hadare", {{"max_copies", 2.5}}, "--policy-arg");
  REQUIRE_FALSE(copies.ok());
  CHECK(has(copies.err().message, "field 'max_copies'"));
  CHECK(make_policy("hops", {{"use_ilp", 0}}).ok());
  CHECK(make_policy("hadare", {{"max_copies", 2}}).ok());
}

TEST_CASE("options: every registry default is of its kind and within its bounds", "[policies]") {
  for (const auto& e : policy_registry())
    for (const auto& o : e.options) {
      INFO(e.name << ": " << o.name);
      CHECK(validate_options(e.options, {{o.name, o.default_value}}, "test").ok());
      if (o.kind == option_kind::boolean) CHECK((o.min == 0 && o.max == 1));
    }
}

TEST_CASE("options: 0/1 and whole-number options are declared as such", "[policies]") {
  const std::map<std::string, std::vector<std::string>> flags = {
      {"max_min_fairness_perf", {"efficiency_stage"}},
      {"min_total_duration_perf", {"efficiency_stage"}},
      {"finish_time_fairness_perf", {"efficiency_stage"}},
      {"hops", {"use_ilp", "fill_fragments", "split_configs"}},
      {"hadar", {"mixed_types", "value_prices"}},
      {"hare", {"relaxed"}},
      {"hare_offline", {"relaxed"}}};
  const std::map<std::string, std::vector<std::string>> integers = {
      {"finish_time_fairness_perf", {"max_iterations"}}, {"hadare", {"max_copies"}}};
  auto kind_of = [](const std::string& policy, const std::string& option) {
    for (const auto& e : policy_registry())
      if (e.name == policy)
        for (const auto& o : e.options)
          if (o.name == option) return o.kind;
    FAIL("no option " << option << " in " << policy);
    return option_kind::real;
  };
  for (const auto& [policy, names] : flags)
    for (const auto& n : names) CHECK(kind_of(policy, n) == option_kind::boolean);
  for (const auto& [policy, names] : integers)
    for (const auto& n : names) CHECK(kind_of(policy, n) == option_kind::integer);
}

TEST_CASE("options: NaN and infinities are refused for every kind", "[policies][limits]") {
  // NaN compares false with every bound, so a range check written as "below min or above
  // max" let it through to the policy.
  const double bad[] = {std::nan(""), HUGE_VAL, -HUGE_VAL};
  for (const char* name : {"ratio", "count", "enabled"})
    for (const double v : bad) {
      INFO(name << " = " << v);
      auto r = validate_options(specs, {{name, v}}, "--policy-arg");
      REQUIRE_FALSE(r.ok());
      CHECK(r.err().kind == error_kind::invalid_input);
      CHECK(has(r.err().message, std::string("--policy-arg: field '") + name + "'"));
    }
  auto tol =
      make_policy("finish_time_fairness_perf", {{"tolerance", std::nan("")}}, "--policy-arg");
  REQUIRE_FALSE(tol);
  CHECK(has(tol.err().message, "field 'tolerance'"));
}
