#pragma once
/// @file hops_internal.hpp
/// Pieces of the Hops policy (policies/hops.hpp) shared by its source files: server classes
/// and their cached rates (step 1), the queued jobs of a round (step 2), and the greedy pass
/// and fragment filling (step 6, in hops_packing.cpp). Internal to policies/hops*.cpp: not
/// part of the public API.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "policies/hops_ilp.hpp"
#include "runtime/core/id_table.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera::detail {

/// Appends the bytes of `x` to `key` (hash keys made of fields).
template <class T>
void append_bytes(std::string& key, const T& x) {
  char b[sizeof x];
  std::memcpy(b, &x, sizeof x);
  key.append(b, sizeof x);
}

/// Merges shares on the same server and sorts them by server id, so that an unchanged
/// placement compares equal to the previous round's.
std::vector<server_share> normalised_shares(std::vector<server_share> v);

/// The snapshot's contract: a GPU type where the job's throughput is 0 is one it cannot run
/// on (no table entry, or fewer GPUs of the type than the job needs).
bool hops_may_run_on(const cluster& cl, const job_view& jv, int server);

/// Rates of one (job type, GPU count) on every class.
struct hops_class_rates {
  std::vector<double> single;  ///< one-server configuration, 0 where a server is too small
  std::vector<double> multi;   ///< configuration spanning servers (0 for one GPU)
  double sensitivity = 1.0;    ///< on the class with the best one-server rate
  bool fits_one_server = false;
};

/// The cluster's server classes (servers with the same GPU type, speed factor and size, and
/// no measurements of their own) and the per-class rates of (job type, GPU count) pairs,
/// cached while the cluster and the throughput model stay the same.
class hops_server_classes {
 public:
  /// Rebuilds the classes (and drops the cached rates) when the cluster, the throughput
  /// model or its measurements changed, or when `force` (a model that may sit where an old
  /// one did).
  void refresh(const snapshot& s, const server_throughput& rt, bool force);
  /// The classes, in order of their first server.
  const std::vector<hops_class>& classes() const { return classes_; }
  /// The class of a server, -1 for an unknown id.
  int class_of(int server) const {
    return server >= 0 && server < static_cast<int>(class_of_.size()) ? class_of_[server] : -1;
  }
  /// Rates of `gpus` GPUs of `job_type` on every class (cached).
  const hops_class_rates& rates_for(const std::string& job_type, int gpus);
  /// Counts the rebuilds of the classes: what was derived from them is stale when it moved.
  std::uint64_t generation() const { return generation_; }

 private:
  std::vector<hops_class> classes_;
  std::vector<int> class_of_;  ///< per server
  const server_throughput* rt_ = nullptr;
  std::uint64_t rt_version_ = 0;
  const cluster* classes_for_ = nullptr;
  std::uint64_t generation_ = 0;
  /// (job type, GPUs) -> per-class rates, cleared when the classes or measurements change.
  std::unordered_map<std::string, std::unique_ptr<hops_class_rates>> cache_;
};

/// A job's configurations (step 2): a function of its type, scale, acceptable GPU counts and
/// last-round placement key only, so one set serves every job and round with the same.
struct hops_config_set {
  std::vector<hops_config> configs;
  std::vector<int> counts;  ///< GPU counts with at least one configuration, ascending
  double best = 0;          ///< the best throughput of the job's whole set (before pinning)
  bool pinned = false;      ///< only the staying configurations (option restart_amortize)
};

/// Step 2's configuration sets, kept across rounds: per job, the set of its last look-up and
/// the placement key it was built for; per distinct (type, scale, GPU counts, placement key),
/// one set. A round's cost is then a key comparison per job, and building a set only where a
/// job's placement changed. Cleared when the server classes change (a new cluster or
/// throughput model, or new measurements in it): a job's runnable classes and rates come from
/// that model, so they stay while it does. An entry made for another job object (a new `job`
/// for the same id) is rebuilt.
class hops_config_sets {
 public:
  /// What a set depends on besides the job and the classes.
  struct params {
    double sensitivity_threshold = 1.4;
    bool split_configs = true;
  };
  /// Forgets every set.
  void clear();
  /// Forgets the per-job entries (not the shared sets) once there are more than `limit`:
  /// jobs that have left keep theirs until then.
  void trim(std::size_t limit) {
    if (jobs_.size() > limit) jobs_ = id_table<job_entry>();
  }
  /// The configurations of job `jv` given its last-round assignment `was` (or null), pinned
  /// to its staying ones when `pin` and it has any; null when it has none (no estimate
  /// anywhere, or too big for the cluster).
  const hops_config_set* get(const cluster& cl, hops_server_classes& classes, const params& p,
                             const job_view& jv, const assignment* was, bool pin);

 private:
  struct job_entry {
    const job* spec = nullptr;  ///< the job the entry was made for
    std::uint64_t key = 0;      ///< its placement key then
    const hops_config_set* set = nullptr;
  };
  /// The shared set for `jv` at placement key `key` (built on a miss).
  const hops_config_set* intern(const cluster& cl, hops_server_classes& classes, const params& p,
                                const job_view& jv, const assignment* was, int was_class, bool pin,
                                std::uint64_t key);

  id_table<job_entry> jobs_;
  std::unordered_map<std::string, std::unique_ptr<hops_config_set>> sets_;
  std::string scratch_;
};

/// A job in a round's queue, with its configurations and queue keys.
struct hops_candidate {
  std::size_t m = 0;                     ///< index into snapshot::jobs
  double lr = 0;                         ///< latency ratio
  double prio = 0;                       ///< queue key: lr, plus the margin for a running job
  double remaining = 0;                  ///< remaining steps / best configuration throughput (s)
  bool critical = false;                 ///< makespan-critical (option critical_slack)
  const hops_config_set* set = nullptr;  ///< its configurations (never null in a queue)

  const std::vector<hops_config>& configs() const { return set->configs; }
  const std::vector<int>& counts() const { return set->counts; }
  /// Keeps its placement (option restart_amortize): its set is its staying configurations.
  bool pinned() const { return set->pinned; }
  /// The smallest of its GPU counts.
  int min_need() const { return set->counts.front(); }
};

/// The placements of one round: the queue, each queued job's shares in the last round and
/// its placement so far, and the GPUs still free on each server.
struct hops_round_state {
  std::vector<hops_candidate> queue;
  std::vector<std::vector<server_share>> previous;  ///< per queue position
  std::vector<std::vector<server_share>> placed;    ///< per queue position; empty: unplaced
  std::vector<int> free_gpus;                       ///< per server id
  /// True when queue job i held GPUs on `server` in the last round.
  bool on_previous(std::size_t i, int server) const;
};

/// The greedy pass (the ablation `use_ilp` = 0, and the fallback when CBC finds nothing):
/// the first `window` queue jobs in order, each on its best-valued configuration (`value`
/// per job and configuration) that fits in the free GPUs; whole servers go to its previous
/// ones first, then in ascending id, and partial shares to its previous servers, else best
/// fit.
void hops_greedy_place(const std::vector<hops_class>& classes, std::size_t window,
                       const std::vector<std::vector<double>>& value, hops_round_state& st);

/// Fragment filling (step 6): free GPUs to unplaced queue jobs in queue order, on one
/// server when one has room (the job's previous server first, then the fastest, then best
/// fit), else, for jobs with low placement sensitivity (below `threshold`) or that no server
/// can hold, spread over servers fastest first. Returns the number of jobs it placed.
int hops_fill_fragments(const snapshot& s, hops_server_classes& classes, double threshold,
                        hops_round_state& st);

}  // namespace tessera::detail
