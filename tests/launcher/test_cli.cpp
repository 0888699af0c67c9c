// End-to-end tests of the tessera binary: --help everywhere, exit codes, and one message
// naming the file, line and field for each kind of bad input.
#include <catch2/catch.hpp>

#include <string>

#include "tests/support.hpp"

using tessera::test::run_tessera;
using tessera::test::temp_file;

namespace {

const std::string good_line =
    "ResNet-18 (batch size 64)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1"
    "\t1000\t1\t1\t-1.000000\t0\n";

}  // namespace

TEST_CASE("cli: --help on every command", "[cli]") {
  for (const char* c : {"--help", "simulate --help", "compare --help", "trace --help",
                        "trace generate --help", "policies --help"}) {
    INFO(c);
    auto r = run_tessera(c);
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("usage: tessera"));
  }
}

TEST_CASE("cli: policies lists the registry", "[cli]") {
  auto r = run_tessera("policies");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("max_min_fairness_perf"));
  CHECK_THAT(r.out, Catch::Contains("min_total_duration"));
}

TEST_CASE("cli: unknown policy name is refused with the valid names", "[cli]") {
  auto trace = temp_file("ok.trace", good_line);
  auto r = run_tessera("simulate -q --trace " + trace + " --policy las_typo");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("las_typo"));
  CHECK_THAT(r.out, Catch::Contains("max_min_fairness_perf"));
}

TEST_CASE("cli: malformed trace line names file, line and field", "[cli]") {
  auto trace = temp_file("bad.trace", good_line + "ResNet-18 (batch size 64)\tcmd\tdir\t--n\t1"
                                                  "\tmany\t1\t1\t-1\t0\n");
  auto r = run_tessera("simulate -q --trace " + trace);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(trace + ":2"));
  CHECK_THAT(r.out, Catch::Contains("total_steps"));
}

TEST_CASE("cli: missing trace fields name file and line", "[cli]") {
  auto trace = temp_file("short.trace", "ResNet-18 (batch size 64)\tcmd\tdir\n");
  auto r = run_tessera("simulate -q --trace " + trace);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(trace + ":1"));
}

TEST_CASE("cli: unknown job type names file, line and field", "[cli]") {
  auto trace = temp_file("type.trace", "NoSuchNet (batch size 1)\tcmd\tdir\t--n\t1\t10\t1\t1"
                                       "\t-1\t0\n");
  auto r = run_tessera("simulate -q --trace " + trace);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(trace + ":1"));
  CHECK_THAT(r.out, Catch::Contains("NoSuchNet"));
}

TEST_CASE("cli: zero scale factor names the field", "[cli]") {
  auto trace = temp_file("zero.trace", "ResNet-18 (batch size 64)\tcmd\tdir\t--n\t1\t10\t0\t1"
                                       "\t-1\t0\n");
  auto r = run_tessera("simulate -q --trace " + trace);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("scale_factor"));
}

TEST_CASE("cli: TOML syntax error names file and line", "[cli]") {
  auto trace = temp_file("ok2.trace", good_line);
  auto cl = temp_file("bad.toml", "[cluster]\nname = \"x\"\n[[cluster.server]\ngpus = 4\n");
  auto r = run_tessera("simulate -q --trace " + trace + " --cluster " + cl);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(cl + ":3"));
}

TEST_CASE("cli: negative GPU count in a cluster file names the field", "[cli]") {
  auto trace = temp_file("ok3.trace", good_line);
  auto cl = temp_file("neg.toml", "[cluster]\nname = \"x\"\n\n[[cluster.server]]\n"
                                  "gpu_type = \"v100\"\ngpus = -4\n");
  auto r = run_tessera("simulate -q --trace " + trace + " --cluster " + cl);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(cl));
  CHECK_THAT(r.out, Catch::Contains("gpus"));
}

TEST_CASE("cli: bad policy option is refused", "[cli]") {
  auto trace = temp_file("ok4.trace", good_line);
  auto r = run_tessera("simulate -q --trace " + trace + " --policy-arg nonsense=1");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("nonsense"));
}

TEST_CASE("cli: trace generate then simulate round trip", "[cli]") {
  const std::string path = temp_file("gen.trace", "");
  auto g = run_tessera("trace generate --jobs 20 --rate 10 --seed 3 -o " + path);
  REQUIRE(g.code == 0);
  auto s = run_tessera("simulate -q --trace " + path + " --policy max_min_fairness_perf");
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Catch::Contains("20/20"));
}
