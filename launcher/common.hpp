#pragma once
/// @file common.hpp
/// Helpers shared by the CLI commands: loading inputs named on the command line, parsing
/// "key=value" policy arguments, and a progress line on stderr.

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/model.hpp"
#include "runtime/result.hpp"
#include "runtime/sim.hpp"
#include "runtime/throughput.hpp"

namespace tessera::cli {

/// Exit codes: 0 success, 1 a run failed, 2 bad input or usage.
enum exit_code { ok = 0, failed = 1, bad_input = 2 };

/// Prints "tessera: <message>" to stderr and returns the exit code for the error's kind.
int report(const error& e);

/// Loads the cluster from --cluster (a TOML file) or --cluster-spec (the shorthand); the
/// bundled Gavel cluster (config/gavel_108.toml) when neither is given.
result<cluster> load_cluster_arg(const std::string& file, const std::string& spec);

/// Loads the throughput table from a file, or the bundled one when `file` is empty.
result<throughput_table> load_table_arg(const std::string& file);

/// Parses "key=value" pairs (value numeric) given with --policy-arg.
result<std::map<std::string, double>> parse_policy_args(const std::vector<std::string>& kv);

/// Parses a job-id window "4000-4999" into [begin, end].
result<std::pair<job_id, job_id>> parse_window(const std::string& text);

/// Rate-limited progress reporting on stderr: a rewritten line on a terminal, a line every
/// few seconds otherwise. Thread-safe.
class progress_line {
 public:
  explicit progress_line(bool enabled);
  ~progress_line();
  /// Reports the state of one named run.
  void update(const std::string& name, const sim_progress& p);
  /// Ends the line (if one is being rewritten).
  void finish();

 private:
  bool enabled_, tty_;
  std::mutex mu_;
  std::map<std::string, sim_progress> state_;
  std::chrono::steady_clock::time_point last_;
  bool dirty_ = false;
};

}  // namespace tessera::cli
