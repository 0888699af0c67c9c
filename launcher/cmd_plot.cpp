/// @file cmd_plot.cpp
/// `tessera plot`: the figures of an experiment, drawn by the project's script
/// (scripts/plot.py) with Debian's Python and python3-matplotlib. This command checks what it
/// can (the kind, that the inputs exist) so bad input is reported here with exit code 2, then
/// runs the script with the same arguments and returns its exit code.

#include <filesystem>
#include <iostream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "launcher/commands.hpp"
#include "runtime/core/result.hpp"

namespace tessera::cli {

namespace {

const char* const usage =
    "usage: tessera plot KIND INPUT... --out PREFIX [--format png,svg] [--title TEXT]\n"
    "kinds:\n"
    "  jct-rate     SWEEP.csv: average JCT vs input rate, one line per policy, the band\n"
    "               spanning the seeds' min..max (--metric COLUMN, default avg_jct_window_h)\n"
    "  cdf          JOBS.csv...: CDF of the job completion times of per-job CSVs (`simulate\n"
    "               --csv`, `compare --csv-dir`, `sweep --keep-jobs`); --window A-B keeps those\n"
    "               job ids\n"
    "  policies     SWEEP.csv of a sweep over --traces: a panel per workload set, a bar per\n"
    "               policy, the mean over the set's traces (--metric COLUMN, default avg_jct_h);\n"
    "               policies with a cell stopped at --max-hours hatched and listed last;\n"
    "               --scale auto|linear|log (auto: log when a panel spans over 30x)\n"
    "  utilisation  TIMELINE...: busy GPUs of each GPU type over time (`simulate --timeline`,\n"
    "               `run --timeline`)\n"
    "  gantt        TIMELINE...: who ran where, one row per server; several timelines are\n"
    "               drawn side by side (a run and its simulation)\n"
    "Writes PREFIX.png and PREFIX.svg (--format picks). Needs python3-matplotlib.";

bool known_kind(const std::string& k) {
  return k == "jct-rate" || k == "cdf" || k == "policies" || k == "utilisation" || k == "gantt";
}

/// The inputs named on the command line (the arguments before the first option, after the
/// kind) must exist; the script checks their contents.
int check_inputs(const std::vector<std::string>& args) {
  bool any = false;
  for (std::size_t i = 1; i < args.size() && args[i].rfind("--", 0) != 0; ++i) {
    any = true;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(args[i], ec)) {
      std::cerr << "tessera: plot: " << args[i] << ": no such file\n";
      return exit_code::bad_input;
    }
  }
  if (!any) {
    std::cerr << "tessera: plot " << args[0] << ": no input file given\n" << usage << '\n';
    return exit_code::bad_input;
  }
  return -1;
}

/// Runs `argv` and waits; its exit code, or failed when it could not run.
int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> raw;
  for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return exit_code::failed;
  if (pid == 0) {
    ::execv(raw[0], raw.data());
    std::cerr << "tessera: plot: cannot run " << argv[0] << '\n';
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return exit_code::failed;
  return WIFEXITED(status) ? WEXITSTATUS(status) : exit_code::failed;
}

}  // namespace

int cmd_plot(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage << '\n';
    return args.empty() ? exit_code::bad_input : exit_code::ok;
  }
  if (!known_kind(args[0])) {
    std::cerr << "tessera: plot: unknown kind '" << args[0]
              << "' (valid: jct-rate, cdf, policies, utilisation, gantt)\n";
    return exit_code::bad_input;
  }
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << usage << '\n';
      return exit_code::ok;
    }
  if (int rc = check_inputs(args); rc >= 0) return rc;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(TESSERA_PLOT_PYTHON, ec) ||
      !std::filesystem::is_regular_file(TESSERA_PLOT_SCRIPT, ec)) {
    std::cerr << "tessera: plot: needs " << TESSERA_PLOT_PYTHON << " and " << TESSERA_PLOT_SCRIPT
              << '\n';
    return exit_code::failed;
  }
  std::vector<std::string> argv = {TESSERA_PLOT_PYTHON, TESSERA_PLOT_SCRIPT};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv);
}

}  // namespace tessera::cli
