#pragma once
/// @file run_command.hpp
/// `tessera run`'s command line in one call: parses the options, then runs the job set with
/// the actor runtime (actors/run.hpp) under mpirun, as a local run of `--local N` processes,
/// or as one node process of such a run. `tessera run` is this call; a researcher's own node
/// binary (examples/custom_trainable) makes it with its own trainable kinds.

#include <string>
#include <vector>

#include "actors/run.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::cli {

/// Runs `tessera run` with the arguments after the command name. `kinds` are the trainable
/// kinds jobs may name (the built-ins, plus a researcher's own). `exec_prefix` are the
/// arguments that select this command when the binary is executed again for `--local`
/// (e.g. {"run"} for tessera, {} for a program whose main is this command). `setup` adjusts
/// each node before it starts, `sched_setup` the scheduler (tests and benchmarks only).
/// `serve` makes it `tessera serve` (a cluster that stays up; its job file optional). Returns
/// the exit code.
int run_command(const std::vector<std::string>& args, const train::trainable_registry& kinds,
                const std::vector<std::string>& exec_prefix, const actors::node_setup& setup = {},
                const actors::scheduler_setup& sched_setup = {}, bool serve = false);

}  // namespace tessera::cli
