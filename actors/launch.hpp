#pragma once
/// @file launch.hpp
/// The pieces both process layouts of a run share (internal to actors/; the entry points are
/// actors/run.hpp): the run's inputs, the cluster secret, hosting the scheduler and node 0
/// (rank 0), and connecting a node process to the scheduler and running its node. The local
/// layout (fork/exec) is actors/launch_local.cpp, the mpirun one actors/launch_mpi.cpp.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/auth.hpp"
#include "actors/run.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/node/comm/aggregator.hpp"

namespace tessera::actors::launch {

/// This host's name ("localhost" when it has none).
std::string host_name();

/// Inputs every process loads: the cluster, the jobs, the policy.
struct run_inputs {
  cluster cl;
  std::vector<run_job> jobs;
  std::shared_ptr<policy> pol;
  std::vector<std::string> kinds;
  gpu::node_gpus gpus;  ///< this process's node's GPUs (find_node_gpus)
  /// Co-location ratios for the live rate model (the bundled table), so a packing policy
  /// can pair jobs whose job types the table pairs; null on a joining node.
  std::shared_ptr<const throughput_table> colocation;
};

/// Loads and checks the inputs; an error message naming the file and field on failure.
result<run_inputs> load_inputs(const run_settings& o, const train::trainable_registry& kinds);

/// Discovers this process's GPUs for node `rank` (runtime/node/gpu/discovery.hpp) into `in.gpus`;
/// the check's error when they disagree with its server entry. Says what the node runs on
/// when it found GPUs (or, verbose, why it found none).
status find_node_gpus(const run_settings& o, run_inputs& in, int rank);

/// "cluster file lists K servers but the run has N node processes" when they differ.
std::optional<std::string> check_size(const run_settings& o, const cluster& cl, int n,
                                      const std::string& how);

/// A fresh secret, also written to `s.secret_file` when set (for joining nodes); null after
/// printing why when either fails.
std::optional<secret_key> run_secret(const run_settings& s);

/// Hosts the scheduler (and node 0) in this process. `start_nodes` starts the other nodes once
/// the gate's port is known (fork/exec or MPI_Bcast) and returns false when it could not (it is
/// called with port 0 when the scheduler could not open). `agg` merges forked copies (the
/// MPI backend); null when the launch has none, and then the scheduler does not fork. The
/// run's summary goes to `o.report`.
int run_rank0(const run_settings& o, const run_inputs& in, const train::trainable_registry& kinds,
              const node_setup& setup, const scheduler_setup& sched_setup,
              const std::function<bool(int port)>& start_nodes, const secret_key& key,
              const std::string& bind, std::shared_ptr<comm::aggregator> agg = nullptr);

/// Connects to the scheduler at host:port and runs node `rank` until the run ends.
int connect_and_run_node(const run_settings& s, const run_inputs& in, int rank,
                         const std::string& host, int port, const train::trainable_registry& kinds,
                         const node_setup& setup, std::shared_ptr<comm::aggregator> agg,
                         const secret_key& key);

}  // namespace tessera::actors::launch
