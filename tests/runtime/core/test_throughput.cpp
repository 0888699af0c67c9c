// Tests of the throughput table reader (runtime/core/throughput.cpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "runtime/core/throughput.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::has;
using tessera::test::temp_file;

namespace {

const throughput_table& bundled() {
  static const throughput_table t = [] {
    auto r = throughput_table::load_bundled();
    if (!r) FAIL(r.err().message);
    return *r;
  }();
  return t;
}

}  // namespace

TEST_CASE("parse_job_key reads Gavel's tuple form", "[io]") {
  auto k = parse_job_key("('ResNet-18 (batch size 64)', 2)");
  REQUIRE(k);
  CHECK(k->job_type == "ResNet-18 (batch size 64)");
  CHECK(k->scale_factor == 2);
  CHECK(parse_job_key("('A3C', 1)")->job_type == "A3C");
  CHECK_FALSE(parse_job_key("null"));
  CHECK_FALSE(parse_job_key("('A3C', 0)"));
  CHECK_FALSE(parse_job_key("('A3C', x)"));
  CHECK_FALSE(parse_job_key("('A3C' 1)"));
  CHECK_FALSE(parse_job_key("A3C, 1"));
  CHECK_FALSE(parse_job_key("('', 1)"));
}

TEST_CASE("bundled table loads with Gavel's values", "[io]") {
  const auto& t = bundled();
  CHECK(t.gpu_types() == std::vector<std::string>{"k80", "p100", "v100"});
  CHECK(t.job_keys("v100").size() == 83);  // 26 types at scale 1, 19 of them also at 2/4/8
  // Expected values were read from data/gavel/simulation_throughputs.json with python3's json
  // module (repr of the float), not with this reader.
  CHECK(*t.isolated("v100", {"ResNet-18 (batch size 64)", 1}) == Approx(24.093231895382736));
  CHECK(*t.isolated("k80", {"Transformer (batch size 32)", 1}) == Approx(3.5074188411966185));
  CHECK(*t.isolated("p100", {"LM (batch size 20)", 4}) == Approx(93.81478290324394));
  CHECK(*t.isolated("k80", {"A3C", 1}) == Approx(3.4387678290723933));
  CHECK(*t.isolated("k80", {"ResNet-50 (batch size 128)", 2}) == 0.0);  // present, 0 in Gavel
  CHECK(*t.isolated("V100", {"ResNet-18 (batch size 64)", 1}) == Approx(24.093231895382736));
  CHECK_FALSE(t.isolated("a100", {"ResNet-18 (batch size 64)", 1}));
  CHECK_FALSE(t.isolated("v100", {"A3C", 2}));  // A3C only has scale 1
  CHECK(t.knows_job_type("CycleGAN"));
  CHECK_FALSE(t.knows_job_type("GPT-3"));
  CHECK(t.knows({"LM (batch size 5)", 8}));
  CHECK_FALSE(t.knows({"CycleGAN", 2}));
}

TEST_CASE("unconsolidated lookups use their own entry, else the consolidated one", "[io]") {
  const auto& t = bundled();
  // python3: v100_unconsolidated ('ResNet-50 (batch size 32)', 4) = 12.846338026721046,
  //          v100 ('ResNet-50 (batch size 32)', 4) = 13.763229095099536.
  const job_key k{"ResNet-50 (batch size 32)", 4};
  CHECK(*t.isolated("v100", k, false) == Approx(12.846338026721046));
  CHECK(*t.isolated("v100", k, true) == Approx(13.763229095099536));
  // python3: k80_unconsolidated lacks ('ResNet-50 (batch size 64)', 2); k80 has 1.2636370655757299.
  CHECK(*t.isolated("k80", {"ResNet-50 (batch size 64)", 2}, false) == Approx(1.2636370655757299));
  const auto types = t.gpu_types();
  CHECK(std::find(types.begin(), types.end(), "v100_unconsolidated") == types.end());
}

TEST_CASE("colocated lookup returns [self, other]", "[io]") {
  const auto& t = bundled();
  // python3: v100 ('ResNet-18 (batch size 64)', 1) with ('Transformer (batch size 32)', 1)
  //          = [19.757802029418468, 4.376412819593163].
  auto p =
      t.colocated("v100", {"ResNet-18 (batch size 64)", 1}, {"Transformer (batch size 32)", 1});
  REQUIRE(p);
  CHECK(p->first == Approx(19.757802029418468));
  CHECK(p->second == Approx(4.376412819593163));
  CHECK_FALSE(t.colocated("v100", {"ResNet-18 (batch size 64)", 1}, {"GPT-3", 1}));
}

TEST_CASE("set_isolated adds and replaces entries", "[io]") {
  throughput_table t;
  t.set_isolated("A100", {"ResNet-18 (batch size 64)", 1}, 50.0);
  CHECK(*t.isolated("a100", {"ResNet-18 (batch size 64)", 1}) == 50.0);
  t.set_isolated("a100", {"ResNet-18 (batch size 64)", 1}, 60.0);
  CHECK(*t.isolated("a100", {"ResNet-18 (batch size 64)", 1}) == 60.0);
  CHECK(t.gpu_types() == std::vector<std::string>{"a100"});
}

TEST_CASE("table errors name the file and the key", "[io]") {
  SECTION("missing file") {
    auto r = throughput_table::load("/nonexistent/tput.json");
    REQUIRE_FALSE(r);
    CHECK(r.err().kind == error_kind::io);
    CHECK(has(r.err().message, "/nonexistent/tput.json"));
  }
  SECTION("syntax error gives a line") {
    const auto p = temp_file("syntax.json", "{\n  \"v100\": {\n    oops\n  }\n}\n");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, p + ":3:"));
  }
  SECTION("malformed job key") {
    const auto p = temp_file("badkey.json", R"J({"v100": {"ResNet-18": {"null": 1.0}}})J");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, p));
    CHECK(has(r.err().message, "v100 / ResNet-18"));
  }
  SECTION("missing null entry") {
    const auto p = temp_file("nonull.json", R"J({"v100": {"('A3C', 1)": {}}})J");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, "v100 / ('A3C', 1)"));
    CHECK(has(r.err().message, "null"));
  }
  SECTION("wrong value type") {
    const auto p = temp_file("badval.json", R"J({"v100": {"('A3C', 1)": {"null": "fast"}}})J");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, "v100 / ('A3C', 1) / null"));
    CHECK(has(r.err().message, "'fast'"));
  }
  SECTION("co-location pair of the wrong length") {
    const auto p = temp_file(
        "badpair.json", R"J({"v100": {"('A3C', 1)": {"null": 1.0, "('CycleGAN', 1)": [1.0]}}})J");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, "v100 / ('A3C', 1) / ('CycleGAN', 1)"));
  }
  SECTION("negative throughput") {
    const auto p = temp_file("neg.json", R"J({"k80": {"('A3C', 1)": {"null": -2}}})J");
    auto r = throughput_table::load(p);
    REQUIRE_FALSE(r);
    CHECK(has(r.err().message, "k80 / ('A3C', 1) / null"));
  }
  SECTION("small valid table, unconsolidated stored apart") {
    const auto p = temp_file("ok.json", R"J({"V100": {"('A3C', 1)": {"null": 2.5}},
      "v100_unconsolidated": {"('A3C', 1)": {"null": 2.0}}})J");
    auto r = throughput_table::load(p);
    REQUIRE(r);
    CHECK(*r->isolated("v100", {"A3C", 1}) == 2.5);
    CHECK(*r->isolated("v100", {"A3C", 1}, false) == 2.0);
    CHECK(r->gpu_types() == std::vector<std::string>{"v100"});
  }
}
