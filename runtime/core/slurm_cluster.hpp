#pragma once
/// @file slurm_cluster.hpp
/// A cluster built from a Slurm allocation: the nodes Slurm granted (SLURM_JOB_NODELIST), the
/// tasks it starts on each (SLURM_TASKS_PER_NODE) and the GPUs of each node (the GRES lines of
/// `scontrol show job -d`, else the job's environment, else what the operator says). Plain
/// functions on text, so every rule is tested without a Slurm.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// Expands a Slurm host list ("gpu[01-03,7],cpu-a,n[1-2]-ib") into host names, in order.
/// Errors name the list and what is wrong with it (an unclosed bracket, a reversed range).
result<std::vector<std::string>> expand_hostlist(const std::string& list);

/// Expands SLURM_TASKS_PER_NODE ("2(x3),1") into one count per node; an error when the
/// counts do not cover exactly `nodes` nodes.
result<std::vector<int>> expand_tasks_per_node(const std::string& spec, std::size_t nodes);

/// The GPUs Slurm granted on one node.
struct node_gpus {
  std::string type;  ///< GRES type, lower-case ("a100"); empty when Slurm named none
  int count = 0;
};

/// The per-node GPU grants in `scontrol show job -d` output: lines of the form
/// "Nodes=n[1-2] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:4(IDX:0-3)" (GRES may also read
/// "gpu:4(IDX:..)" or "gpu(CNT:4)"). Nodes without a GRES entry are absent.
result<std::map<std::string, node_gpus>> parse_job_gres(const std::string& scontrol_text);

/// What a cluster file needs from an allocation.
struct slurm_allocation {
  std::vector<std::string> nodes;
  std::vector<int> tasks_per_node;  ///< one per node
  std::vector<node_gpus> gpus;      ///< one per node
  std::size_t spare = 0;  ///< the last `spare` nodes are not in the allocation (add_spare)
};

/// Adds a server the allocation does not hold, for a node that joins later (`tessera node
/// --join`, e.g. from a second sbatch): `spec` is "NAME:TYPE:GPUS" ("n4:a100:4"). An error
/// names the spec when it is malformed or names a node already listed.
status add_spare(slurm_allocation& a, const std::string& spec);

/// Fallbacks for what Slurm does not say.
struct slurm_defaults {
  std::string gpu_type;  ///< for nodes whose GRES names no type (empty: an error)
  int gpus = 0;          ///< for nodes without a GPU grant (0: an error)
};

/// Reads the allocation from the job's environment (`env(name)`, nullopt when unset) and the
/// text of `scontrol show job -d` (empty when not available). An error names the variable or
/// the node that lacks what a cluster file needs, and how to give it.
result<slurm_allocation> read_slurm_allocation(
    const std::function<std::optional<std::string>(const std::string&)>& env,
    const std::string& scontrol_text, const slurm_defaults& defaults);

/// Why this process must not run as one of an srun step's tasks, or "": Slurm started
/// SLURM_STEP_NUM_TASKS > 1 tasks but no MPI process manager is in sight (`under_mpi` false),
/// so each task would be a world of one, every one of them a rank 0 (srun without a PMI
/// plugin). The message names the fix.
std::string slurm_step_problem(
    const std::function<std::optional<std::string>(const std::string&)>& env, bool under_mpi);

/// The speed factor of a GPU type: the geometric mean, over the table's single-GPU job types
/// that both know, of its throughput over `reference`'s; nullopt when the table cannot say.
std::optional<double> type_speed(const throughput_table& table, const std::string& gpu_type,
                                 const std::string& reference);

/// A cluster file (TOML, with comments saying where each value came from) for `a`: one server
/// per node, named as Slurm names it, speeds from `table` relative to `reference`.
std::string slurm_cluster_toml(const slurm_allocation& a, const throughput_table& table,
                               const std::string& reference);

}  // namespace tessera
