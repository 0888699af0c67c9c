#pragma once
/// @file progress.hpp
/// Progress of a long command (simulate, compare, sweep) on stderr. On a terminal: one line
/// rewritten in place, a bar with the fraction done, the elapsed time and an estimate of the
/// time left. Otherwise (a pipe, a log file): a plain line every few seconds, so a log shows
/// the command is alive without filling up. Thread-safe: parallel runs report into one meter.

#include <chrono>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>

#include "runtime/sim/sim.hpp"

namespace tessera::cli {

/// The text of one progress report: `fraction` in [0, 1] of the work done after
/// `elapsed_s` seconds, `done` of `total` `unit`s finished ("cells"), `detail` appended.
/// With `bar` a 24-character bar leads. The ETA is elapsed x (1 - f) / f ("?" while nothing
/// is done).
std::string progress_text(double fraction, double elapsed_s, int done, int total,
                          const std::string& unit, const std::string& detail, bool bar);

/// Seconds as "42s", "3m05s" or "2h07m".
std::string duration_text(double seconds);

/// The share of a simulation done: jobs finished over the jobs it must finish (`goal`),
/// kept below 1 until it ends.
double sim_fraction(const sim_progress& p, int goal);

/// A meter over `total` units of work (simulations, cells), each reporting its own fraction.
class progress_meter {
 public:
  /// `enabled` false: silent. `tty`: a bar rewritten at most every 200 ms (or `plain_every`
  /// when shorter); else a plain line every `plain_every`.
  progress_meter(bool enabled, int total, std::string unit, std::ostream& out, bool tty,
                 std::chrono::milliseconds plain_every = std::chrono::seconds(5));
  /// Reports on stderr, as a bar when stderr is a terminal.
  progress_meter(bool enabled, int total, std::string unit,
                 std::chrono::milliseconds plain_every = std::chrono::seconds(5));
  ~progress_meter();
  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;
  /// Unit `name` is `fraction` done; `detail` says where it is ("1200/5000 jobs").
  void update(const std::string& name, double fraction, const std::string& detail);
  /// Unit `name` has finished (also for a unit that never reported).
  void done(const std::string& name);
  /// Counts units finished before the meter started (a resumed sweep's cells) as done.
  void skip(int units);
  /// Prints the final state and ends the rewritten line.
  void finish();

 private:
  void show(bool force);

  bool enabled_, tty_;
  int total_, done_ = 0, skipped_ = 0;
  std::string unit_;
  std::ostream& out_;
  std::chrono::milliseconds every_;
  std::mutex mu_;
  std::map<std::string, std::pair<double, std::string>> running_;
  std::chrono::steady_clock::time_point start_, last_;
  bool shown_ = false, dirty_ = false, finished_ = false;
};

}  // namespace tessera::cli
