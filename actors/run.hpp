#pragma once
/// @file run.hpp
/// `tessera run`: runs a job set on real node processes with the actor runtime.
///
/// Process layouts (one node per server of the cluster file; rank i is server i):
/// - under `mpirun -np N`: rank 0 hosts the scheduler and a node, every other rank a node. The
///   scheduler's CAF port is published on an ephemeral port and broadcast over MPI (MPI_Bcast);
///   from then on only CAF messages flow. Add `--enable-recovery` to mpirun for a run to
///   survive a node process dying (otherwise mpirun itself aborts every rank).
/// - `--local N`: this process hosts the scheduler and node 0 and starts N-1 node processes
///   itself (fork/exec of the same binary, no mpirun).
/// - neither: `--local 1`.
/// Rank 0 prints a summary (per-job JCT, final loss and accuracy) and exits 0 when every job
/// finished, 1 when the run failed, 2 on bad input.

#include <string>
#include <vector>

#include "runtime/train/trainable.hpp"

namespace tessera::actors {

/// Runs `tessera run` with the arguments after the command name. `kinds` are the trainable
/// kinds jobs may name (the built-ins, plus a researcher's own). `exec_prefix` are the
/// arguments that select this command when the binary is executed again for `--local`
/// (e.g. {"run"} for tessera, {} for a program whose main is this command). Returns the exit
/// code.
int run_command(const std::vector<std::string>& args, const train::trainable_registry& kinds,
                const std::vector<std::string>& exec_prefix);

}  // namespace tessera::actors
