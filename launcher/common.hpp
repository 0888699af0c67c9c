#pragma once
/// @file common.hpp
/// Helpers shared by the CLI commands: parsing options, loading inputs named on the command
/// line and parsing "key=value" policy arguments (progress: launcher/progress.hpp). Exit codes are
/// runtime/core/result.hpp's exit_code.

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "runtime/core/copy_efficiency.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera::cli {

/// Bounds of the numbers the commands take on their command lines, each with why; the
/// input files' bounds are in runtime/core/input_limits.hpp. NaN and infinities are always refused.
namespace option_bounds {
/// Simulated round length, in seconds: [1, 86400]. Gavel's rounds are 360 s; under 1 s a
/// simulated week takes more than 600 000 rounds (and 1e-9 s never got past the first job);
/// a round longer than a day outlasts almost every job it plans.
inline constexpr double min_sim_round = 1;
inline constexpr double max_sim_round = 86400;
/// Seconds a simulated job loses per restart: [0, 86400]; a day is longer than most jobs run.
inline constexpr double max_restart_cost = 86400;
/// --max-hours: [0, 1e6] (0: no limit); the latest arrival a trace holds is ~2.8e5 h.
inline constexpr double max_hours = 1e6;
/// Policies simulated at once by compare: [1, 1024] threads.
inline constexpr double max_parallel = 1024;
/// A real run's round length, in seconds: [0.05, 3600]. Under 50 ms a round is shorter than
/// the messages that plan it and collect its reports; an hour-long round leaves a run's
/// timeout with a handful of decisions.
inline constexpr double min_run_round = 0.05;
inline constexpr double max_run_round = 3600;
/// Seconds for nodes to register: [0.1, 3600]; starting processes takes at least ~0.1 s.
inline constexpr double min_connect_timeout = 0.1;
inline constexpr double max_connect_timeout = 3600;
/// A run's overall timeout, in seconds: [1, 604800] (a week); the run is a CPU experiment.
inline constexpr double min_run_timeout = 1;
inline constexpr double max_run_timeout = 604800;
/// Heartbeat interval, in seconds: [0.01, 60]; faster floods the scheduler, slower cannot
/// notice a lost node within a round. The heartbeat timeout lies above the interval, at most
/// an hour.
inline constexpr double min_heartbeat = 0.01;
inline constexpr double max_heartbeat = 60;
inline constexpr double max_heartbeat_timeout = 3600;
/// Node processes of a --local run: [0, 1024] (0: one); each is a full process on this host.
inline constexpr double max_local_nodes = 1024;
}  // namespace option_bounds

/// Checks a number given with option `option` ("--round-length"): finite and within
/// [lo, hi]. The error names the option, the range, `unit` ("seconds") and the value.
status check_option(const char* option, double value, double lo, double hi, const char* unit = "");

/// `text` safe to print on a terminal: control characters (C0 but newline and tab, DEL, and
/// C1 in UTF-8) shown as \xHH / \uHHHH, so a program's output cannot move the cursor, set the
/// title or hide text.
std::string printable(const std::string& text);

/// Prints "tessera: <message>" to stderr and returns the exit code for the error's kind.
int report(const error& e);

/// The path of the running program (/proc/self/exe), "" when it cannot be read.
std::string self_exe();

/// Parses `args` with the options of `parsed`. Returns -1 to go on, else the exit code: ok
/// after printing `usage_line` and the options of `shown` (--help), bad_input after printing
/// the error and `usage_line` to `err`.
int parse_options(const std::vector<std::string>& args,
                  const boost::program_options::options_description& parsed,
                  const boost::program_options::options_description& shown, const char* usage_line,
                  std::ostream& err);

/// Loads the cluster from --cluster (a TOML file) or --cluster-spec (the shorthand); the
/// bundled Gavel cluster (config/gavel_108.toml) when neither is given.
result<cluster> load_cluster_arg(const std::string& file, const std::string& spec);

/// The value of environment variable `name`, nullopt when it is unset.
std::optional<std::string> env_value(const std::string& name);

/// Loads the throughput table from a file, or the bundled one when `file` is empty.
result<throughput_table> load_table_arg(const std::string& file);

/// Reads --restart-costs: a CSV of `job_type,seconds` lines (a header line `job_type,seconds`
/// may come first), e.g. what `tessera table import sia --restart-costs-out` writes. Errors
/// name the file, line and field; an empty `file` gives an empty map.
result<std::map<std::string, double>> load_restart_costs(const std::string& file);

/// Parses "key=value" pairs given with --policy-arg: the value a finite number, or true/false
/// (1/0) for a boolean option. Anything after the number ("3abc"), NaN and infinities are
/// errors; each policy then checks its options' bounds (policies/options.hpp).
result<std::map<std::string, double>> parse_policy_args(const std::vector<std::string>& kv);

/// Parses a job-id window "4000-4999" into [begin, end].
result<std::pair<job_id, job_id>> parse_window(const std::string& text);

/// Help text of --copy-efficiency (simulate, compare, sweep).
inline constexpr const char* copy_efficiency_help =
    "statistical efficiency of a forked job's averaged copies (runtime/core/copy_efficiency.hpp): "
    "'on' (default: gradient-noise model, calibrated B_noise = 74 samples), 'off' (count "
    "every copy's steps in full: the upper bound), or B_noise in samples, e.g. 200";

/// Parses --copy-efficiency: "on", "off", or a positive finite noise scale in samples.
result<copy_efficiency> parse_copy_efficiency(const std::string& text);

}  // namespace tessera::cli
