#pragma once
/// @file run_report.hpp
/// What `tessera run` (and `serve`, and a researcher's node binary made with run_command)
/// shows of a run once it ends: the summary table on stdout, the summary as JSON in
/// `--json-out`. The actor runtime hands rank 0's summary to report_run through
/// actors::run_settings::report (actors/run.hpp).

#include <nlohmann/json.hpp>

#include "actors/run.hpp"

namespace tessera::cli {

/// The summary table on stdout: the run's outcome in one line (or a served cluster's stop),
/// one row per job (JCT, steps, loss, accuracy, restarts, rounds, copies), each failed job's
/// reason, the schedule metrics as the simulator computes them, the checkpoint counts.
void print_summary(const actors::run_summary& s, const actors::run_settings& o, const cluster& cl);

/// The summary as JSON (what `--json-out` holds): the run's counts and metrics, one object
/// per job.
nlohmann::json to_json(const actors::run_summary& s, const actors::run_settings& o,
                       const cluster& cl);

/// The report of `tessera run` (an actors::run_report): the table unless `o.quiet` (quiet, a
/// failure in one line on stderr), the JSON in `o.json_out` when set. The run's exit code: ok
/// when the summary says so, else failed.
int report_run(const actors::run_summary& sum, const actors::run_settings& o, const cluster& cl);

}  // namespace tessera::cli
