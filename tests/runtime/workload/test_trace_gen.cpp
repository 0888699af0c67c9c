// Tests of the job templates and Gavel's synthetic trace generator
// (runtime/workload/trace_gen.cpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "runtime/core/input_limits.hpp"
#include "runtime/workload/trace.hpp"
#include "runtime/workload/trace_gen.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::temp_file;

namespace {

const throughput_table& table() {
  static const throughput_table t = *throughput_table::load_bundled();
  return t;
}

const std::vector<job_template>& templates() {
  static const std::vector<job_template> t = *bundled_job_templates();
  return t;
}

std::vector<job> gen(trace_gen_config cfg) {
  auto r = generate_trace(cfg, templates(), table());
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("bundled job templates: Gavel's 26 job types, matching the bundled traces", "[io]") {
  REQUIRE(bundled_job_templates());
  const auto& t = templates();
  REQUIRE(t.size() == 26);
  std::map<std::string, job_template> by_type;
  for (const auto& jt : t) {
    by_type[jt.job_type] = jt;
    CHECK(table().isolated("v100", {jt.job_type, 1}));
    CHECK_FALSE(jt.command.empty());
  }
  CHECK(by_type.size() == 26);
  CHECK_FALSE(by_type.at("A3C").needs_data_dir);
  CHECK(by_type.at("CycleGAN").num_steps_arg == "--n_steps");
  // Every line of every bundled trace has a template with the same fields (the one
  // exception in Gavel's data: a ResNet-50 (batch size 64) line with "-j 2" instead of "-j 8").
  for (const char* name : {"artifact_evaluation", "max_min_fairness", "medium_test",
                           "minimize_makespan", "small_test"}) {
    auto jobs = read_trace(std::string(TESSERA_DATA_DIR) + "/gavel/traces/" + name + ".trace");
    REQUIRE(jobs);
    for (const auto& j : *jobs) {
      REQUIRE(by_type.count(j.job_type));
      const auto& jt = by_type.at(j.job_type);
      CHECK(jt.working_dir == j.working_dir);
      CHECK(jt.num_steps_arg == j.num_steps_arg);
      CHECK(jt.needs_data_dir == j.needs_data_dir);
      if (j.command != jt.command)
        CHECK(j.command.find("-j 2 -a resnet50 -b 64") != std::string::npos);
    }
  }
}

TEST_CASE("job template errors name file, line and field", "[io]") {
  const auto p1 = temp_file("tpl_fields.tsv", "# comment\nA3C\tcmd\trl\t--max-steps\n");
  auto r1 = read_job_templates(p1);
  REQUIRE_FALSE(r1);
  CHECK(r1.err().message.rfind(p1 + ":2: field 'needs_data_dir': ", 0) == 0);
  const auto p2 = temp_file("tpl_dd.tsv", "A3C\tcmd\trl\t--max-steps\tno\n");
  auto r2 = read_job_templates(p2);
  REQUIRE_FALSE(r2);
  CHECK(r2.err().message.rfind(p2 + ":1: field 'needs_data_dir': ", 0) == 0);
  const auto p3 = temp_file("tpl_dup.tsv", "A3C\tcmd\trl\t-n\t0\nA3C\tcmd\trl\t-n\t0\n");
  auto r3 = read_job_templates(p3);
  REQUIRE_FALSE(r3);
  CHECK(r3.err().message.rfind(p3 + ":2: field 'job_type': duplicate", 0) == 0);
}

TEST_CASE("generator is deterministic for a seed", "[io]") {
  trace_gen_config cfg;
  cfg.num_jobs = 500;
  cfg.rate_per_hour = 5.6;
  cfg.multi_gpu = true;
  cfg.seed = 42;
  const auto a = gen(cfg);
  const auto b = gen(cfg);
  std::stringstream sa, sb;
  write_trace(sa, a);
  write_trace(sb, b);
  CHECK(sa.str() == sb.str());
  cfg.seed = 43;
  std::stringstream sc;
  write_trace(sc, gen(cfg));
  CHECK(sa.str() != sc.str());
  // A generated trace round-trips through the file format exactly.
  auto back = parse_trace(sa, "generated", &table());
  REQUIRE(back);
  REQUIRE(back->size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK((*back)[i].arrival == a[i].arrival);
    CHECK((*back)[i].total_steps == a[i].total_steps);
    CHECK((*back)[i].scale_factor == a[i].scale_factor);
  }
}

TEST_CASE("generator: Poisson arrivals at the given rate", "[io]") {
  trace_gen_config cfg;
  cfg.num_jobs = 20000;
  cfg.rate_per_hour = 5.6;
  cfg.seed = 7;
  const auto jobs = gen(cfg);
  REQUIRE(jobs.size() == 20000);
  CHECK(jobs.front().arrival == 0.0);  // first job at time 0, as Gavel
  for (std::size_t i = 1; i < jobs.size(); ++i) REQUIRE(jobs[i].arrival >= jobs[i - 1].arrival);
  const double mean_gap = jobs.back().arrival / (jobs.size() - 1);
  // Expected 3600 / 5.6 = 642.9 s; the standard error of the mean is ~0.7% here.
  CHECK(mean_gap == Approx(3600.0 / 5.6).epsilon(0.03));
  // Exponential gaps: about 1 - 1/e of them are shorter than the mean.
  std::size_t shorter = 0;
  for (std::size_t i = 1; i < jobs.size(); ++i)
    shorter += (jobs[i].arrival - jobs[i - 1].arrival) < 3600.0 / 5.6;
  CHECK(static_cast<double>(shorter) / (jobs.size() - 1) ==
        Approx(1 - std::exp(-1.0)).margin(0.02));

  cfg.rate_per_hour = 0;
  cfg.num_jobs = 50;
  for (const auto& j : gen(cfg)) CHECK(j.arrival == 0.0);
}

TEST_CASE("generator: durations, steps and single-GPU defaults", "[io]") {
  trace_gen_config cfg;
  cfg.num_jobs = 10000;
  cfg.rate_per_hour = 10;
  cfg.seed = 3;
  const auto jobs = gen(cfg);
  std::size_t long_jobs = 0;
  std::set<std::string> types;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    CHECK(j.id == static_cast<job_id>(i));
    REQUIRE(j.scale_factor == 1);
    CHECK(j.priority_weight == 1);
    CHECK(j.slo == -1);
    REQUIRE(j.total_steps >= 1);
    REQUIRE(j.total_steps == std::round(j.total_steps));
    types.insert(j.job_type);
    const double tput = *table().isolated("v100", {j.job_type, 1});
    const double duration = j.total_steps / tput;
    const double slack = 1.0 / tput;  // rounding to whole steps
    REQUIRE(duration >= 60 * std::pow(10, 1.5) - slack);
    REQUIRE(duration <= 60 * std::pow(10, 4.0) + slack);
    long_jobs += duration > 60 * std::pow(10, 3.0) + slack;
  }
  CHECK(types.size() == 26);
  CHECK(static_cast<double>(long_jobs) / jobs.size() == Approx(0.2).margin(0.02));
}

TEST_CASE("generator: multi-GPU scale factors follow .70/.10/.15/.05, known to the table", "[io]") {
  trace_gen_config cfg;
  cfg.num_jobs = 20000;
  cfg.rate_per_hour = 5.6;
  cfg.multi_gpu = true;
  cfg.seed = 11;
  const auto jobs = gen(cfg);
  std::map<int, double> count;
  double n_multi_types = 0;
  for (const auto& j : jobs) {
    REQUIRE(table().knows({j.job_type, j.scale_factor}));
    REQUIRE(*table().isolated("v100", {j.job_type, j.scale_factor}) > 0);
    if (!table().knows({j.job_type, 2})) {
      REQUIRE(j.scale_factor == 1);  // A3C, CycleGAN, Recommendation: scale 1 only
      continue;
    }
    count[j.scale_factor] += 1;
    n_multi_types += 1;
  }
  CHECK(count[1] / n_multi_types == Approx(0.70).margin(0.02));
  CHECK(count[2] / n_multi_types == Approx(0.10).margin(0.015));
  CHECK(count[4] / n_multi_types == Approx(0.15).margin(0.015));
  CHECK(count[8] / n_multi_types == Approx(0.05).margin(0.01));
}

TEST_CASE("generator errors", "[io]") {
  trace_gen_config cfg;
  cfg.num_jobs = 0;
  CHECK_FALSE(generate_trace(cfg, templates(), table()));
  cfg.num_jobs = 10;
  CHECK_FALSE(generate_trace(cfg, {}, table()));
  auto tpl = templates();
  tpl.push_back(job_template{"GPT-3", "cmd", "dir", "-n", true});
  auto r = generate_trace(cfg, tpl, table());
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::not_found);
  CHECK(r.err().message.find("'GPT-3'") != std::string::npos);
  cfg.reference_type = "a100";
  CHECK_FALSE(generate_trace(cfg, templates(), table()));
}

TEST_CASE("generator: streams the jobs one by one, the same as the vector it returns",
          "[io][limits]") {
  trace_gen_config cfg;
  cfg.num_jobs = 300;
  cfg.rate_per_hour = 20;
  cfg.multi_gpu = true;
  cfg.seed = 11;
  std::ostringstream streamed;
  std::int64_t n = 0;
  auto st = generate_trace(cfg, templates(), table(), [&](const job& j) -> status {
    CHECK(j.id == n++);
    write_trace_job(streamed, j);
    return {};
  });
  REQUIRE(st);
  CHECK(n == 300);
  std::ostringstream whole;
  write_trace(whole, gen(cfg));
  CHECK(streamed.str() == whole.str());
  // The sink's error stops the generator at once.
  n = 0;
  auto stopped = generate_trace(cfg, templates(), table(), [&](const job&) -> status {
    return ++n == 3 ? status(error{error_kind::io, "disk full"}) : status();
  });
  REQUIRE_FALSE(stopped);
  CHECK(stopped.err().message == "disk full");
  CHECK(n == 3);
}

TEST_CASE("generator: job count, rate and arrivals are bounded", "[io][limits]") {
  struct row {
    long long jobs;
    double rate;
    const char* part;
  };
  const row rows[] = {
      {limits::max_trace_jobs + 1, 1, "num_jobs must be in [1, 10000000]"},
      {0, 1, "num_jobs must be in [1, 10000000]"},
      {10, std::nan(""), "rate_per_hour must be in [0, 1000000]"},
      {10, -1, "rate_per_hour must be in [0, 1000000]"},
      {10, 2e6, "rate_per_hour must be in [0, 1000000]"},
      // 1 job per 1000 hours: job ~278 would arrive after 1e9 s.
      {1000, 1e-3, "would arrive after 1000000000 s"},
  };
  for (const auto& r : rows) {
    INFO(r.jobs << " jobs at " << r.rate << " jobs/h");
    trace_gen_config cfg;
    cfg.num_jobs = static_cast<int>(r.jobs);
    cfg.rate_per_hour = r.rate;
    auto st = generate_trace(cfg, templates(), table());
    REQUIRE_FALSE(st);
    CHECK(st.err().kind == error_kind::invalid_input);
    CHECK_THAT(st.err().message, Catch::Contains(r.part));
  }
}
