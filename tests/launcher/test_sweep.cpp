// `tessera sweep` (launcher/cmd_sweep.cpp, launcher/sweep_cells.cpp) and the progress meter
// (launcher/progress.hpp): resuming skips finished cells and gives the same CSV, bad input
// exits 2, each cell's command reproduces it, progress is a bar on a terminal and plain lines
// in a pipe.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iomanip>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "launcher/commands.hpp"
#include "launcher/progress.hpp"
#include "policies/registry.hpp"
#include "runtime/core/result.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::file_contents;
using tessera::test::scratch_dir;

namespace {

/// A sweep of 4 tiny cells (30 jobs each) into `dir`, plus `extra` arguments.
std::vector<std::string> tiny_sweep(const std::string& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--policies", "fifo,max_min_fairness_perf",
                                "--rates",    "4,12",
                                "--seeds",    "1",
                                "--jobs",     "30",
                                "--window",   "10-19",
                                "--out",      dir,
                                "-j",         "2",
                                "--quiet"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("sweep: a rerun skips finished cells and writes the same CSV", "[sweep]") {
  scratch_dir d("sweep_resume");
  const auto dir = d.file("out");
  REQUIRE(cli::cmd_sweep(tiny_sweep(dir)) == exit_code::ok);
  const std::string full = file_contents(dir + "/sweep.csv");
  REQUIRE(lines_of(full) == 5);  // header + 4 cells
  // As after an interruption: two cells never finished, the aggregate not yet rewritten.
  const auto cells = dir + "/cells/";
  std::filesystem::remove(cells + "fifo_r12_s1_L360.json");
  std::filesystem::remove(cells + "max_min_fairness_perf_r4_s1_L360.json");
  std::filesystem::remove(dir + "/sweep.csv");
  REQUIRE(cli::cmd_sweep(tiny_sweep(dir)) == exit_code::ok);
  CHECK(file_contents(dir + "/sweep.csv") == full);
  // A finished cell is read back, not run again: a mark put in its file shows in the CSV.
  const auto kept = cells + "fifo_r4_s1_L360.json";
  auto j = nlohmann::json::parse(file_contents(kept));
  j["rounds"] = 987654;
  std::ofstream(kept) << j.dump();
  REQUIRE(cli::cmd_sweep(tiny_sweep(dir)) == exit_code::ok);
  CHECK_THAT(file_contents(dir + "/sweep.csv"), Catch::Contains(",987654,"));
  auto all = nlohmann::json::parse(file_contents(dir + "/sweep.json"));
  CHECK(all.at("cells").size() == 4);
  // A cell written before the expected latency ratio existed still counts as finished; its
  // CSV fields for it are empty.
  j.erase("lre_avg");
  j.erase("lre_max");
  std::ofstream(kept) << j.dump();
  REQUIRE(cli::cmd_sweep(tiny_sweep(dir)) == exit_code::ok);
  const std::string csv = file_contents(dir + "/sweep.csv");
  CHECK_THAT(csv, Catch::Contains(",lr_max,lre_avg,lre_max,"));
  CHECK_THAT(csv, Catch::Contains(",,,"));  // the old cell's two empty fields
  CHECK_THAT(csv, Catch::Contains(",987654,"));
}

TEST_CASE("sweep: --policies all runs every registered policy once", "[sweep]") {
  scratch_dir d("sweep_all");
  const auto dir = d.file("out");
  REQUIRE(cli::cmd_sweep({"--policies", "all", "--rates", "6", "--jobs", "4", "--out", dir, "-j",
                          "2", "--quiet"}) == exit_code::ok);
  auto all = nlohmann::json::parse(file_contents(dir + "/sweep.json"));
  std::set<std::string> ran;
  for (const auto& c : all.at("cells")) ran.insert(c.at("policy").get<std::string>());
  CHECK(ran.size() == policy_registry().size());
  for (const auto& e : policy_registry()) CHECK(ran.count(e.name) == 1);
  CHECK(all.at("cells").size() == policy_registry().size());
}

TEST_CASE("sweep: bad input exits 2 and names the option", "[sweep]") {
  scratch_dir d("sweep_bad");
  const auto dir = d.file("out");
  auto with = [&](std::vector<std::string> a) { return cli::cmd_sweep(a); };
  CHECK(with({"--policies", "fifo", "--rates", "1,abc", "--jobs", "5", "--out", dir}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1,1", "--jobs", "5", "--out", dir}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "-1", "--jobs", "5", "--out", dir}) == 2);
  CHECK(with({"--policies", "fifo_typo", "--rates", "1", "--jobs", "5", "--out", dir}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--jobs", "0", "--out", dir}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--jobs", "5", "--out", dir, "-j", "0"}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--seeds", "1.5", "--jobs", "5", "--out",
              dir}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--out", dir}) == 2);  // --jobs missing
  CHECK(with({"--policies", "fifo", "--rates", "1", "--jobs", "5", "--out", dir,
              "--copy-efficiency", "nope"}) == 2);
  CHECK_FALSE(std::filesystem::exists(dir + "/cells"));  // nothing made before the checks
  // A directory holding another sweep's cells (other settings) is refused.
  REQUIRE(with({"--policies", "fifo", "--rates", "1", "--jobs", "5", "--out", dir, "-q"}) == 0);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--jobs", "6", "--out", dir, "-q"}) == 2);
  CHECK(with({"--policies", "fifo", "--rates", "1", "--jobs", "5", "--out", dir, "-q",
              "--copy-efficiency", "off"}) == 2);  // the copy model is one of the settings
}

TEST_CASE("sweep: each cell's command reproduces its metrics", "[sweep]") {
  scratch_dir d("sweep_cmd");
  const auto dir = d.file("out");
  // The binary, not this test program, must be the one the commands name.
  std::string args;
  for (const auto& a : tiny_sweep(dir)) args += " '" + a + "'";
  REQUIRE(test::run_tessera("sweep" + args).code == 0);
  auto all = nlohmann::json::parse(file_contents(dir + "/sweep.json"));
  const auto& cell = all.at("cells").at(1);
  for (const auto& t : std::filesystem::directory_iterator(dir + "/traces"))
    std::filesystem::remove(t.path());  // the command regenerates the trace
  auto r = test::run_shell(cell.at("command").get<std::string>() + " -q");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ostringstream jct;
  jct << std::fixed << std::setprecision(2) << cell.at("avg_jct_h").get<double>();
  CHECK_THAT(r.out,
             Catch::Contains(cell.at("policy").get<std::string>()) && Catch::Contains(jct.str()));
}

TEST_CASE("sweep: given traces are the cells' workloads, named by their file stems", "[sweep]") {
  scratch_dir d("sweep_traces");
  const auto dir = d.file("out");
  for (const char* n : {"a", "b"})
    REQUIRE(test::run_tessera(std::string("trace generate --jobs 12 --rate 6 --seed ") +
                              (n[0] == 'a' ? "1" : "2") + " -o " +
                              d.file(std::string(n) + ".trace"))
                .code == 0);
  const std::vector<std::string> args = {"--policies",
                                         "fifo,max_min_fairness_perf",
                                         "--traces",
                                         d.file("a.trace"),
                                         d.file("b.trace"),
                                         "--out",
                                         dir,
                                         "-j",
                                         "2",
                                         "--quiet"};
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  REQUIRE(test::run_tessera("sweep" + line).code == 0);
  const std::string csv = file_contents(dir + "/sweep.csv");
  CHECK(lines_of(csv) == 5);
  CHECK_THAT(csv, Catch::StartsWith("policy,rate_per_hour,seed,trace,round_length,jobs,"));
  CHECK_THAT(csv, Catch::Contains("fifo,0,0,a,360,12,12,"));
  CHECK_THAT(csv, Catch::Contains("max_min_fairness_perf,0,0,b,360,12,12,"));
  CHECK(std::filesystem::is_empty(dir + "/traces"));  // nothing generated
  // A cell's command is the simulation alone, and reproduces it.
  auto all = nlohmann::json::parse(file_contents(dir + "/sweep.json"));
  const auto& cell = all.at("cells").at(3);
  CHECK(cell.at("cell").get<std::string>() == "max_min_fairness_perf_b_L360");
  const auto command = cell.at("command").get<std::string>();
  CHECK(command.find("trace generate") == std::string::npos);
  auto r = test::run_shell(command + " -q");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ostringstream jct;
  jct << std::fixed << std::setprecision(2) << cell.at("avg_jct_h").get<double>();
  CHECK_THAT(r.out, Catch::Contains(jct.str()));
  // Generated and given traces do not mix; two traces of one stem, or none, are refused.
  auto with = [&](std::vector<std::string> a) { return cli::cmd_sweep(a); };
  const auto other = d.file("other");
  CHECK(with({"--policies", "fifo", "--traces", d.file("a.trace"), "--rates", "1", "--out",
              other}) == 2);
  CHECK(with({"--policies", "fifo", "--traces", d.file("a.trace"), d.file("a.trace"), "--out",
              other}) == 2);
  CHECK(with({"--policies", "fifo", "--traces", d.file("none.trace"), "--out", other}) == 2);
  CHECK(with({"--policies", "fifo", "--out", other}) == 2);
}

TEST_CASE("progress: the text has a bar, the elapsed time and an ETA", "[progress]") {
  CHECK(cli::progress_text(0.25, 60, 1, 4, "cells", "x", true) ==
        "[######..................] 25% 1/4 cells, elapsed 1m00s, ETA 3m00s | x");
  CHECK(cli::progress_text(0, 5, 0, 4, "cells", "", false) == "0% 0/4 cells, elapsed 5s, ETA ?");
  CHECK(cli::duration_text(7300) == "2h01m");
  sim_progress p;
  p.completed = 50;
  CHECK(cli::sim_fraction(p, 100) == Approx(0.5));
  p.completed = 120;  // jobs past the window finish too: never 100% before the end
  CHECK(cli::sim_fraction(p, 100) < 1);
}

TEST_CASE("progress: a rewritten bar on a terminal, plain lines otherwise", "[progress]") {
  std::ostringstream tty, plain;
  {
    cli::progress_meter bar(true, 2, "runs", tty, true, std::chrono::milliseconds(0));
    cli::progress_meter lines(true, 2, "runs", plain, false, std::chrono::milliseconds(0));
    for (auto* m : {&bar, &lines}) {
      m->update("a", 0.5, "10/20 jobs");
      m->done("a");
      m->done("b");
    }
  }
  CHECK_THAT(tty.str(),
             Catch::StartsWith("\r\033[K[") && Catch::Contains("ETA") && Catch::EndsWith("\n"));
  CHECK(tty.str().find('\n') == tty.str().size() - 1);  // one line, rewritten in place
  CHECK_THAT(plain.str(), Catch::StartsWith("progress: ") && Catch::Contains("100% 2/2 runs"));
  CHECK(plain.str().find('\r') == std::string::npos);
  CHECK(lines_of(plain.str()) >= 2);
}

TEST_CASE("progress: simulate in a pipe prints periodic plain lines with an ETA", "[progress]") {
  scratch_dir d("progress_pipe");
  REQUIRE(test::run_tessera("trace generate --jobs 1500 --rate 6 --seed 2 -o " + d.file("t.trace") +
                            " 2>/dev/null")
              .code == 0);
  auto r = test::run_tessera("simulate --trace " + d.file("t.trace") +
                             " --policy max_min_fairness --progress-interval 0.1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("progress: ") && Catch::Contains("ETA"));
  CHECK(r.out.find('\r') == std::string::npos);
  CHECK(
      test::run_tessera("simulate --trace " + d.file("t.trace") + " --progress-interval 0").code ==
      2);
}

TEST_CASE("plot: an unknown kind or a missing input exits 2", "[plot]") {
  CHECK(test::run_tessera("plot nonsense x --out y").code == 2);
  CHECK(test::run_tessera("plot gantt /nonexistent.jsonl --out y").code == 2);
  CHECK(test::run_tessera("plot cdf --out y").code == 2);
  auto help = test::run_tessera("plot --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("jct-rate") && Catch::Contains("policies") &&
                           Catch::Contains("gantt"));
}

TEST_CASE("sweep: --copy-efficiency reaches every cell and its command", "[sweep][copy_eff]") {
  scratch_dir d("sweep_copy_eff");
  auto cell_of = [&](const std::string& name, const std::string& eff) {
    const auto dir = d.file(name);
    std::string args = " --policies hadare --rates 4 --seeds 3 --jobs 30 --multi-gpu -q --out " +
                       dir + " --copy-efficiency " + eff;
    REQUIRE(test::run_tessera("sweep" + args).code == 0);
    return nlohmann::json::parse(file_contents(dir + "/sweep.json")).at("cells").at(0);
  };
  const auto off = cell_of("off", "off");
  const auto on = cell_of("on", "on");
  const std::string cmd = off.at("command").get<std::string>();
  CHECK_THAT(cmd, Catch::Contains("--copy-efficiency off"));
  CHECK(off.at("avg_jct_h").get<double>() < on.at("avg_jct_h").get<double>());
  auto r = test::run_shell(cmd + " -q");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::ostringstream jct;
  jct << std::fixed << std::setprecision(2) << off.at("avg_jct_h").get<double>();
  CHECK_THAT(r.out, Catch::Contains(jct.str()));
}
