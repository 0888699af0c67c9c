// Job-set files with users' own programs (kind = "program", runtime/core/job_file.hpp).
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/job_file.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const std::vector<std::string> kinds = {"mlp", "softmax_regression"};

std::string run_jobs_error(const std::string& name, const std::string& text, int line,
                           const std::string& field) {
  const auto p = temp_file(name + ".toml", text);
  return input_error_message(load_run_jobs(p, &kinds), p, line, field);
}

}  // namespace

TEST_CASE("a program job reads its command, directory, environment and limits",
          "[io][job_file][program]") {
  const auto p = temp_file("program_ok.toml", R"([[job]]
kind = "program"
command = ["python3", "train.py", "--lr", "0.1"]
workdir = "."
env = { OMP_NUM_THREADS = "1", SEED = "7" }
max_restarts = 2
grace_seconds = 12.5
checkpoint_every = "4 rounds"
total_steps = 300
step_time = 0.01

[[job]]
kind = "mlp"
total_steps = 10
)");
  auto r = load_run_jobs(p, &kinds);
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  const auto& j = (*r)[0];
  CHECK(j.is_program());
  CHECK(j.program.command == std::vector<std::string>{"python3", "train.py", "--lr", "0.1"});
  CHECK(j.program.workdir == std::filesystem::path(p).parent_path().lexically_normal().string());
  CHECK(j.program.env.at("OMP_NUM_THREADS") == "1");
  CHECK(j.program.env.at("SEED") == "7");
  CHECK(j.program.max_restarts == 2);
  CHECK(j.program.grace_seconds == 12.5);
  CHECK(j.program.checkpoint_every.rounds == 4);
  CHECK(j.program.checkpoint_every.seconds == 0);
  CHECK(j.spec.total_steps == 300);
  CHECK(j.step_time == 0.01);
  CHECK(j.spec.job_type == "program");
  CHECK_FALSE((*r)[1].is_program());
  CHECK((*r)[1].program.command.empty());
}

TEST_CASE("a program job's defaults: the job file's directory, 3 restarts, 30 s grace",
          "[io][job_file][program]") {
  const auto p = temp_file("program_defaults.toml",
                           "[[job]]\nkind = \"program\"\ncommand = [\"true\"]\ntotal_steps = 5\n");
  auto r = load_run_jobs(p, &kinds);
  REQUIRE(r);
  const auto& j = (*r)[0];
  CHECK(j.program.workdir == std::filesystem::path(p).parent_path().lexically_normal().string());
  CHECK(j.program.max_restarts == 3);
  CHECK(j.program.grace_seconds == 30);
  CHECK(j.program.env.empty());
  CHECK(j.program.checkpoint_every == checkpoint_cadence{});  // every round
  CHECK(j.program.checkpoint_every.rounds == 1);
}

TEST_CASE(
    "checkpoint_every takes rounds, a time with its unit, or seconds, and says what it expects",
    "[io][job_file][program]") {
  const auto cadence = [](const std::string& value) {
    const auto p = temp_file("program_cadence.toml",
                             "[[job]]\nkind = \"program\"\ncommand = [\"true\"]\ntotal_steps = 5\n"
                             "checkpoint_every = " +
                                 value + "\n");
    auto r = load_run_jobs(p, &kinds);
    REQUIRE(r);
    return (*r)[0].program.checkpoint_every;
  };
  CHECK(cadence("\"1 round\"").rounds == 1);
  CHECK(cadence("\"12 rounds\"").rounds == 12);
  CHECK(cadence("\"90 s\"").seconds == 90);
  CHECK(cadence("\"10 min\"").seconds == 600);
  CHECK(cadence("\"1.5 h\"").seconds == 5400);
  CHECK(cadence("300").seconds == 300);
  CHECK(cadence("2.5").seconds == 2.5);
  // A cadence written back (the journal's record of the job) reads the same.
  for (const char* text : {"7 rounds", "1 round", "600 s", "2.5 s"}) {
    auto c = parse_checkpoint_cadence(text);
    REQUIRE(c);
    auto again = parse_checkpoint_cadence(format_checkpoint_cadence(*c));
    REQUIRE(again);
    CHECK(*again == *c);
  }
  const auto bad = [](const std::string& name, const std::string& value) {
    return run_jobs_error(name,
                          "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\ntotal_steps = 5\n"
                          "checkpoint_every = " +
                              value + "\n",
                          5, "checkpoint_every");
  };
  CHECK(has(bad("c_unit", "\"3 fortnights\""), "unknown unit"));
  CHECK(has(bad("c_nounit", "\"3\""), "no unit"));
  CHECK(has(bad("c_frac", "\"2.5 rounds\""), "whole number of rounds"));
  CHECK(has(bad("c_zero", "\"0 rounds\""), "\"0 rounds\""));
  CHECK(has(bad("c_small", "0.5"), "1 s to 1000000 s"));
  CHECK(has(bad("c_word", "\"often\""), "\"often\""));
  CHECK(has(bad("c_bool", "true"), "got a boolean"));
  CHECK(has(run_jobs_error("c_trainable",
                           "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\ncheckpoint_every = 3\n", 4,
                           "checkpoint_every"),
            "only a job of kind \"program\""));
}

TEST_CASE(
    "max_copies: a program is never forked unless it says so, a trainable as the policy likes",
    "[io][job_file][program]") {
  const auto p = temp_file("max_copies.toml",
                           "[[job]]\nkind = \"program\"\ncommand = [\"true\"]\ntotal_steps = 5\n\n"
                           "[[job]]\nkind = \"program\"\ncommand = [\"true\"]\ntotal_steps = 5\n"
                           "max_copies = 3\n\n"
                           "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n\n"
                           "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\nmax_copies = 2\n");
  auto r = load_run_jobs(p, &kinds);
  REQUIRE(r);
  CHECK((*r)[0].spec.max_copies == 1);  // a program that does not say: one copy
  CHECK((*r)[1].spec.max_copies == 3);
  CHECK((*r)[2].spec.max_copies == 0);  // a trainable merges itself: the policy's choice
  CHECK((*r)[3].spec.max_copies == 2);
  CHECK(has(run_jobs_error("p_copies0",
                           "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\nmax_copies = 0\n"
                           "total_steps = 5\n",
                           4, "max_copies"),
            "an integer from 1 (never forked)"));
}

TEST_CASE("bad program jobs are refused naming the file, line and field",
          "[io][job_file][program]") {
  run_jobs_error("p_nocmd", "[[job]]\nkind = \"program\"\ntotal_steps = 5\n", 1, "command");
  run_jobs_error("p_emptycmd", "[[job]]\nkind = \"program\"\ncommand = []\ntotal_steps = 5\n", 3,
                 "command");
  run_jobs_error("p_cmdtype",
                 "[[job]]\nkind = \"program\"\ncommand = \"python3 x.py\"\n"
                 "total_steps = 5\n",
                 3, "command");
  run_jobs_error("p_cmdint", "[[job]]\nkind = \"program\"\ncommand = [\"a\", 3]\ntotal_steps = 5\n",
                 3, "command");
  CHECK(has(run_jobs_error("p_dir",
                           "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\n"
                           "workdir = \"no/such/dir\"\ntotal_steps = 5\n",
                           4, "workdir"),
            "no such directory"));
  run_jobs_error("p_env",
                 "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\nenv = { A = 1 }\n"
                 "total_steps = 5\n",
                 4, "env.A");
  run_jobs_error("p_restarts",
                 "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\nmax_restarts = -1\n"
                 "total_steps = 5\n",
                 4, "max_restarts");
  run_jobs_error("p_grace",
                 "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\ngrace_seconds = 0\n"
                 "total_steps = 5\n",
                 4, "grace_seconds");
  CHECK(has(run_jobs_error("p_seed",
                           "[[job]]\nkind = \"program\"\ncommand = [\"a\"]\nseed = 3\n"
                           "total_steps = 5\n",
                           4, "seed"),
            "program job takes no 'seed'"));
  CHECK(has(run_jobs_error("p_trainable",
                           "[[job]]\nkind = \"mlp\"\ncommand = [\"a\"]\n"
                           "total_steps = 5\n",
                           3, "command"),
            "only a job of kind \"program\""));
}

TEST_CASE("an unknown kind's message lists program among the known kinds",
          "[io][job_file][program]") {
  CHECK(has(run_jobs_error("p_unknown", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n", 2, "kind"),
            "(known: mlp, softmax_regression, program)"));
}
