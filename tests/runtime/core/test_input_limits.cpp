// Tests of the input bounds (runtime/core/input_limits.hpp): every number a reader takes is refused
// outside its range, NaN and infinities included, with the file, line and field named; lines
// and files have bounded sizes. Table-driven: one row per input that was once unbounded
// (docs/benchmarks/reliability.md, "Inputs bounded").
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/cluster_config.hpp"
#include "runtime/core/input_limits.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace.hpp"
#include "runtime/workload/trace_gen.hpp"
#include "runtime/node/train/trainable.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// A valid Gavel trace line with field `field` (0-based) replaced by `value`.
std::string trace_line(std::size_t field = 99, const std::string& value = "") {
  std::vector<std::string> f = {"ResNet-18 (batch size 64)",
                                "python3 main.py",
                                "dir",
                                "--num_steps",
                                "1",
                                "1000",
                                "1",
                                "1",
                                "-1.000000",
                                "0"};
  if (field < f.size()) f[field] = value;
  std::string line;
  for (const auto& x : f) line += (line.empty() ? "" : "\t") + x;
  return line + "\n";
}

/// A sparse file of `bytes` bytes (no disk space used); returns its path.
std::string sparse_file(const std::string& name, std::uintmax_t bytes) {
  const auto p = temp_file(name, "");
  std::filesystem::resize_file(p, bytes);
  return p;
}

/// The error message of a failed read (the test fails when the read succeeded).
template <class T>
std::string failure(const result<T>& r) {
  REQUIRE_FALSE(r);
  return r.err().message;
}

const std::vector<std::string> kinds = {"mlp", "softmax_regression"};

}  // namespace

TEST_CASE("limits: trace numbers out of bounds name file, line and field", "[io][limits]") {
  struct row {
    std::size_t field;
    const char* name;
    const char* value;
  };
  const row rows[] = {
      {5, "total_steps", "1e19"},
      {5, "total_steps", "1e12"},
      {5, "total_steps", "nan"},
      {5, "total_steps", "inf"},
      {6, "scale_factor", "2097152"},
      {7, "priority_weight", "1e-300"},
      {7, "priority_weight", "1e300"},
      {7, "priority_weight", "nan"},
      {8, "slo", "1e300"},
      {8, "slo", "-inf"},
      {9, "arrival_time", "1e300"},
      {9, "arrival_time", "inf"},
  };
  for (const auto& r : rows) {
    INFO(r.name << " = " << r.value);
    const auto p = temp_file("bounds.trace", trace_line() + trace_line(r.field, r.value));
    const auto msg = input_error_message(read_trace(p), p, 2, r.name);
    CHECK(has(msg, std::string("got '") + r.value + "'"));
  }
}

TEST_CASE("limits: trace numbers at their bounds are accepted", "[io][limits]") {
  struct row {
    std::size_t field;
    const char* value;
  };
  const row rows[] = {{5, "1e11"}, {6, "1048576"}, {7, "0.001"},
                      {7, "1000"}, {8, "1e9"},     {9, "1e9"}};
  for (const auto& r : rows) {
    INFO("field " << r.field << " = " << r.value);
    const auto p = temp_file("edge.trace", trace_line(r.field, r.value));
    auto t = read_trace(p);
    INFO((t ? "" : t.err().message));
    CHECK(t);
  }
}

TEST_CASE("limits: overlong trace lines and oversized traces fail fast", "[io][limits]") {
  // A line of exactly the limit reads (the command field padded); one byte more does not.
  const std::size_t pad = limits::max_line_bytes - trace_line().size() + 1;
  const auto longest = temp_file("longest.trace", trace_line(1, std::string(pad + 15, 'x')));
  CHECK(read_trace(longest));
  const auto over =
      temp_file("over.trace", trace_line() + trace_line(1, std::string(pad + 16, 'x')));
  CHECK(has(failure(read_trace(over)), over + ":2: line longer than 65536 bytes"));
  // No line break at all: the reader stops at the limit instead of buffering the file.
  const auto blob = temp_file("blob.trace", std::string(200000, 'a'));
  CHECK(has(failure(read_trace(blob)), blob + ":1: line longer than"));
  // A regular file over 2 GiB is refused by its size, before reading.
  const auto big = sparse_file("big.trace", (2ULL << 30) + 1);
  CHECK(has(failure(read_trace(big)), big + ": trace is 2147483649 bytes; at most 2147483648"));
  const auto dir = std::filesystem::temp_directory_path().string();
  CHECK(has(failure(read_trace(dir)), "is a directory"));
}

TEST_CASE("limits: job-set, run job-set and cluster numbers out of bounds", "[io][limits]") {
  enum class reader { jobs, run_jobs, cluster };
  struct row {
    reader with;
    std::string text;
    int line;
    const char* field;
  };
  const std::string job = "[[job]]\njob_type = \"t\"\n";
  const std::string run = "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n";
  const std::string server = "[cluster]\n[[cluster.server]]\ngpu_type = \"v100\"\n";
  const row rows[] = {
      {reader::jobs, job + "total_steps = 1e19\n", 3, "total_steps"},
      {reader::jobs, job + "total_steps = 1e12\n", 3, "total_steps"},
      {reader::jobs, job + "total_steps = nan\n", 3, "total_steps"},
      {reader::jobs, job + "total_steps = 5\narrival = 1e300\n", 4, "arrival"},
      {reader::jobs, job + "total_steps = 5\npriority_weight = 1e-300\n", 4, "priority_weight"},
      {reader::jobs, job + "total_steps = 5\nslo = 1e300\n", 4, "slo"},
      {reader::jobs, job + "total_steps = 5\nscale_factor = 2097152\n", 4, "scale_factor"},
      {reader::jobs, job + "total_steps = 5\nid = 1152921504606846976\n", 4, "id"},
      {reader::jobs, job + "total_steps = 5\nacceptable_gpus = [2097152]\n", 4, "acceptable_gpus"},
      {reader::run_jobs, "[[job]]\nkind = \"mlp\"\ntotal_steps = 1e19\n", 3, "total_steps"},
      {reader::run_jobs, run + "step_time = 1e-300\n", 4, "step_time"},
      {reader::run_jobs, run + "target_loss = 1e300\n", 4, "target_loss"},
      {reader::run_jobs, run + "[job.config]\nlr = nan\n", 5, "config.lr"},
      {reader::run_jobs, run + "[job.config]\nlr = -inf\n", 5, "config.lr"},
      {reader::cluster, server + "gpus = 1\nspeed = 1e-300\n", 5, "speed"},
      {reader::cluster, server + "gpus = 1\nspeed = 1e300\n", 5, "speed"},
      {reader::cluster, server + "gpus = 1\nspeed = nan\n", 5, "speed"},
      {reader::cluster, server + "gpus = 2097152\n", 4, "gpus"},
      {reader::cluster, server + "gpus = 1\ncount = 2097152\n", 5, "count"},
  };
  for (const auto& r : rows) {
    INFO(r.text);
    const auto p = temp_file("bounds.toml", r.text);
    switch (r.with) {
      case reader::jobs:
        input_error_message(load_jobs(p), p, r.line, r.field);
        break;
      case reader::run_jobs:
        input_error_message(load_run_jobs(p, &kinds), p, r.line, r.field);
        break;
      case reader::cluster:
        input_error_message(load_cluster(p), p, r.line, r.field);
        break;
    }
  }
}

TEST_CASE("limits: TOML files have bounded lines and size", "[io][limits]") {
  const std::string ok = "[cluster]\n[[cluster.server]]\ngpu_type = \"v100\"\ngpus = 1\n";
  const auto longest =
      temp_file("longest.toml", ok + "# " + std::string(limits::max_line_bytes - 2, 'x') + "\n");
  CHECK(load_cluster(longest));
  const auto over =
      temp_file("over.toml", ok + "# " + std::string(limits::max_line_bytes - 1, 'x') + "\n");
  CHECK(has(failure(load_cluster(over)), over + ":5: line longer than 65536 bytes"));
  const auto big = sparse_file("big.toml", (16ULL << 20) + 1);
  CHECK(has(failure(load_cluster(big)), big + ": TOML file is 16777217 bytes; at most"));
  CHECK(has(failure(load_jobs(big)), big + ": TOML file is 16777217 bytes"));
}

TEST_CASE("limits: throughput table values and size are bounded", "[io][limits]") {
  auto table = [](const std::string& value) {
    return "{\"v100\": {\"('a', 1)\": {\"null\": " + value + "}}}";
  };
  for (const char* bad : {"1e300", "1e-300", "-1", "100001"}) {
    INFO(bad);
    const auto p = temp_file("t.json", table(bad));
    const auto msg = failure(throughput_table::load(p));
    CHECK(has(msg, p + ": field 'v100 / ('a', 1) / null': expected 0 or a number of steps/s"));
  }
  for (const char* good : {"0", "1e-6", "1e5"}) {
    INFO(good);
    CHECK(throughput_table::load(temp_file("t.json", table(good))));
  }
  const auto big = sparse_file("big.json", (64ULL << 20) + 1);
  CHECK(has(failure(throughput_table::load(big)), big + ": throughput table is 67108865 bytes"));
}

TEST_CASE("limits: job templates have bounded lines", "[io][limits]") {
  const auto over = temp_file(
      "over.tsv", "t\tcmd\tdir\t--n\t1\n" + std::string(limits::max_line_bytes + 1, 'x') + "\n");
  CHECK(has(failure(read_job_templates(over)), over + ":2: line longer than 65536 bytes"));
  const auto big = sparse_file("big.tsv", (1ULL << 20) + 1);
  CHECK(has(failure(read_job_templates(big)), "job templates is 1048577 bytes"));
}

TEST_CASE("limits: a run's job set is checked job by job before anything starts",
          "[io][limits][job_file]") {
  const auto registry = train::builtin_trainables();
  const auto check = [&registry](const run_job& j) {
    return registry.check(j.kind, j.seed, j.config);
  };
  // The second job's learning rate is out of range; the first is fine.
  const auto mixed = temp_file("mixed.toml",
                               "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n\n"
                               "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n[job.config]\nlr = -1\n");
  const auto msg = input_error_message(load_run_jobs(mixed, &kinds, check), mixed, 8, "config");
  CHECK(has(msg, "mlp config: field 'lr': expected a number in (0, 1000], got -1"));
  // A kind with no [job.config] is reported at its [[job]] line.
  const auto no_cfg = temp_file("nocfg.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  const auto refuse_all = [](const run_job&) -> status {
    return error{error_kind::invalid_input, "refused"};
  };
  input_error_message(load_run_jobs(no_cfg, &kinds, refuse_all), no_cfg, 1, "kind");
  // A model too large for the node is caught without building it.
  const auto huge = temp_file("huge.toml",
                              "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n"
                              "[job.config]\ndim = 1048576\ntrain_size = 16\n"
                              "held_out_size = 16\nhidden = 65536\n");
  CHECK(has(input_error_message(load_run_jobs(huge, &kinds, check), huge, 4, "config"),
            "parameters (at most 1e8)"));
  CHECK(load_run_jobs(config_file("run_example_jobs.toml"), &kinds, check));
}

TEST_CASE("limits: a kind without a cheap check is checked by building it", "[io][limits]") {
  train::trainable_registry r;
  REQUIRE(r.add("picky", "",
                [](std::uint64_t,
                   const train::trainable_config& c) -> result<std::unique_ptr<train::trainable>> {
                  if (c.count("bad")) return error{error_kind::invalid_input, "picky: field 'bad'"};
                  return train::builtin_trainables().make("mlp", 1);
                }));
  CHECK(r.check("picky", 1, {}));
  CHECK_FALSE(r.check("picky", 1, {{"bad", 1}}));
  CHECK(r.check("nothing", 1, {}).err().kind == error_kind::not_found);
  const auto builtin = train::builtin_trainables();
  CHECK(builtin.check("mlp", 1, {{"hidden", 16}, {"lr", 0.05}}));
  CHECK(has(builtin.check("softmax_regression", 1, {{"hidden", 16}}).err().message, "unknown key"));
}

TEST_CASE("limits: the simulator stops at its round limit", "[sim][limits]") {
  // One job that would need ~1e10 rounds: the simulation ends after max_rounds, incomplete.
  auto cl = make_cluster({{0, "s", "slow", 0, 1, limits::min_speed}});
  throughput_table t;
  t.set_isolated("slow", {"alpha", 1}, limits::min_steps_per_second);
  const std::vector<job> jobs = {make_job(0, "alpha", 1, limits::max_total_steps)};
  fixed_plan pol({assignment{0, 0, 0, {{0, 1}}}});
  sim_config cfg;
  cfg.max_rounds = 50;
  auto r = simulate(cl, t, jobs, pol, cfg);
  REQUIRE(r);
  CHECK_FALSE(r->complete);
  CHECK(r->rounds.size() == 50);
  CHECK(default_max_rounds == 10'000'000);
  cfg.round_length = std::nan("");
  CHECK_FALSE(simulate(cl, t, jobs, pol, cfg));
}
