#pragma once
/// @file sweep_cells.hpp
/// The cells of `tessera sweep` (launcher/cmd_sweep.cpp): naming them, generating their
/// traces, running them on worker threads, keeping each finished cell in its own file and
/// writing the aggregate CSV and JSON. Layout of the output directory:
///   traces/r<rate>_s<seed>.trace     a generated trace per (rate, seed)
///   cells/<cell>.json                a finished cell: coordinates, metrics, command, seconds
///   cells/<cell>.jobs.csv            its jobs, one row each (with --keep-jobs)
///   sweep.csv, sweep.json            every finished cell, in the sweep's order
/// Every file is written to a temporary name and renamed, so an interrupted sweep leaves only
/// whole files; a rerun skips the cells whose file exists.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/progress.hpp"
#include "launcher/sim_run.hpp"
#include "runtime/core/result.hpp"
#include "runtime/workload/trace_gen.hpp"

namespace tessera::cli {

/// One cell: a policy on the trace of one rate and seed, with one round length.
struct sweep_cell {
  std::string policy;
  double rate = 0;  ///< jobs per hour
  std::uint64_t seed = 0;
  double round_length = 360;
  std::string name;      ///< file stem, e.g. "fifo_r2.8_s1_L360"
  std::string trace;     ///< the trace's path
  std::string workload;  ///< the trace's file stem ("r2.8_s1"; a given trace's own)
};

/// A sweep ready to run: its axes, shared inputs and cells.
struct sweep_plan {
  std::vector<std::string> policies;
  std::vector<double> rates, seeds, rounds;
  std::vector<std::string> traces;  ///< given traces (--traces), absolute; empty: generated
  sim_inputs base;                  ///< cluster, table, settings and policy options (no jobs)
  std::vector<job_template> templates;
  std::string out_dir;
  int jobs = 0;  ///< jobs per trace
  bool multi_gpu = false, keep_jobs = false;
  std::string self;           ///< this program's path, for the reproducing commands
  std::string simulate_args;  ///< options every cell's `simulate` command shares
  std::vector<sweep_cell> cells;
};

/// `x` in its shortest exact form ("0.4", "360", "1e-05").
std::string number_name(double x);

/// `s` quoted for a POSIX shell when it holds anything but [A-Za-z0-9_./=:,+-].
std::string shell_quote(const std::string& s);

/// Every cell, policies outermost, then rates, seeds and round lengths (or the given
/// traces and round lengths).
std::vector<sweep_cell> make_cells(const sweep_plan& p);

/// The command lines that reproduce a cell: the trace's generation, then its simulation.
std::string cell_command(const sweep_plan& p, const sweep_cell& c);

/// Writes `text` to `path` by way of a temporary file renamed over it.
status write_atomically(const std::string& path, const std::string& text);

/// The finished cells found in the output directory, by name. A file that does not parse as
/// a cell (none should: each is renamed into place whole) is left out, and the cell re-run.
std::map<std::string, nlohmann::json> load_finished_cells(const sweep_plan& p);

/// Removes the temporary files an interrupted sweep left in the output directory (names with
/// ".tmp." or ending ".part"); one sweep at a time may use a directory.
void remove_leftovers(const sweep_plan& p);

/// Generates the trace of every (rate, seed) that a cell not yet finished needs and that is
/// not there yet.
status generate_traces(const sweep_plan& p, const std::map<std::string, nlohmann::json>& done);

/// Runs one cell: its metrics, coordinates and command as JSON; the cell's file is written.
result<nlohmann::json> run_cell(const sweep_plan& p, const sweep_cell& c, progress_meter& meter);

/// What run_cells did.
struct sweep_run {
  std::vector<std::string> failures;  ///< one message per cell that failed
  int ran = 0;                        ///< cells run (finished) now
  double cell_seconds = 0;            ///< their simulations' wall seconds, summed
};

/// Runs the cells not in `done` on `workers` threads, adding each to `done` and rewriting the
/// aggregate after each.
sweep_run run_cells(const sweep_plan& p, std::map<std::string, nlohmann::json>& done,
                    unsigned workers, progress_meter& meter);

/// The CSV columns, in order: the cell's coordinates, its metrics, its command. Wall time is
/// kept out (in sweep.json only), so rerunning a sweep gives the same CSV.
const std::vector<std::string>& sweep_csv_columns();
/// Columns a finished cell may lack (cells written before the column existed): such a cell
/// still counts as finished and its CSV field is empty. lre_avg / lre_max: the expected
/// latency ratio (runtime/core/metrics.hpp); trace: the trace's file stem.
bool sweep_csv_optional(const std::string& column);

/// Writes sweep.csv and sweep.json from the finished cells, in the plan's order.
status write_aggregate(const sweep_plan& p, const std::map<std::string, nlohmann::json>& done);

/// Prints how many cells ran and resumed, the sweep's wall time and the sum of its cells'
/// times over the workers (how well the cells filled them).
void print_sweep_summary(std::ostream& out, const sweep_run& r, std::size_t resumed, double wall_s,
                         unsigned workers);

}  // namespace tessera::cli
