// Job sets read from memory (an API request's body): parse_run_jobs, TOML and JSON.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/job_file.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const std::vector<std::string> kinds = {"mlp", "softmax_regression"};

const char* const toml_set = R"([[job]]
kind = "mlp"
total_steps = 400
scale_factor = 2
seed = 9
step_time = 0.02
priority_weight = 2.5
[job.config]
lr = 0.05

[[job]]
kind = "program"
command = ["python3", "train.py"]
env = { SEED = "7" }
total_steps = 30
max_restarts = 1
)";

const char* const json_set = R"({"job": [
  {"kind": "mlp", "total_steps": 400, "scale_factor": 2, "seed": 9, "step_time": 0.02,
   "priority_weight": 2.5, "config": {"lr": 0.05}},
  {"kind": "program", "command": ["python3", "train.py"], "env": {"SEED": "7"},
   "total_steps": 30, "max_restarts": 1}]})";

std::string message_of(const result<std::vector<run_job>>& r) {
  REQUIRE_FALSE(r);
  return r.err().message;
}

}  // namespace

TEST_CASE("a job set in TOML text reads as the same file does", "[io][job_file][api]") {
  const auto p = temp_file("text_same.toml", toml_set);
  const auto dir = std::filesystem::path(p).parent_path().string();
  auto from_file = load_run_jobs(p, &kinds);
  auto from_text = parse_run_jobs(toml_set, job_text_format::toml, "body", dir, &kinds);
  REQUIRE(from_file);
  REQUIRE(from_text);
  REQUIRE(from_file->size() == from_text->size());
  for (std::size_t i = 0; i < from_file->size(); ++i) {
    const auto& a = (*from_file)[i];
    const auto& b = (*from_text)[i];
    CHECK(a.spec.id == b.spec.id);
    CHECK(a.kind == b.kind);
    CHECK(a.spec.total_steps == b.spec.total_steps);
    CHECK(a.spec.scale_factor == b.spec.scale_factor);
    CHECK(a.seed == b.seed);
    CHECK(a.config == b.config);
    CHECK(a.program.command == b.program.command);
    CHECK(a.program.workdir == b.program.workdir);
  }
}

TEST_CASE("a job set in JSON reads as its TOML twin", "[io][job_file][api]") {
  const auto dir = std::filesystem::temp_directory_path().string();
  auto t = parse_run_jobs(toml_set, job_text_format::toml, "body", dir, &kinds);
  auto j = parse_run_jobs(json_set, job_text_format::json, "body", dir, &kinds);
  REQUIRE(t);
  REQUIRE(j);
  REQUIRE(j->size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK((*t)[i].kind == (*j)[i].kind);
    CHECK((*t)[i].spec.total_steps == (*j)[i].spec.total_steps);
    CHECK((*t)[i].spec.scale_factor == (*j)[i].spec.scale_factor);
    CHECK((*t)[i].spec.priority_weight == (*j)[i].spec.priority_weight);
    CHECK((*t)[i].step_time == (*j)[i].step_time);
    CHECK((*t)[i].seed == (*j)[i].seed);
    CHECK((*t)[i].config == (*j)[i].config);
    CHECK((*t)[i].program.env == (*j)[i].program.env);
    CHECK((*t)[i].program.max_restarts == (*j)[i].program.max_restarts);
    CHECK((*t)[i].program.workdir == (*j)[i].program.workdir);
  }
  // One job's object alone is a job set of one.
  auto one = parse_run_jobs(R"({"kind": "mlp", "total_steps": 5})", job_text_format::json, "body",
                            dir, &kinds);
  REQUIRE(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].spec.total_steps == 5);
}

TEST_CASE("errors in a job set from memory name the body, the job and the field",
          "[io][job_file][api]") {
  const auto dir = std::filesystem::temp_directory_path().string();
  auto json = [&](const std::string& text) {
    return message_of(parse_run_jobs(text, job_text_format::json, "request body", dir, &kinds));
  };
  auto toml = [&](const std::string& text) {
    return message_of(parse_run_jobs(text, job_text_format::toml, "request body", dir, &kinds));
  };
  CHECK(json(R"({"job": [{"kind": "mlp", "total_steps": 5}, {"kind": "mlp", "total_steps": -1}]})")
            .find("request body, job[1]: field 'total_steps'") != std::string::npos);
  CHECK(json(R"({"job": [{"kind": "nope", "total_steps": 5}]})")
            .find("job[0]: field 'kind': unknown job kind") != std::string::npos);
  CHECK(json(R"({"job": [{"kind": "mlp", "total_steps": 5, "colour": 1}]})").find("colour") !=
        std::string::npos);
  CHECK(json(R"({"job": [{"kind": "mlp", "total_steps": 5, "id": 3},
                         {"kind": "mlp", "total_steps": 5, "id": 3}]})")
            .find("duplicate job id 3 (also used at job[0])") != std::string::npos);
  CHECK(json(R"({"job": [{"kind": "mlp", "total_steps": null}]})").find("job[0].total_steps") !=
        std::string::npos);
  CHECK(json("{\"job\": [").find("malformed JSON") != std::string::npos);
  CHECK(json("[1, 2]").find("expected a JSON object") != std::string::npos);
  CHECK(json(std::string(100000, '[')).find("nested deeper") != std::string::npos);
  CHECK(toml("[[job]]\nkind = \"mlp\"\ntotal_steps = 0\n")
            .find("request body:3: field 'total_steps'") != std::string::npos);
  CHECK(toml("[[job]\n").find("request body:1:") != std::string::npos);
  CHECK(toml("").find("no [[job]] entries") != std::string::npos);
}

TEST_CASE("random bytes as a job set are refused with a message, never a crash",
          "[io][job_file][api]") {
  std::mt19937 rng(11);
  const auto dir = std::filesystem::temp_directory_path().string();
  const std::string alphabet = "{}[]\",:0123456789.eE-+ truefalsenull\\job\nkind=mlp";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 64);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    for (auto format : {job_text_format::json, job_text_format::toml}) {
      auto r = parse_run_jobs(text, format, "body", dir, &kinds);
      if (!r) CHECK_FALSE(r.err().message.empty());
    }
  }
}
