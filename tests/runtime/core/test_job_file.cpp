// Tests of job-set files (runtime/core/job_file.cpp): a simulation's (load_jobs) and a real run's
// (load_run_jobs).
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/input_limits.hpp"
#include "runtime/core/job_file.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const throughput_table& table() {
  static const throughput_table t = *throughput_table::load_bundled();
  return t;
}

/// The job-set file fails with a message starting "<path>:<line>: field '<field>': ".
std::string jobs_error(const std::string& name, const std::string& text, int line,
                       const std::string& field, const throughput_table* t = nullptr) {
  const auto p = temp_file(name + ".toml", text);
  return input_error_message(load_jobs(p, t), p, line, field);
}

const std::vector<std::string> kinds = {"mlp", "softmax_regression"};

}  // namespace

TEST_CASE("config/example_jobs.toml loads and every job is in the table", "[io][job_file]") {
  auto r = load_jobs(config_file("example_jobs.toml"), &table());
  REQUIRE(r);
  REQUIRE(r->size() == 6);
  CHECK((*r)[1].job_type == "Transformer (batch size 128)");
  CHECK((*r)[1].scale_factor == 2);
  CHECK((*r)[2].priority_weight == 2.0);
  CHECK((*r)[2].arrival == 600.0);
  CHECK((*r)[5].id == 5);
  CHECK((*r)[0].slo == -1);
}

TEST_CASE("job-set file errors", "[io][job_file]") {
  SECTION("missing total_steps names the [[job]] line") {
    jobs_error("job_missing", R"([[job]]
job_type = "A3C"
total_steps = 10

[[job]]
job_type = "A3C"
)",
               5, "total_steps");
  }
  SECTION("unknown job type at a scale") {
    const auto msg = jobs_error("job_unknown", R"([[job]]
job_type = "A3C"
scale_factor = 4
total_steps = 10
)",
                                2, "job_type", &table());
    CHECK(has(msg, "unknown job type 'A3C' at scale 4"));
  }
  SECTION("scale factor zero") {
    jobs_error("job_scale", "[[job]]\njob_type = \"A3C\"\nscale_factor = 0\ntotal_steps = 1\n", 3,
               "scale_factor");
  }
  SECTION("negative arrival") {
    jobs_error("job_arrival", "[[job]]\njob_type = \"A3C\"\ntotal_steps = 1\narrival = -1\n", 4,
               "arrival");
  }
  SECTION("unknown key") {
    jobs_error("job_key", "[[job]]\njob_type = \"A3C\"\ntotal_steps = 1\nsteps = 4\n", 4, "steps");
  }
  SECTION("duplicate id") {
    const auto msg = jobs_error("job_id", R"([[job]]
job_type = "A3C"
total_steps = 1
id = 1

[[job]]
job_type = "A3C"
total_steps = 1
)",
                                6, "id");
    CHECK(has(msg, "line 4"));
  }
  SECTION("job is a plain table") {
    jobs_error("job_table", "[job]\njob_type = \"A3C\"\ntotal_steps = 1\n", 1, "job");
  }
}

TEST_CASE("a run's job set carries kind, seed, step time and config", "[job_file][run]") {
  const auto p = temp_file("ok.toml",
                           "[[job]]\nkind = \"mlp\"\ntotal_steps = 50\nseed = 9\n"
                           "step_time = 0.01\ntarget_loss = 0.3\nmerge = \"weighted\"\n"
                           "[job.config]\nhidden = 16\nlr = 0.05\n\n"
                           "[[job]]\nkind = \"softmax_regression\"\ntotal_steps = 20\n"
                           "arrival = 2.5\nid = 7\n");
  auto r = load_run_jobs(p, &kinds);
  INFO((r ? "" : r.err().message));
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  const auto& a = (*r)[0];
  CHECK(a.kind == "mlp");
  CHECK(a.spec.job_type == "mlp");
  CHECK(a.spec.id == 0);
  CHECK(a.spec.total_steps == 50);
  CHECK(a.seed == 9);
  CHECK(a.step_time == 0.01);
  CHECK(a.config == std::map<std::string, double>{{"hidden", 16}, {"lr", 0.05}});
  CHECK(a.target_loss == 0.3);
  CHECK(a.merge == train::fork_merge_rule::weighted);
  const auto& b = (*r)[1];
  CHECK(b.spec.id == 7);
  CHECK(b.seed == 8);  // id + 1
  CHECK(b.step_time == 0.05);
  CHECK(b.spec.arrival == 2.5);
  CHECK(b.config.empty());
  CHECK(b.target_loss == 0);                       // run to total_steps
  CHECK(b.merge == train::fork_merge_rule::mean);  // the default rule
}

TEST_CASE("run job-set errors name file, line and field", "[job_file][run]") {
  auto expect = [](const std::string& name, const std::string& text, int line,
                   const std::string& field, const std::string& part) {
    const auto p = temp_file(name + ".toml", text);
    CHECK(has(input_error_message(load_run_jobs(p, &kinds), p, line, field), part));
  };
  expect("nokind", "[[job]]\ntotal_steps = 5\n", 1, "kind", "missing");
  expect("badkind", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n", 2, "kind",
         "unknown job kind 'resnet' (known: mlp, softmax_regression, program)");
  expect("frac", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5.5\n", 3, "total_steps", "whole number");
  expect("cfg", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n[job.config]\nlr = \"fast\"\n", 5,
         "config.lr", "expected a number");
  expect("st", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\nstep_time = 0\n", 4, "step_time",
         "positive");
  expect("merge", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\nmerge = \"sum\"\n", 4, "merge",
         "unknown merge rule 'sum' (known: mean, weighted)");
  expect("target", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\ntarget_loss = -1\n", 4, "target_loss",
         "positive");
}

TEST_CASE("a simulation's job set still rejects run keys", "[job_file][run]") {
  const auto p =
      temp_file("sim.toml", "[[job]]\njob_type = \"x\"\nkind = \"mlp\"\ntotal_steps = 5\n");
  auto r = load_jobs(p);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("field 'kind': unknown key") != std::string::npos);
}

TEST_CASE("automatic job ids stay within the id bound, wrapping to the smallest free id",
          "[job_file][ids]") {
  // Before: a user's id of 2^53 made the next automatic id 2^53 + 1, which no reader takes back.
  const std::int64_t last = limits::max_job_id;
  std::set<std::int64_t> taken{0, 1, 3, last};
  auto is_taken = [&](std::int64_t id) { return taken.count(id) > 0; };
  CHECK(free_job_id(0, is_taken) == 2);
  CHECK(free_job_id(4, is_taken) == 4);
  CHECK(free_job_id(last, is_taken) == 2);      // past the bound: from 0
  CHECK(free_job_id(last + 1, is_taken) == 2);  // max(id) + 1 of a user's largest id
  CHECK(free_job_id(last - 1, is_taken) == last - 1);
  CHECK(free_job_id(-5, is_taken) == 2);
  // Property: whatever is taken, the id given is free and in range.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    taken.clear();
    for (int k = 0; k < 20; ++k) taken.insert(static_cast<std::int64_t>(rng() % 24));
    const std::int64_t from = trial % 2 ? static_cast<std::int64_t>(rng() % 30) : last + trial;
    const auto id = free_job_id(from, is_taken);
    REQUIRE(id >= 0);
    CHECK(id <= last);
    CHECK_FALSE(is_taken(id));
  }
}
