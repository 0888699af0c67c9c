#pragma once
/// @file process.hpp
/// A user's program process as a node runs it: started in its own process group with its own
/// environment, its output forwarded line by line with a prefix naming the job, the tail of its
/// stderr kept for the job's status, and the whole group signalled or killed at the end, and
/// every process carrying its mark after it, so no orphan is left. POSIX only; plain C++ (no
/// actors), driven by the executor's thread.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <sys/types.h>

#include "runtime/core/result.hpp"

namespace tessera::program {

/// The variable every process of a program carries (the program's mark, 16 hex digits): its
/// descendants inherit it, in their own process group or session too, so they are found in
/// /proc and ended with the program (child_process::end_descendants).
inline constexpr const char* program_mark_variable = "TESSERA_PROGRAM_MARK";

/// What to start.
struct process_spec {
  std::vector<std::string> argv;           ///< argv[0] is searched in PATH
  std::string workdir;                     ///< working directory ("" = the node's)
  std::map<std::string, std::string> env;  ///< set on top of the node's environment
  std::string prefix;                      ///< put before each forwarded output line
  std::size_t tail_bytes = 4096;           ///< stderr bytes kept for describe()
  std::string mark;  ///< its program_mark_variable value ("": a fresh one, new_program_mark)
};

/// A fresh mark for a program (16 hex digits from std::random_device).
std::string new_program_mark();

/// True when process `pid`'s environment holds program_mark_variable=`mark` (false for a
/// process gone or of another user).
bool process_carries_mark(pid_t pid, const std::string& mark);

/// One started process and its group. Not copyable; destroying it kills the group.
class child_process {
 public:
  /// Forks and execs `spec` in a new process group with stdin from /dev/null and stdout and
  /// stderr through pipes; the child dies with the process that started it (PR_SET_PDEATHSIG,
  /// armed on one thread that lives as long as the process: the signal follows the thread
  /// that forked, and a program kept across rounds outlives the round's worker thread).
  /// An exec failure (no such program, not executable) is an error naming the program and
  /// the system's reason, and leaves nothing running.
  static result<child_process> start(const process_spec& spec);

  child_process(child_process&& o) noexcept;
  child_process& operator=(child_process&& o) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  /// Kills the group (SIGKILL) and reaps the process if it still runs.
  ~child_process();

  pid_t pid() const { return pid_; }
  /// Forwards the output that is ready (waits at most `wait_ms` for some) to `out` (stdout
  /// lines) and `err` (stderr lines), each line after the prefix; reaps the process when it
  /// has exited. Returns true while it runs.
  bool poll(int wait_ms, std::ostream& out, std::ostream& err);
  /// True once the process has exited (poll reaped it).
  bool exited() const { return status_.has_value(); }
  /// True when it exited with status 0.
  bool succeeded() const;
  /// "exited with status 3", "was killed by signal 9 (Killed)", "is running".
  std::string describe_exit() const;
  /// The last tail_bytes of its stderr (whole lines where possible).
  std::string stderr_tail() const;
  /// Sends `sig` to the whole process group (no-op once the group is gone).
  void signal_group(int sig);
  /// Kills the group (SIGKILL), reaps the process and drains its output.
  void kill_and_reap(std::ostream& out, std::ostream& err);
  /// True when any process of its group is still alive (kill(-pgid, 0) succeeds).
  bool group_alive() const;
  /// Kills (SIGKILL) every process that carries this program's mark: what it started in a
  /// session or group of its own (setsid, a daemon's double fork) outlives a group kill.
  /// Returns how many were signalled. Done by kill_and_reap and the destructor; a process
  /// that cleared its environment is not found (docs/design.md, "Programs end with their job").
  int end_descendants();

 private:
  child_process() = default;
  /// start()'s work, on the calling thread.
  static result<child_process> start_here(const process_spec& spec);
  void forward(int which, std::ostream& out);
  void close_fds();

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};   ///< stdout, stderr read ends
  std::string partial_[2];  ///< unfinished line of each
  std::string tail_;        ///< stderr's tail
  bool tail_cut_ = false;   ///< the tail lost its beginning (it may start mid-line)
  std::size_t tail_bytes_ = 4096;
  std::string prefix_;
  std::string mark_;           ///< its program_mark_variable value
  std::optional<int> status_;  ///< waitpid status once reaped
};

}  // namespace tessera::program
