#pragma once
/// @file sim_executor.hpp
/// The simulator's executor: a job copy placed on servers runs at the per-server throughput
/// of `server_throughput` (runtime/core/server_throughput.hpp): server table, else the GPU-type
/// table (Gavel's "_unconsolidated" entry when it spans several servers) times the server's
/// speed factor, else the analytic model; a placement spanning servers, of one GPU type or of
/// several, runs at its slowest server's per-GPU rate times its GPU count. For Gavel's plans
/// (one GPU type, scale-factor GPUs) this is the table throughput times the slowest speed
/// factor. It runs for the round length minus a restart cost when its placement
/// changed since the previous round. A job finishing mid-round leaves its GPUs idle until the
/// next round, as in Gavel's simulator.
///
/// Space sharing (assignment::partner): each job of a pair runs at its co-located throughput
/// (server_throughput::colocated_rate) for the whole round, also after its partner finished
/// (as in Gavel's simulator, which charges the pair's rates for the round).
///
/// Task-level execution (Hare): the assignments of one job copy that carry tasks (a task
/// split, runtime/core/task_split.hpp) run as one: each GPU runs its tasks back to back, a step
/// completes when its last task does, and the copy advances at 1 / (max over its placements of
/// ceil(tasks / GPUs) x the per-task time there). Its placement, for the restart cost, is the
/// concatenation of its parts' shares; it reports one `copy_progress`.
///
/// Forked copies (two or more copies of one job in a plan, from any policy) run together
/// (run_copies): their steps add up, each round pays one parameter averaging
/// (copy_aggregation), and, with a copy_efficiency model, the sum counts at the statistical
/// efficiency of averaged copies, so the job finishes when its effective progress reaches its
/// total steps.

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>

#include "runtime/core/copy_efficiency.hpp"
#include "runtime/core/id_table.hpp"
#include "runtime/core/job_index.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// What one job copy achieved during a simulated round.
struct copy_progress {
  job_id job = 0;
  int copy = 0;
  double steps = 0;         ///< steps completed this round
  double busy_seconds = 0;  ///< seconds the copy held its GPUs (including restart cost)
  bool finished = false;    ///< the job reached its total steps
  double finish_time = 0;   ///< absolute time it finished (valid when finished)
  int gpus = 0;             ///< GPUs the copy held, over all its placements (0 = unknown)
};

/// Time model of averaging the parameters of a forked job's copies (HadarE), charged once per
/// round to every job running as two or more copies: `param_bytes / bytes_per_s + latency_s`
/// seconds at the end of the round's training, during which the copies hold their GPUs but
/// make no progress (a job finishing mid-round averages once more before it ends). Defaults:
/// a 100 MB model, 10 GB/s, 1 ms, i.e. 0.011 s per round.
struct copy_aggregation {
  double param_bytes = 100e6;  ///< bytes averaged per round (model parameters)
  double bytes_per_s = 10e9;   ///< bandwidth of the averaging (bytes/s, > 0)
  double latency_s = 1e-3;     ///< fixed cost per averaging (s)
  /// Seconds one averaging takes.
  double seconds() const { return param_bytes / bytes_per_s + latency_s; }
};

/// One copy of a forked job as the executor runs it.
struct copy_run {
  int copy = 0;             ///< copy index
  double rate = 0;          ///< steps/s of its placement
  double lost = 0;          ///< seconds lost at the round's start (restart cost)
  double step_budget = -1;  ///< cap on its steps this round, -1 = none
};

/// Runs the copies of one job for one round starting at `start`: each copy trains at its own
/// rate from `lost` until `length - aggregation_s` (or its step budget, in steps it makes);
/// the job's effective progress is `efficiency` (in (0, 1]: runtime/core/copy_efficiency.hpp) times
/// the sum of the steps its copies made. When that reaches `remaining` at time t* the job
/// finishes at start + t* + aggregation_s (the final averaging), and the copies' credited
/// steps sum to exactly `remaining`; otherwise the copies hold their GPUs for the whole round.
/// Each entry's `steps` is the copy's effective share: efficiency x the steps it made.
/// Returns one entry per copy, in the order given. O(C^2) for C copies.
std::vector<copy_progress> run_copies(job_id job, double remaining,
                                      const std::vector<copy_run>& copies, double start,
                                      double length, double aggregation_s, double efficiency = 1.0);

/// Throughput model + virtual clock executor.
class sim_executor {
 public:
  /// `restart_cost`: seconds a job loses each round it starts on other GPUs than it held in
  /// the round before (0 = Gavel's default).
  sim_executor(const cluster& cl, const throughput_table& table, double restart_cost);
  /// As above, with the averaging-time model for jobs running as several copies (HadarE):
  /// copies of one job each advance at their own placement's rate, the job's progress is
  /// their sum, and it finishes when the sum reaches its total steps plus one averaging.
  sim_executor(const cluster& cl, const throughput_table& table, double restart_cost,
               copy_aggregation aggregation);
  /// As above, charging a job that runs as C >= 2 copies in a round the statistical
  /// efficiency of averaged copies (runtime/core/copy_efficiency.hpp): its progress is
  /// efficiency.factor(job type, C) times the sum of its copies' steps, whichever policy
  /// forked it.
  sim_executor(const cluster& cl, const throughput_table& table, double restart_cost,
               copy_aggregation aggregation, copy_efficiency efficiency);

  /// Runs `p` for the jobs of `s` (whose remaining steps bound the work) and reports each
  /// copy's progress.
  result<std::vector<copy_progress>> execute(const snapshot& s, const round_plan& p);

  /// Steps/s of `j` placed on `shares` (0 when there is no estimate).
  double rate(const job& j, const std::vector<server_share>& shares) const;

  /// The per-server throughput model the executor runs plans with (policies may read it
  /// through snapshot::rates).
  const server_throughput& rates() const { return rates_; }

  /// Number of times a job restarted on new GPUs (preemptions and migrations).
  int restarts(job_id id) const;

  /// Restart costs per job type (seconds), replacing the constructor's for the types named.
  /// A gang pays its restart over as many rounds as it takes while it stays where it is
  /// (a 250 s restore in 60 s rounds idles it four rounds and 10 s of a fifth); a forked
  /// copy pays at most one round's length per start.
  void set_restart_costs(std::map<std::string, double> by_type) {
    restart_by_type_ = std::move(by_type);
  }
  /// Seconds a copy of `job_type` loses per start.
  double restart_cost_of(const std::string& job_type) const;

 private:
  static constexpr std::size_t npos = job_index::npos;
  /// One job copy of a plan: its assignments (one for a gang or a Hops/Hadar placement,
  /// several for a task split, runtime/core/task_split.hpp), chained through next_part_.
  struct copy_group {
    job_id job = 0;
    int copy = 0;
    std::size_t view = 0;  ///< the job's index in snapshot::jobs
    const assignment* first = nullptr;
    std::size_t first_index = 0;     ///< index of `first` in the plan
    bool split = false;              ///< a task split (several parts, or tasks > 0)
    std::size_t next_of_job = npos;  ///< another group of the same job (a forked job)
  };
  /// A copy's shares when last placed and the round they were placed in.
  struct placed_shares {
    std::vector<server_share> shares;
    std::int64_t round = -2;
  };
  /// Groups the plan's assignments by job copy into groups_, in plan order of first
  /// appearance; an error when the plan names a job that is not active.
  status group_copies(const snapshot& s, const round_plan& p);
  /// What the executor remembers of a job across rounds, in one entry so that a round looks
  /// each placed job up once: its type's GPU-type table row (server_throughput::tier2_row,
  /// rather than hashing its type at every placement; `spec` is the job object it was looked
  /// up for, the simulator's, which lives as long as the run), its copy 0's latest placement,
  /// and the restart seconds its gang has not yet paid.
  struct job_memory {
    const job* spec = nullptr;
    const std::vector<double>* row = nullptr;
    placed_shares last;
    double restart_left = 0;
  };
  /// Steps/s of one job copy; a pair's job at its co-located throughput beside its partner.
  double placed_rate(const snapshot& s, const round_plan& p, const job_view& jv,
                     const copy_group& g, job_memory& m);
  /// rate() of a job placed alone, its type's table row remembered in `m`.
  double placed_rate_alone(const job& j, const std::vector<server_share>& shares, job_memory& m);
  /// A job copy alone (not forked) running at `r` for the round.
  copy_progress run_gang(const copy_group& g, const job_view& jv, double r, double lost,
                         double budget, const round_plan& p) const;
  /// Whether the copy runs on other shares than in the previous round; records these (copy 0
  /// and a job's only copy in `m`, forked copies 1.. apart).
  bool moved_since_last_round(const copy_group& g, const std::vector<server_share>& shares,
                              bool forked, job_memory& m);
  /// Ends the round: drops placements of copies not placed lately.
  void forget_unplaced(const round_plan& p);

  /// Seconds of a gang's start still to pay at the start of this round (see
  /// set_restart_costs); moved: it starts anew on other GPUs.
  double restart_lost(job_memory& m, const std::string& job_type, bool moved, double length);

  server_throughput rates_;
  double restart_cost_;
  std::map<std::string, double> restart_by_type_;
  copy_aggregation aggregation_;
  /// Off by default here (the constructors without it keep the upper-bound model); the
  /// simulator passes sim_config::copy_efficiency, on by default.
  copy_efficiency efficiency_{false};
  /// Each job's memory; copies 1.. of forked jobs' latest placements under their own
  /// (job, copy).
  struct copy_hash {
    std::size_t operator()(copy_id c) const {
      return std::hash<job_id>()(c.job) * 31 + static_cast<std::size_t>(c.copy);
    }
  };
  id_table<job_memory> jobs_;
  std::unordered_map<copy_id, placed_shares, copy_hash> last_copy_shares_;
  std::int64_t round_ = 0;  ///< rounds executed
  id_table<int> restarts_;
  // Per-round scratch, kept to reuse its storage.
  job_index index_;  ///< snapshot::jobs by id
  std::vector<copy_group> groups_;
  std::vector<std::size_t> first_group_;  ///< per job of the snapshot: a group of it, or npos
  std::vector<std::size_t> next_part_;    ///< per assignment: the next of its copy, or npos
  std::map<copy_id, int> forked_gpus_;    ///< GPUs of each forked copy this round
};

}  // namespace tessera
