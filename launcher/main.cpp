/// @file main.cpp
/// The `tessera` command line: dispatches to the sub-commands.

#include <iostream>
#include <string>
#include <vector>

#include "launcher/commands.hpp"
#include "runtime/core/result.hpp"

namespace {

const char* usage =
    "usage: tessera <command> [options]\n"
    "\n"
    "commands:\n"
    "  simulate         run one policy on a trace in the simulator and print its metrics\n"
    "  compare          run several policies on one trace and print one table\n"
    "  sweep            simulate policies x rates x seeds in parallel (resumable), one CSV\n"
    "  plot             draw JCT vs rate, JCT CDFs, utilisation and Gantt charts (PNG, SVG)\n"
    "  trace generate   write a synthetic trace with Gavel's recipe\n"
    "  trace import     a production trace (helios, philly, pai) or Sia's workload as a trace\n"
    "  table import     a throughput table from Sia's measurements (sia)\n"
    "  cluster          write the cluster file of a Slurm allocation (from-slurm)\n"
    "  policies         list the registered policies and their options\n"
    "  run              run a job set on node processes (under mpirun, or --local N)\n"
    "  node             join a running cluster as one of its nodes (--join HOST:PORT)\n"
    "  mpirun           a run under mpirun --enable-recovery, exiting with the run's outcome\n"
    "  serve            a cluster that stays up, with a control API and dashboard\n"
    "  submit           submit a job set to a served cluster\n"
    "  status           jobs of a served cluster (or one job's history)\n"
    "  cancel           cancel a job at the next round boundary\n"
    "  nodes            the nodes of a served cluster\n"
    "  watch            a live table of a served cluster's jobs and nodes\n"
    "  shutdown         stop a served cluster after the round in flight\n"
    "\n"
    "`tessera <command> --help` describes a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << usage;
    return args.empty() ? tessera::exit_code::bad_input : tessera::exit_code::ok;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  using namespace tessera::cli;
  if (cmd == "simulate") return cmd_simulate(rest);
  if (cmd == "compare") return cmd_compare(rest);
  if (cmd == "sweep") return cmd_sweep(rest);
  if (cmd == "plot") return cmd_plot(rest);
  if (cmd == "trace") return cmd_trace(rest);
  if (cmd == "cluster") return cmd_cluster(rest);
  if (cmd == "table") return cmd_table(rest);
  if (cmd == "policies") return cmd_policies(rest);
  if (cmd == "submit") return cmd_submit(rest);
  if (cmd == "status") return cmd_status(rest);
  if (cmd == "cancel") return cmd_cancel(rest);
  if (cmd == "nodes") return cmd_nodes(rest);
  if (cmd == "watch") return cmd_watch(rest);
  if (cmd == "shutdown") return cmd_shutdown(rest);
#ifdef TESSERA_WITH_ACTORS
  if (cmd == "run") return cmd_run(rest);
  if (cmd == "node") return cmd_node(rest);
  if (cmd == "mpirun") return cmd_mpirun(rest);
  if (cmd == "serve") return cmd_serve(rest);
#else
  if (cmd == "run" || cmd == "node" || cmd == "mpirun" || cmd == "serve") {
    std::cerr << "tessera: this build has no actor runtime (CAF 0.17 and MPI were not found)\n";
    return tessera::exit_code::bad_input;
  }
#endif
  std::cerr << "tessera: unknown command '" << cmd << "'\n" << usage;
  return tessera::exit_code::bad_input;
}
