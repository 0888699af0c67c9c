#pragma once
/// @file run_rates.hpp
/// The throughput model of a live run (`tessera run`): what the scheduler's policies see as
/// `snapshot::rates`, the same per-server look-up (runtime/core/server_throughput.hpp) the
/// simulator gives them, fed by the nodes' measurements (Hops: measured throughput updates
/// the server table).
///
/// Model. A run job states `step_time`, the seconds one step takes on a speed-1.0 server as a
/// gang of K GPUs (one task per GPU). The type table holds, for every GPU type of the
/// cluster and every GPU count g the job accepts (its scale K, or hops' acceptable counts),
/// 1 / (ceil(K / g) x step_time) steps/s: K tasks on g GPUs of speed 1.0 run ceil(K / g)
/// task-times per step. server_throughput scales it by each server's speed factor (tier 2);
/// nothing in the runtime makes a multi-server configuration slower than the node executors
/// do, so the "_unconsolidated" entries are the consolidated ones.
///
/// Measurements. A node reports its steps/s for a copy it ran alone with t task-times per
/// step; the gang-equivalent rate at scale K is that times t (one task-time per step), and it
/// is recorded in the server table under (server, job type, K, one server), replacing the
/// table-and-speed estimate for that server (tier 1). Copies spread over nodes are not
/// recorded: their step time is that of their slowest part, which one rate cannot attribute.
///
/// Space sharing. With a co-location source table (Gavel's bundled table), every two
/// registered job types of one scale K that the source lists as a pair on a GPU type get a
/// co-location entry there (`throughput_table::set_colocated`, both directions): each job's
/// solo rate 1 / step_time times its co-located-to-solo ratio in the source, the source's
/// job type being the one the job file named (before any " @<step_time>s" suffix).
/// server_throughput::colocated_rate scales them by the server's speed factor, as it does
/// single jobs. Without a source, or for job types the source does not pair, there are no
/// entries and plan validation refuses any pair.
///
/// Job type keys. Policies key look-ups (and hare its task-time cache) by job type, so jobs
/// sharing a job type but not a step time get distinct keys: the first step time registered
/// for a job type keeps its name, another becomes "<job_type> @<step_time>s".

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/core/job_file.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

/// The rate model of one run.
class run_rates {
 public:
  /// An empty model for `configured` (the cluster file's servers, rank = server index).
  /// `colocation`: the table whose pair entries give co-location ratios (null: no pairs).
  explicit run_rates(const cluster& configured,
                     std::shared_ptr<const throughput_table> colocation = nullptr)
      : configured_(configured), colocation_(std::move(colocation)) {}

  /// Registers a job: gives it its job-type key (see the file comment; may change
  /// `j.spec.job_type`) and adds its type-table entries. A live model made before sees the
  /// job after the next for_live() call that rebuilds it (add() forces that).
  void add(run_job& j);

  /// The per-server model over the live servers: `live` holds configured servers `ranks`
  /// (increasing), in that order. Rebuilt, with every measurement of a live rank, when the
  /// live set changes; the reference stays valid until the next call.
  const server_throughput& for_live(const cluster& live, const std::vector<int>& ranks);

  /// Records a measured rate: `steps_per_s` of `job_type` at scale `scale` run alone on
  /// `rank` with `task_times` task-times per step. Ignores non-positive rates.
  void record(int rank, const std::string& job_type, int scale, int task_times, double steps_per_s);

  /// The type table (tier 2 of the look-up).
  const throughput_table& type_table() const { return types_; }

 private:
  /// A registered (job-type key, scale): the source table's job type and the solo rate.
  struct registered {
    std::string source_type;
    double solo = 0;  ///< steps/s on a speed-1.0 server with one task per GPU
  };
  /// Adds the co-location entries of `a` (just registered) with every registered key.
  void add_pairs(const job_key& a);
  /// The source's (co-located / solo) ratios of `a` beside `b` on `gpu_type`, both rows tried.
  std::optional<std::pair<double, double>> colocation_ratios(const std::string& gpu_type,
                                                             const job_key& a,
                                                             const job_key& b) const;

  cluster configured_;
  std::shared_ptr<const throughput_table> colocation_;
  std::map<job_key, registered> registered_;
  throughput_table types_;
  std::map<std::string, double> first_step_time_;  ///< job type -> step time keeping the name
  /// (rank, job type, scale) -> gang-equivalent steps/s, latest measurement.
  std::map<std::tuple<int, std::string, int>, double> measured_;
  std::vector<int> live_ranks_;
  std::unique_ptr<server_throughput> live_;
};

}  // namespace tessera
