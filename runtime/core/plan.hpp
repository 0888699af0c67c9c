#pragma once
/// @file plan.hpp
/// The seam between policies and executors: a read-only `snapshot` of the cluster and its
/// jobs goes in, a `round_plan` comes out. Gavel-style policies produce an `allocation` (time
/// fractions per GPU type) which the shared mechanism turns into a round plan.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/core/model.hpp"

namespace tessera {

class server_throughput;  // runtime/core/server_throughput.hpp
struct copy_efficiency;   // runtime/core/copy_efficiency.hpp

/// What a policy may know of one active (arrived, unfinished) job.
struct job_view {
  const job* spec = nullptr;    ///< the job as submitted
  double steps_done = 0;        ///< progress so far
  double remaining_steps = 0;   ///< total_steps - steps_done
  double run_time = 0;          ///< wall seconds the job has run
  double attained_service = 0;  ///< GPU-seconds received (gpus x seconds)
  /// Throughput (steps/s of the whole job at its scale factor) on each GPU type of the
  /// cluster, indexed like cluster::types, already multiplied by the type's mean speed factor.
  /// 0 means the job cannot run on that type.
  std::vector<double> throughput;
  int last_type = -1;  ///< GPU type it ran on in the previous round, -1 if none
  /// Seconds the executor idles the job each time it starts on new GPUs (the simulator's
  /// restart cost for its type; 0 where the executor does not say). Sia keeps a job where
  /// it is while its restart is still under way.
  double restart_seconds = 0;
};

/// One copy of a job: the job and the copy's index (0 unless the job is forked, HadarE). What
/// runs for a round is identified by it everywhere: plans, executors' progress, nodes' slots.
struct copy_id {
  job_id job = 0;
  int copy = 0;
  friend bool operator==(copy_id a, copy_id b) { return a.job == b.job && a.copy == b.copy; }
  friend bool operator!=(copy_id a, copy_id b) { return !(a == b); }
  /// By job, then copy.
  friend bool operator<(copy_id a, copy_id b) {
    return a.job != b.job ? a.job < b.job : a.copy < b.copy;
  }
};

/// One server's share of a job copy's GPUs.
struct server_share {
  int server = 0;
  int gpus = 0;
  bool operator==(const server_share& o) const { return server == o.server && gpus == o.gpus; }
};

/// Where one copy of a job runs for one round.
struct assignment {
  job_id job = 0;
  int copy = 0;                      ///< 0 unless the job is forked (HadarE)
  int type = -1;                     ///< GPU type index when all shares are one type, else -1
  std::vector<server_share> shares;  ///< servers and GPU counts; sum = GPUs used
  /// Tasks per step placed here (Hare); 0 = scale factor (a gang, one task per GPU). Several
  /// assignments of one (job, copy), each with tasks > 0, form a task split: their tasks sum
  /// to the scale factor, a GPU runs its tasks back to back and a step ends when its last task
  /// does (runtime/core/task_split.hpp).
  int tasks = 0;
  double step_budget = -1;  ///< cap on steps this round, -1 = none
  /// Space sharing (Gavel's "_packed" policies): the job sharing every GPU of this placement,
  /// -1 = none. A pair is two assignments, one per job (copy 0, tasks 0), with the same type
  /// and shares, each naming the other; the pair's GPUs count once against the servers, and
  /// each job runs at its co-located throughput (server_throughput::colocated_rate).
  job_id partner = -1;

  /// The job copy it places.
  copy_id id() const { return {job, copy}; }
  /// GPUs over all shares.
  int gpus() const {
    int n = 0;
    for (const auto& s : shares) n += s.gpus;
    return n;
  }
};

/// The placements of one round.
struct round_plan {
  double start = 0;   ///< round start time (s)
  double length = 0;  ///< round length (s)
  std::vector<assignment> assignments;
};

/// Everything a policy may read to plan a round. Jobs are the active ones, ordered by arrival
/// (ties by id).
struct snapshot {
  double now = 0;             ///< round start time (s)
  double round_length = 360;  ///< seconds
  const cluster* cl = nullptr;
  std::vector<job_view> jobs;
  const round_plan* last_plan = nullptr;  ///< the previous round's plan, or nullptr
  /// Changes whenever the set of active jobs changes (arrival or completion), so a policy can
  /// cache work that depends only on the job set.
  std::uint64_t job_set_version = 0;
  /// Per-server throughput estimates (server table, GPU-type table, analytic model) that the
  /// executor runs plans with, or nullptr when the executor provides none. Policies that place
  /// by server entity (hops) read it; the Gavel family uses `job_view::throughput`.
  const server_throughput* rates = nullptr;
  /// Most copies per job the executor can run (0 = no limit). The actor runtime sets 1 when
  /// its nodes cannot merge copies (no aggregator, e.g. --local); forking policies obey it
  /// (fork_limit), as they obey each job's own job::max_copies.
  int copy_limit = 0;
  /// How the executor values a forked job's copies (runtime/core/copy_efficiency.hpp): its
  /// progress is fork_efficiency->factor(job type, copies) times the sum of their steps. A
  /// policy deciding whether a fork pays reads it; nullptr = copies counted in full.
  const copy_efficiency* fork_efficiency = nullptr;
};

/// Space sharing: the fraction of wall time two jobs (indices a < b into snapshot::jobs, of
/// equal scale factor) should share each GPU type, x[j], both at their co-located throughputs.
struct pair_allocation {
  std::size_t a = 0, b = 0;
  std::vector<double> x;
};

/// Time fractions per job and GPU type: x[m][j] = fraction of wall time job m (index into
/// snapshot::jobs) should run alone on type j, and `pairs` the fractions jobs share GPUs
/// (empty unless the policy packs). For each job, its x row plus the pairs it is in sum to at
/// most 1; for each type, sum_m scale_m * x[m][j] + sum_pairs scale * x[j] <= gpus_j.
struct allocation {
  allocation() = default;
  /// Fractions alone only (no pairs).
  allocation(std::vector<std::vector<double>> alone) : x(std::move(alone)) {}
  std::vector<std::vector<double>> x;
  std::vector<pair_allocation> pairs;
};

/// Most copies a policy whose own limit is `policy_max` may fork job `j` into this round: the
/// least of its limit, the executor's (snapshot::copy_limit) and the job's (job::max_copies),
/// ignoring those that are 0 (no limit).
inline int fork_limit(const snapshot& s, const job& j, int policy_max) {
  int most = policy_max;
  if (s.copy_limit > 0) most = std::min(most, s.copy_limit);
  if (j.max_copies > 0) most = std::min(most, j.max_copies);
  return std::max(1, most);
}

}  // namespace tessera
