#pragma once
/// @file common.hpp
/// Helpers shared by the CLI commands: parsing options, loading inputs named on the command
/// line, parsing "key=value" policy arguments, and a progress line on stderr. Exit codes are
/// runtime/result.hpp's exit_code.

#include <chrono>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "runtime/model.hpp"
#include "runtime/result.hpp"
#include "runtime/sim.hpp"
#include "runtime/throughput.hpp"

namespace tessera::cli {

/// Prints "tessera: <message>" to stderr and returns the exit code for the error's kind.
int report(const error& e);

/// The path of the running program (/proc/self/exe), "" when it cannot be read.
std::string self_exe();

/// Parses `args` with the options of `parsed`. Returns -1 to go on, else the exit code: ok
/// after printing `usage_line` and the options of `shown` (--help), bad_input after printing
/// the error and `usage_line` to `err`.
int parse_options(const std::vector<std::string>& args,
                  const boost::program_options::options_description& parsed,
                  const boost::program_options::options_description& shown,
                  const char* usage_line, std::ostream& err);

/// Loads the cluster from --cluster (a TOML file) or --cluster-spec (the shorthand); the
/// bundled Gavel cluster (config/gavel_108.toml) when neither is given.
result<cluster> load_cluster_arg(const std::string& file, const std::string& spec);

/// Loads the throughput table from a file, or the bundled one when `file` is empty.
result<throughput_table> load_table_arg(const std::string& file);

/// Parses "key=value" pairs given with --policy-arg: the value a number, or true/false (1/0)
/// for a boolean option. Anything after the number ("3abc") is an error.
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
