// Tests of a run's job-set files (load_run_jobs in runtime/cluster_config.cpp) and of the
// round-loop pieces shared by the simulator and the actor runtime (runtime/snapshot_builder).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/cluster_config.hpp"
#include "runtime/snapshot_builder.hpp"

using namespace tessera;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("tessera_run_" + name + ".toml");
  std::ofstream(p) << text;
  return p.string();
}

const std::vector<std::string> kinds = {"mlp", "softmax_regression"};

}  // namespace

TEST_CASE("a run's job set carries kind, seed, step time and config", "[cluster_config][run]") {
  const auto p = write_file("ok",
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
  CHECK(b.target_loss == 0);                          // run to total_steps
  CHECK(b.merge == train::fork_merge_rule::mean);     // the default rule
}

TEST_CASE("run job-set errors name file, line and field", "[cluster_config][run]") {
  auto expect = [](const std::string& name, const std::string& text, int line,
                   const std::string& field, const std::string& part) {
    const auto p = write_file(name, text);
    auto r = load_run_jobs(p, &kinds);
    REQUIRE_FALSE(r);
    const auto& msg = r.err().message;
    INFO(msg);
    CHECK(r.err().kind == error_kind::invalid_input);
    CHECK(msg.rfind(p + ":" + std::to_string(line) + ": field '" + field + "': ", 0) == 0);
    CHECK(msg.find(part) != std::string::npos);
  };
  expect("nokind", "[[job]]\ntotal_steps = 5\n", 1, "kind", "missing");
  expect("badkind", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n", 2, "kind",
         "unknown job kind 'resnet' (known: mlp, softmax_regression)");
  expect("frac", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5.5\n", 3, "total_steps",
         "whole number");
  expect("cfg", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n[job.config]\nlr = \"fast\"\n", 5,
         "config.lr", "expected a number");
  expect("st", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\nstep_time = 0\n", 4, "step_time",
         "positive");
  expect("merge", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\nmerge = \"sum\"\n", 4, "merge",
         "unknown merge rule 'sum' (known: mean, weighted)");
  expect("target", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\ntarget_loss = -1\n", 4,
         "target_loss", "positive");
}

TEST_CASE("a simulation's job set still rejects run keys", "[cluster_config][run]") {
  const auto p = write_file("sim", "[[job]]\njob_type = \"x\"\nkind = \"mlp\"\ntotal_steps = 5\n");
  auto r = load_jobs(p);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find("field 'kind': unknown key") != std::string::npos);
}

TEST_CASE("validate_plan holds every executor's plans to the same rules", "[snapshot]") {
  server a;
  a.name = "a";
  a.gpu_type = "v100";
  a.gpus = 2;
  server b = a;
  b.name = "b";
  const cluster cl = make_cluster({a, b});
  round_plan p;
  p.assignments.push_back(assignment{1, 0, 0, {{0, 2}}, 0, -1});
  p.assignments.push_back(assignment{2, 0, 0, {{1, 1}}, 0, -1});
  CHECK(validate_plan(cl, p, "pol"));
  auto twice = p;
  twice.assignments.push_back(assignment{1, 0, 0, {{1, 1}}, 0, -1});
  auto e = validate_plan(cl, twice, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol placed job 1 twice");
  auto over = p;
  over.assignments.push_back(assignment{3, 0, 0, {{0, 1}}, 0, -1});
  e = validate_plan(cl, over, "pol");
  REQUIRE_FALSE(e);
  CHECK(e.err().message == "pol over-filled server a");
  auto invalid = p;
  invalid.assignments.push_back(assignment{4, 0, 0, {{5, 1}}, 0, -1});
  CHECK_FALSE(validate_plan(cl, invalid, "pol"));
}

TEST_CASE("build_snapshot makes the policy's view of the active jobs", "[snapshot]") {
  server a;
  a.gpu_type = "v100";
  a.gpus = 1;
  const cluster cl = make_cluster({a});
  job j;
  j.id = 3;
  j.total_steps = 100;
  std::vector<job_accounting> acc = {job_accounting{&j, 40, 12, 24, {2.5}, 0}};
  round_plan last;
  auto s = build_snapshot(10, 5, cl, acc, &last, 7);
  CHECK(s.now == 10);
  CHECK(s.round_length == 5);
  CHECK(s.cl == &cl);
  CHECK(s.last_plan == &last);
  CHECK(s.job_set_version == 7);
  REQUIRE(s.jobs.size() == 1);
  CHECK(s.jobs[0].spec == &j);
  CHECK(s.jobs[0].remaining_steps == 60);
  CHECK(s.jobs[0].run_time == 12);
  CHECK(s.jobs[0].attained_service == 24);
  CHECK(s.jobs[0].throughput == std::vector<double>{2.5});
  CHECK(s.jobs[0].last_type == 0);
  CHECK_FALSE(check_runnable(j, {0.0}));
  CHECK(check_runnable(j, {0.0, 1.0}));
}
