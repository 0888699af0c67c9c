#pragma once
/// @file commands.hpp
/// The `tessera` sub-commands. Each takes the arguments after its name and returns the exit
/// code (runtime/core/result.hpp's exit_code: 0 ok, 1 run failed, 2 bad input).

#include <string>
#include <vector>

namespace tessera::cli {

int cmd_simulate(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
/// `tessera sweep`: policies x rates x seeds in parallel, resumable (launcher/cmd_sweep.cpp).
int cmd_sweep(const std::vector<std::string>& args);
/// `tessera plot`: figures from a sweep, per-job CSVs and timelines (scripts/plot.py).
int cmd_plot(const std::vector<std::string>& args);
int cmd_trace(const std::vector<std::string>& args);
/// `tessera trace import FORMAT FILE -o OUT` (launcher/cmd_trace_import.cpp); `args` after
/// "import".
int cmd_trace_import(const std::vector<std::string>& args);
/// `tessera table import sia`: a throughput table from Sia's measurements (launcher/cmd_table.cpp).
int cmd_table(const std::vector<std::string>& args);
/// `tessera cluster from-slurm`: the cluster file of the Slurm allocation it runs in.
int cmd_cluster(const std::vector<std::string>& args);
int cmd_policies(const std::vector<std::string>& args);
/// `tessera run`: runs a job set on node processes (mpirun or --local).
int cmd_run(const std::vector<std::string>& args);
/// `tessera node`: one node joining a running cluster (`tessera run --join`).
int cmd_node(const std::vector<std::string>& args);

/// `tessera serve`: a cluster that stays up (launcher/cmd_run.cpp).
int cmd_serve(const std::vector<std::string>& args);

/// The control API's clients (launcher/cmd_client.cpp, docs/api.md).
int cmd_submit(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
int cmd_cancel(const std::vector<std::string>& args);
int cmd_nodes(const std::vector<std::string>& args);
int cmd_watch(const std::vector<std::string>& args);
int cmd_shutdown(const std::vector<std::string>& args);
/// `tessera mpirun`: a run under mpirun's recovery mode that exits with the run's outcome.
int cmd_mpirun(const std::vector<std::string>& args);

}  // namespace tessera::cli
