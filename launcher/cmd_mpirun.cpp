/// @file cmd_mpirun.cpp
/// `tessera mpirun`: a run under `mpirun --enable-recovery` that exits with the run's outcome.
/// Open MPI's recovery mode (which a run needs to survive a node process dying) exits 0
/// whatever the ranks returned, even when rank 0 -- the scheduler -- was killed. So this
/// command starts mpirun itself, asks rank 0 for its exit code through a status file
/// (`--status-file`, written atomically when the run ends, bad input included) and exits
/// with it; with no status file rank 0 never finished, and the run failed.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "runtime/core/result.hpp"

namespace tessera::cli {

namespace {

const char* const mpirun_usage =
    "usage: tessera mpirun [mpirun options] -- run <tessera run options>\n"
    "       tessera mpirun [mpirun options] -- PROGRAM [its tessera run options]\n"
    "Runs the job set under `mpirun --enable-recovery` (so it survives a node process dying)\n"
    "and exits with the run's own exit code: 0 every job finished, 1 the run failed (rank 0\n"
    "included), 2 bad input. PROGRAM is any program built on tessera's run command (e.g. an\n"
    "example's node binary); `run` means this tessera.\n"
    "example: tessera mpirun -np 3 --oversubscribe -- run --cluster C.toml --jobs J.toml\n";

/// The mpirun this process waits for, to which SIGTERM and SIGINT are passed on (mpirun
/// hands them to every rank: a served cluster stops, a run's nodes drain).
volatile pid_t waited_child = 0;

void forward_signal(int sig) {
  if (waited_child > 0) ::kill(waited_child, sig);
}

/// Runs `argv` and waits for it; its exit status, or 127 when it could not start.
int run_and_wait(std::vector<std::string> argv) {
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execvp(ptrs[0], ptrs.data());
    std::perror("tessera mpirun: exec mpirun");
    ::_exit(127);
  }
  if (pid < 0) return 127;
  waited_child = pid;
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// The exit code in a status file, or -1 when there is none.
int read_status(const std::string& path) {
  std::ifstream f(path);
  int code = -1;
  if (!(f >> code) || code < 0 || code > 255) return -1;
  return code;
}

}  // namespace

int cmd_mpirun(const std::vector<std::string>& args) {
  std::vector<std::string> mpi, program;
  bool after = false;
  for (const auto& a : args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    if (!after && (a == "--help" || a == "-h")) {
      std::cout << mpirun_usage;
      return exit_code::ok;
    }
    (after ? program : mpi).push_back(a);
  }
  if (program.empty()) {
    std::cerr << "tessera mpirun: no program after --\n" << mpirun_usage;
    return exit_code::bad_input;
  }
  if (program.front() == "run") program.insert(program.begin(), self_exe());
  std::string dir = (std::filesystem::temp_directory_path() / "tessera-status-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::cerr << "tessera mpirun: cannot create a directory for the status file\n";
    return exit_code::failed;
  }
  const std::string status = dir + "/status";
  std::vector<std::string> argv{"mpirun", "--enable-recovery"};
  argv.insert(argv.end(), mpi.begin(), mpi.end());
  argv.insert(argv.end(), program.begin(), program.end());
  argv.insert(argv.end(), {"--status-file", status});
  const int mpirun_code = run_and_wait(argv);
  const int code = read_status(status);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (code >= 0) return code;
  std::cerr << "tessera mpirun: rank 0 ended without reporting the run's outcome (mpirun "
               "exited with "
            << mpirun_code << "); the run failed\n";
  return exit_code::failed;
}

}  // namespace tessera::cli
