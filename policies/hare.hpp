#pragma once
/// @file hare.hpp
/// Hare (Chen, Li, Wu, Guo: HPDC'22; "Non-clairvoyant scheduling of distributed machine
/// learning with inter-job and intra-job parallelism on heterogeneous GPUs", IEEE TCC'24),
/// online policy `hare`: HLAS, heterogeneity-aware least attained service, over task splits.
/// Built from summaries of the papers; the published text we could read names the policy,
/// not its details, so the formulation below is ours.
///
/// Relaxed fixed-scale synchronisation. A job of scale K runs each step as K independent tasks
/// and synchronises when all K are done, so within a round its K tasks may go on any GPUs:
/// several back to back on one fast GPU, some on a slower type. The simulator's time model
/// (runtime/core/task_split.hpp) is: one task on server u takes tau_u = 1 / rate_at(u, job type,
/// K, multi) seconds (the table's whole-job rate at scale K there, `multi` when the job's
/// tasks span servers), and the step takes max over the job's GPUs of (tasks on it x tau).
///
/// Service (what "least attained" counts). Work done, in ideal GPU-seconds:
///     service_m = steps_done_m * K_m / best_m / w_m,
/// best_m = max over GPU types of the job's throughput as policies see it (steps/s at scale K,
/// times the type's mean speed factor), w_m its priority weight. A job that ran t seconds as a
/// gang on K GPUs of a type with throughput T_j has done T_j t steps, so its service is
/// K t T_j / best_m: GPU-seconds weighted by that GPU type's speed for the job relative to its
/// fastest. The same holds for a task split whose GPUs stay busy: K tasks back to back on
/// one GPU of type j for t seconds make t T_j / K steps, i.e. service t T_j / best_m, one
/// GPU-second weighted by T_j / best_m. GPUs that idle while a step
/// waits for a slower task earn nothing, so service measures work, not occupancy. It is
/// computed from the snapshot alone (steps done), so the policy keeps no accounting of its own
/// and sees the same service under the simulator and the actor runtime.
///
/// Order: service ascending (least attained first), then arrival, then id. LAS is
/// non-clairvoyant: it never reads remaining steps.
///
/// Filling, task by task (per round, jobs in that order, on the GPUs still free): each job
/// takes the placement of its K tasks with the shortest step time among
///  (a) for each server u with free GPUs: its K tasks spread evenly over g = min(K, free_u)
///      GPUs of u, i.e. ceil(K/g) tasks on the busiest (step ceil(K/g) tau_u, consolidated),
///      using the fewest GPUs that give that step time;
///  (b) a greedy over all servers (K > 1): each task in turn goes where it would finish
///      earliest, on one of the job's GPUs already holding tasks (one more task back to back)
///      or on a free GPU, with spanning (multi-server) task times. For identical unit tasks on
///      machines of different speeds this earliest-finish rule gives the shortest makespan
///      (the step time) on the machines it may use; so a job gets its fastest GPUs first,
///      stacks several tasks on a fast GPU while that beats a slower GPU, and spills onto a
///      slower type when it does not.
/// Ties: fewer GPUs, then fewer servers, then the job's servers of the previous round (no
/// restart), then the fastest, best-fitting server. Every job that can use a free GPU is
/// placed (a job needs one free GPU, not K), so the least-served job waits only when every
/// GPU it can use is held by jobs with less or equal service.
///
/// Option `relaxed` = 0 (ablation): one task per GPU, i.e. K GPUs (a gang, possibly over
/// servers and types, at the slowest one's speed) or nothing: HLAS without relaxed
/// synchronisation.
///
/// Complexity per round, M active jobs, S servers: O(M log M) order and O(S) to bucket the
/// servers' free GPUs (policies/server_index.hpp); then per job placed, with C server
/// classes (servers every job values equally) and F GPUs per server, O(C F + K (K + C F))
/// bucket look-ups of O(log S), not a scan of the S servers: the scan order (task time, free
/// GPUs, id) is the same, so the plans are too. Per-server task times are cached per
/// (job type, K) while the throughput model does not change.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "policies/options.hpp"
#include "policies/server_index.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// Work a job has done, in ideal GPU-seconds over its priority weight:
/// steps_done x K / best / w (0 when it has no throughput anywhere).
double hare_service(const job_view& jv);

/// The job's best throughput as policies see it: max over GPU types of `jv.throughput`.
double hare_best_rate(const job_view& jv);

/// Settings of the task filling shared by `hare` and `hare_offline`.
struct hare_fill_params {
  bool relaxed = true;  ///< tasks may share a GPU (false: one task per GPU, K GPUs or none)
};

/// Per-server task times of one (job type, scale) pair, cached across rounds.
class hare_task_times {
 public:
  /// Drops cached times when the cluster or the throughput model changed, and every round
  /// when the snapshot has no throughput model (times then come from each job's own view).
  void refresh(const snapshot& s);
  /// Seconds per task on each server (single-server and spanning), +infinity where the job
  /// cannot run; from `s.rates` when set, else from the job's per-type view scaled by speed.
  const std::pair<std::vector<double>, std::vector<double>>& get(const snapshot& s,
                                                                 const job_view& jv);
  /// Servers no job seen since the last reset tells apart (equal task times for every cached
  /// (job type, scale)); refined by every `get` that computes new times.
  const server_classes& classes() const { return classes_; }

 private:
  std::unordered_map<std::string, std::pair<std::vector<double>, std::vector<double>>> cache_;
  server_classes classes_;
  const void* cached_rates_ = nullptr;
  const cluster* cached_cluster_ = nullptr;
  std::uint64_t cached_version_ = 0;
};

/// One round's filling in progress: the GPUs still free per server and the plan so far. Each
/// `place` puts one job copy's K tasks on the free GPUs by this header's rule.
class hare_filler {
 public:
  /// Starts a round on `s` with every GPU free (refreshes `times`, which must outlive this).
  hare_filler(const snapshot& s, const hare_fill_params& p, hare_task_times& times);
  /// Places copy `copy` of job s.jobs[idx] on the free GPUs of servers not in `avoid`, the
  /// best placement by this header's rule, if `accept` (when given) approves its step time.
  /// Returns the step time in seconds of the placement made, +infinity when none was.
  double place(std::size_t idx, int copy = 0, const std::set<int>& avoid = {},
               const std::function<bool(double)>& accept = {});
  /// Places copy 0 of job s.jobs[idx] exactly where it ran last round (every part of its
  /// last assignment), if all those GPUs are still free; returns whether it did.
  bool keep(std::size_t idx);
  /// Free GPUs left over all servers.
  int free_total() const { return free_total_; }
  /// The servers holding any copy of `job` in the plan so far (empty when none).
  const std::set<int>& servers_of(job_id job) const;
  /// The plan so far (assignments with tasks > 0).
  const round_plan& plan() const { return plan_; }
  /// Hands over the plan.
  round_plan take_plan() { return std::move(plan_); }

 private:
  /// The job's task times (times_.get), with the free-GPU buckets rebuilt when that split
  /// the server classes (or on the round's first call).
  const std::pair<std::vector<double>, std::vector<double>>& task_times(const job_view& jv);
  /// Takes g GPUs of server u.
  void take(int u, int g);

  const snapshot& s_;
  hare_fill_params p_;
  hare_task_times& times_;
  std::vector<int> free_;
  free_buckets buckets_;               ///< free_ by (server class, free count)
  std::uint64_t buckets_version_ = 0;  ///< the classes' version buckets_ was built for
  int free_total_ = 0;
  std::map<copy_id, std::set<int>> previous_;  ///< each copy's servers in the last round
  std::map<job_id, std::set<int>> used_;       ///< each job's servers in the plan so far
  round_plan plan_;
};

/// Places the jobs `order` (indices into s.jobs, highest priority first) task by task on the
/// cluster's GPUs as described in this header, each job in turn on the GPUs still free.
/// Returns the round plan (assignments with tasks > 0, one per server and tasks-per-GPU
/// count of a job).
round_plan hare_fill(const snapshot& s, const std::vector<std::size_t>& order,
                     const hare_fill_params& p, hare_task_times& times);

/// A policy that orders the active jobs by `key` ascending (ties: arrival, then id) and
/// places them in that order with hare_fill: `hare` (key: hare_service) and `hare_offline`
/// (key: hare_remaining_work).
std::unique_ptr<policy> make_hare_ordered(std::string name,
                                          std::function<double(const job_view&)> key,
                                          hare_fill_params p);

/// `hare`'s options: relaxed.
std::vector<option_spec> hare_options();
/// Builds `hare` named `name`.
std::unique_ptr<policy> make_hare(const std::string& name, const options& o);

}  // namespace tessera
