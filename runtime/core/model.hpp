#pragma once
/// @file model.hpp
/// The cluster and job model shared by the simulator, the policies and the actor runtime.

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Identifies a job; for a trace it is the job's 0-based line index, as in Gavel.
using job_id = std::int64_t;

/// One server: a number of GPUs of one type and a speed factor relative to the type's
/// table throughput (1.0 = as measured; 0.5 = half as fast).
struct server {
  int id = 0;            ///< index in cluster::servers
  std::string name;      ///< e.g. "v100-3"
  std::string gpu_type;  ///< lower-case type name, e.g. "v100"
  int type_index = 0;    ///< index into cluster::types
  int gpus = 0;          ///< GPUs on this server
  double speed = 1.0;    ///< speed factor (> 0)
};

/// A GPU type and how many GPUs of it the cluster has in total.
struct gpu_type {
  std::string name;         ///< lower-case, as in the throughput table ("v100")
  int gpus = 0;             ///< total GPUs of this type
  double mean_speed = 1.0;  ///< GPU-weighted mean of its servers' speed factors
};

/// A cluster: servers, and the GPU types they hold. Build one with `make_cluster`.
struct cluster {
  std::vector<server> servers;
  std::vector<gpu_type> types;

  /// Total GPUs over all servers.
  int total_gpus() const;
  /// Index of a GPU type by name, or -1.
  int type_index(const std::string& name) const;
};

/// Fills ids, type indices and the type table of a cluster from its servers. Types are kept in
/// the order they first appear.
cluster make_cluster(std::vector<server> servers);

/// One training job as a trace or a job file describes it. The extra Gavel fields (command,
/// working directory, ...) are carried so a trace written by tessera runs in Gavel's simulator.
struct job {
  job_id id = 0;
  std::string job_type;        ///< e.g. "ResNet-18 (batch size 64)"
  int scale_factor = 1;        ///< GPUs (or tasks) per step
  double total_steps = 0;      ///< steps to train
  double arrival = 0;          ///< seconds since the start of the trace
  double priority_weight = 1;  ///< w_m in the fairness objectives
  double slo = -1;             ///< deadline in seconds, -1 for none
  /// GPU counts the job accepts (Hops' user requirement set), e.g. {2, 4, 8}; empty means
  /// {scale_factor}. Only policies that choose a job's GPU count (hops) read it; the others
  /// always give the job scale_factor GPUs.
  std::vector<int> acceptable_gpus;
  /// Most copies a policy may fork the job into (HadarE; 0 = as many as the policy likes, 1 =
  /// never forked). A job file's `max_copies`; a program job is 1 unless it says otherwise,
  /// since its copies merge only if the program calls `average`. validate_plan enforces it.
  int max_copies = 0;
  // Gavel trace fields, kept for round trips.
  std::string command;
  std::string working_dir;
  std::string num_steps_arg;
  bool needs_data_dir = true;
};

/// The GPU counts a job accepts, sorted and without repeats: `acceptable_gpus` (positive
/// entries only) or, when that names none, {scale_factor}.
std::vector<int> gpu_options(const job& j);

}  // namespace tessera
