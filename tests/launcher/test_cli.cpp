// End-to-end tests of the tessera binary: --help everywhere, exit codes, and one message
// naming the file, line and field for each kind of bad input.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/support.hpp"

using tessera::test::run_tessera;
using tessera::test::temp_file;
using tessera::test::tessera_binary;

namespace {

const std::string good_line =
    "ResNet-18 (batch size 64)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1"
    "\t1000\t1\t1\t-1.000000\t0\n";

}  // namespace

TEST_CASE("cli: --help on every command", "[cli]") {
  for (const char* c : {"--help", "simulate --help", "compare --help", "trace --help",
                        "trace generate --help", "trace import --help", "table --help",
                        "table import --help", "policies --help", "sweep --help", "plot --help"}) {
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
  auto trace = temp_file("bad.trace", good_line +
                                          "ResNet-18 (batch size 64)\tcmd\tdir\t--n\t1"
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
  auto trace = temp_file("type.trace",
                         "NoSuchNet (batch size 1)\tcmd\tdir\t--n\t1\t10\t1\t1"
                         "\t-1\t0\n");
  auto r = run_tessera("simulate -q --trace " + trace);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(trace + ":1"));
  CHECK_THAT(r.out, Catch::Contains("NoSuchNet"));
}

TEST_CASE("cli: zero scale factor names the field", "[cli]") {
  auto trace = temp_file("zero.trace",
                         "ResNet-18 (batch size 64)\tcmd\tdir\t--n\t1\t10\t0\t1"
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
  auto cl = temp_file("neg.toml",
                      "[cluster]\nname = \"x\"\n\n[[cluster.server]]\n"
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

TEST_CASE("cli: trace import helios, then simulate the imported jobs", "[cli][import]") {
  std::string log =
      "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
      "duration,queue\n";
  for (int i = 0; i < 30; ++i)
    log += std::to_string(i) + ",u,vc,n," + std::to_string(1 << (i % 3)) + ",4,1," +
           (i % 10 == 9 ? "FAILED" : "COMPLETED") + ",2020-04-01 00:" + (i < 10 ? "0" : "") +
           std::to_string(i) + ":00,,," + std::to_string(300 + 60 * i) + ",0\n";
  const std::string in = temp_file("cluster_log.csv", log);
  const std::string out = temp_file("imported.trace", "");
  auto r = run_tessera("trace import helios " + in + " -o " + out + " --seed 4");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("read 30 jobs, wrote 27 to " + out + "; dropped: 3 state FAILED"));
  auto s = run_tessera("simulate -q --trace " + out + " --policy max_min_fairness_perf");
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Catch::Contains("27/27"));
  auto bad = run_tessera("trace import alibaba " + in + " -o " + out);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out,
             Catch::Contains("unknown trace format 'alibaba' (known: helios, philly, pai, sia)"));
}

namespace {

/// Runs tessera bounded in memory (1 GB of address space) and time (30 s), so an input that
/// made it buffer or loop without end fails the test instead of the machine.
tessera::test::command_result run_bounded(const std::string& args) {
  return tessera::test::run_shell(tessera::test::memory_bound_prefix() + "timeout 30 " +
                                  tessera_binary() + " " + args);
}

}  // namespace

TEST_CASE("cli: numbers out of bounds and unbounded inputs are refused at once", "[cli][limits]") {
  const auto trace = temp_file("bounds.trace", good_line);
  const auto steps = temp_file("steps.toml",
                               "[[job]]\njob_type = \"ResNet-18 (batch size 64)\""
                               "\ntotal_steps = 1e12\n");
  const auto slow = temp_file("slow.toml",
                              "[cluster]\n[[cluster.server]]\ngpu_type = \"v100\""
                              "\ngpus = 4\nspeed = 1e-300\n");
  const auto big = temp_file("big.trace", "");
  std::filesystem::resize_file(big, 10ULL << 30);  // sparse: no disk space used
  const std::string sim = "simulate -q --trace " + trace + " ";
  struct row {
    std::string args;
    std::string part;
  };
  const row rows[] = {
      {sim + "--round-length nan", "--round-length: expected a number in [1, 86400]"},
      {sim + "--round-length 1e-9", "--round-length: expected a number in [1, 86400]"},
      {sim + "--restart-cost nan", "--restart-cost: expected a number in [0, 86400]"},
      {sim + "--max-hours inf", "--max-hours: expected a number in [0, 1000000]"},
      {sim + "--policy finish_time_fairness_perf --policy-arg tolerance=nan",
       "--policy-arg: field 'tolerance': expected a finite number, got 'nan'"},
      {sim + "--policy hops --policy-arg lambda=1e999", "field 'lambda'"},
      {sim + "--cluster " + slow, slow + ":5: field 'speed'"},
      {sim + "--window 1-99999999999999999999", "--window"},
      {sim + "--copy-efficiency nan", "--copy-efficiency 'nan': expected on, off or"},
      {sim + "--copy-efficiency -74", "--copy-efficiency '-74'"},
      {sim + "--copy-efficiency 74x", "--copy-efficiency '74x'"},
      {"compare -q --trace " + trace + " --policies fifo --parallel 0", "--parallel"},
      {"simulate -q --trace " + steps, steps + ":3: field 'total_steps'"},
      {"simulate -q --trace /dev/zero", "/dev/zero:1: line longer than 65536 bytes"},
      {"simulate -q --trace " + big, big + ": trace is 10737418240 bytes"},
      {"trace generate --jobs 1000000000 --rate 10 -o " + temp_file("never.trace", ""),
       "--jobs: expected a number in [1, 10000000] (jobs), got 1000000000"},
      {"trace generate --jobs 10 --rate nan -o -", "--rate: expected a number in [0, 1000000]"},
  };
  for (const auto& r : rows) {
    INFO(r.args);
    const auto res = run_bounded(r.args);
    CHECK(res.code == 2);
    CHECK_THAT(res.out, Catch::Contains(r.part));
    CHECK(res.seconds < 10);
  }
}

TEST_CASE("cli: --copy-efficiency charges forked jobs only", "[cli][copy_eff]") {
  const std::string trace = temp_file("copies.trace", "");
  REQUIRE(run_bounded("trace generate --jobs 40 --rate 4 --multi-gpu --seed 3 -o " + trace).code ==
          0);
  auto table = [&](const std::string& policy, const std::string& eff) {
    auto r = run_bounded("simulate -q --trace " + trace + " --policy " + policy +
                         " --copy-efficiency " + eff);
    INFO(r.out);
    REQUIRE(r.code == 0);
    return r.out;
  };
  // HadarE forks: its figures change with the model, and a finite noise scale differs
  // from both the default and the upper bound.
  CHECK(table("hadare", "on") != table("hadare", "off"));
  CHECK(table("hadare", "on") == table("hadare", "74"));
  CHECK(table("hadare", "1e6") != table("hadare", "on"));
  // Hadar never forks: identical either way.
  CHECK(table("hadar", "on") == table("hadar", "off"));
}

TEST_CASE("cli: trace generate streams, and leaves no partial file when it fails",
          "[cli][limits]") {
  const std::string path = temp_file("stream.trace", "");
  auto file = run_bounded("trace generate --jobs 2000 --rate 30 --multi-gpu --seed 5 -o " + path);
  REQUIRE(file.code == 0);
  auto out = run_bounded(
      "trace generate --jobs 2000 --rate 30 --multi-gpu --seed 5 -o - "
      "2>/dev/null");
  REQUIRE(out.code == 0);
  CHECK(out.out == tessera::test::file_contents(path));
  // One job per 1000 hours: about the 278th would arrive after 1e9 s, the latest a trace holds.
  const std::string late = temp_file("late.trace", "");
  auto r = run_bounded("trace generate --jobs 1000 --rate 0.001 -o " + late);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("would arrive after 1000000000 s"));
  CHECK_FALSE(std::filesystem::exists(late));
}
