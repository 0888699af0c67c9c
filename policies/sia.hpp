#pragma once
/// @file sia.hpp
/// Sia (Jayaram Subramanya et al., SOSP'23), its rigid mode: each round one integer program
/// chooses, for every active job, one GPU type with room for all its GPUs or none, from the
/// job's goodput on each type normalised to its slowest, raised to a fairness power p, and
/// damped on types it would have to restart on.
///
/// Per job m and GPU type t where the job can run (throughput T[m][t] > 0, the type holds at
/// least scale_m GPUs):
/// - goodput G[m][t] = scale_m * T[m][t] / min_t' T[m][t'] (the slowest type gives the job
///   its GPU count; a fixed batch makes goodput the throughput);
/// - re-allocation factor r_m = max(age - restarts * P, 0) / (age + P), 1 while the job has
///   attained under P GPU-seconds (P = restart_penalty, age = now - arrival); G[m][t] *= r_m
///   on every type but the one the job ran on last round;
/// - A[m][t] = min(round(G^p, 2 decimals), 3000);
/// - binary x[m][t], at most one per job, sum_m scale_m x[m][t] <= GPUs of type t; a job
///   whose restart is still under way (it started less than job_view::restart_seconds ago,
///   the executor's restart time for it) keeps its type (x = 1 there);
/// - objective, p < 0: minimise sum x (A - lambda_n); p > 0: maximise it (lambda_n is Sia's
///   penalty for leaving a job without GPUs, so every job that fits is worth placing).
/// The program is a multiple-choice knapsack with one capacity per GPU type: it is solved
/// exactly by dynamic programming over the types' free GPU counts
/// (runtime/solver/choice_knapsack.hpp) while (jobs + 1) x states stays within `dp_cells`
/// (Sia's 64 GPUs of three types: 10,625 states), else by CBC to Sia's gap
/// (runtime/solver/milp.hpp). Ties in the exact program go to the job that arrived first;
/// CBC's are an accident of its search. The shared mechanism places each chosen job on
/// servers of its type.
///
/// Reproduced from Sia's simulator (sia.py, rigid jobs; artifact commit aaf7a0d): the
/// normalisation, the re-allocation factor and when it applies, the rounding and clipping
/// of A, the objective and constraints, non-preemption during a restart, its defaults
/// (p = -0.5, lambda_n = 1.1, P = 30 s). Added: ties go to staying (stay_tie_break). Not
/// reproduced: adaptive jobs (Sia's default mode
/// scales batch size and GPU count with Pollux's goodput model; tessera's jobs are rigid),
/// per-application restart penalties (Sia looks them up by job name: 25-250 s; here one
/// option), Sia's own placement within a type (the mechanism's), and restarts counted on a
/// move within a type (here: a change of type, or a resume after a pause).
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "policies/gavel_family.hpp"
#include "policies/options.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/solver/milp.hpp"

namespace tessera {

/// Sia's settings (see the file comment).
struct sia_settings {
  double p = -0.5;              ///< fairness power (not 0)
  double lambda_n = 1.1;        ///< penalty for a job left without GPUs
  double restart_penalty = 30;  ///< P, seconds
  double clip = 3000;           ///< cap on A
  double ilp_time_limit = 10;   ///< seconds CBC may spend on one round
  double ilp_gap = 1e-4;        ///< relative gap at which CBC stops (Sia's threshold)
  /// Costs 0.001 less on the type a job ran on last round: below the 0.01 resolution of A,
  /// so it only breaks ties, which Sia leaves to CBC: with many equal jobs CBC swapped a
  /// running job for a waiting one round after round, each swap costing a restart
  /// (docs/benchmarks/sia.md, "Ties").
  bool stay_tie_break = true;
  /// Most cells, (jobs with a type + 1) x GPU-count states, for the exact dynamic program;
  /// larger programs, or 0, go to CBC.
  double dp_cells = 4194304;
};

/// Sia's rigid-job allocation: one GPU type or none per job, every round.
class sia_policy final : public allocation_policy {
 public:
  explicit sia_policy(sia_settings s) : s_(s) {}
  /// x[m][t] in {0, 1} from the round's integer program.
  result<allocation> allocate(const snapshot& s) override;
  /// Ages, restarts and the re-allocation factor change every round.
  bool recompute_every_round() const override { return true; }

 private:
  /// What Sia remembers of a job between rounds.
  struct job_state {
    int running = -1;       ///< type it ran on last round, -1 none
    bool ever_ran = false;  ///< it has started once
    int restarts = 0;       ///< starts after the first
    double started = 0;     ///< when it last (re)started (s)
  };
  /// One (job, type) choice of the program: its cost, whether the job must take it (its
  /// restart is under way) and its MILP column (set by build).
  struct candidate {
    int job = 0, type = 0, column = 0;
    double cost = 0;
    bool keep = false;
  };
  void observe(const snapshot& s);
  /// The round's choices over throughputs `t`, by job (in s.jobs' order), then type;
  /// `keep_restarting` false frees the jobs whose restart is under way (the fallback when
  /// keeping them all does not fit).
  std::vector<candidate> candidates(const snapshot& s, const matrix& t, bool keep_restarting) const;
  /// Solves the program over `cands`: per candidate whether it is taken; empty when the kept
  /// jobs do not fit (or there is no candidate).
  result<std::vector<char>> choose(const snapshot& s, const std::vector<candidate>& cands) const;
  /// choose() by the exact dynamic program; nullopt when it is above `dp_cells`.
  std::optional<std::vector<char>> choose_exact(const snapshot& s,
                                                const std::vector<candidate>& cands) const;
  /// The program as a MILP, one binary per candidate (sets their columns).
  milp_model build(const snapshot& s, std::vector<candidate>& cands) const;

  sia_settings s_;
  std::map<job_id, job_state> jobs_;
};

/// Options of sia (p, lambda_n, restart_penalty, ilp_time_limit, ilp_gap, dp_cells,
/// stay_tie_break).
std::vector<option_spec> sia_options();

/// Builds sia from validated options.
std::unique_ptr<allocation_policy> make_sia(const options& o);

}  // namespace tessera
