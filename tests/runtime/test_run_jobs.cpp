// Tests of a run's job-set files (load_run_jobs in runtime/cluster_config.cpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/cluster_config.hpp"

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
