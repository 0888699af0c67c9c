#pragma once
/// @file allocation_lp.hpp
/// The LP that Gavel's allocation policies share, solved over job classes with warm starts.
///
/// Variables x[m][j] in [0, 1] (time fraction of job m on GPU type j) exist only where the
/// job's coefficient a[m][j] > 0 and type j has at least scale_m GPUs (a gang of scale_m GPUs
/// cannot be placed on a type with fewer); elsewhere x = 0. Constraints: sum_j x[m][j] <= 1 and
/// sum_m scale_m x[m][j] <= capacity_j. Two objectives:
///   - max_min: maximise t subject to sum_j a[m][j] x[m][j] >= t for every job;
///   - max_sum: maximise sum_m sum_j a[m][j] x[m][j].
/// The caller puts the policy into a: max-min fairness passes T/(w T_equal), makespan T/rem,
/// finish-time fairness T/r(rho), max total throughput T/T_max.
///
/// Class reduction (exact): jobs with identical rows a[m] (over usable types) and equal scale
/// form a class. Both objectives are concave and the constraints convex and symmetric in a
/// class's members, so averaging any optimal solution over a class's members stays feasible
/// (row sums and capacity use are averaged or unchanged) and optimal (each member's
/// sum_j a x becomes the class average, which is >= the minimum; the sum is unchanged). Hence
/// an optimum exists where every member has the same x, and the LP is solved over classes:
/// variables y[c][j], capacity sum_c count_c scale_c y[c][j] <= capacity_j, one row-sum and
/// one objective row per class. Gavel's throughput table has ~80 (job type, scale) pairs, so
/// thousands of jobs collapse to at most ~80 classes. Jobs whose row is all zero get x = 0 and
/// do not take part (a max-min over them would be 0).
///
/// Warm start: the `lp_solver` is kept between calls. A new class is matched to the previous
/// call's class that held its first job found there (by job id); matched classes take that
/// class's basis statuses (when a class split, one part takes them as they are and the others
/// a regularised copy, as in the crash below), new ones start with their columns at zero and
/// their row slacks basic, and the count of basic variables is repaired. So a re-solve after
/// an arrival or completion, or with rows that changed (progress, rho), starts from the
/// previous optimal basis.
///
/// Efficiency stage (optional, max_min only): after the max-min optimum t*, a second LP keeps
/// every job at >= t* (1 - slack) and maximises sum_m sum_j a[m][j] x[m][j], so capacity that
/// the max-min optimum leaves to the solver's whim goes to the jobs that use it best. It starts
/// from the previous second-stage optimum (mapped like the first stage's) when there is one,
/// else from the crash's second-stage basis, with dual simplex (nearly dual feasible, primal
/// infeasible where jobs arrived or t* moved); otherwise from the first stage's optimum with
/// primal simplex. The second stage moves little from call to call but can be far from the
/// first stage's vertex (makespan over 2048 distinct jobs: ~4500 pivots from the first
/// stage's vertex, ~150 from the carried basis).
///
/// Exactness of the answer: CLP meets rows to its tolerance in its scaled model; a type whose
/// capacity is exceeded by that (a few 1e-6 GPUs was seen) has its column scaled down, and a
/// row summing over 1 is scaled to 1, so the returned x meets the constraints exactly.
///
/// Crash (cold solves of large LPs): with no basis to carry over and at least
/// `crash_min_classes` classes (the worst case: every job distinct), classes whose rows agree
/// to within a relative step eps (a log grid per coefficient; eps = 1%, 3%, 10%, 30%, 100%,
/// 300%, the first that at least halves the count) are merged into buckets with their
/// count-weighted mean row. The bucket LP is crashed the same way (so a chain of ever coarser
/// LPs is solved, coarsest first) and solved; its optimal basis is copied to the bucket's
/// members (the first member takes it as is, the others a version with as many basic variables
/// as the class has rows) as the starting basis of the exact LP. The answer is still the exact
/// LP's optimum; only the starting point, and so the number of simplex pivots, changes (2048
/// distinct Gavel-like jobs: ~3200 pivots cold, ~25 crashed).
///
/// Complexity: one LP with C*K + 1 columns and 2C + K rows (C classes, K types), two with the
/// efficiency stage; building the classes is O(M K) expected (hashing). bench/lp_bench.cpp
/// times it against CLP's dual simplex on the plain LP (docs/benchmarks/simulator-scale.md,
/// "Solver speed: the heterogeneity-aware LAS LP").

#include <memory>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"
#include "runtime/solver/lp.hpp"

namespace tessera {

/// Which objective an allocation LP optimises.
enum class allocation_objective {
  max_min,  ///< maximise min_m sum_j a[m][j] x[m][j]
  max_sum,  ///< maximise sum_m sum_j a[m][j] x[m][j]
};

/// The LP's data: one row per job plus the capacity of each GPU type.
struct allocation_lp_input {
  std::vector<job_id> ids;                ///< job identity, used to carry the basis over
  std::vector<std::vector<double>> rows;  ///< a[m][j] >= 0; 0 = job m cannot use type j
  std::vector<int> scale;                 ///< GPUs per step of each job (>= 1)
  std::vector<double> capacity;           ///< GPUs of each type
};

/// How to solve an allocation LP.
struct allocation_lp_settings {
  bool aggregate = true;           ///< merge identical jobs into classes (exact)
  bool warm_start = true;          ///< start from the previous call's basis when possible
  bool efficiency_stage = false;   ///< max_min: second stage maximising the sum
  double efficiency_slack = 1e-6;  ///< relative slack on t* kept in the second stage
  double time_limit_s = 0;         ///< per LP solve; <= 0: none
  bool crash = true;               ///< cold solves: start from a bucketed LP's basis
  int crash_min_classes = 512;     ///< fewest classes for which the crash is tried
};

/// What an allocation LP produced.
struct allocation_lp_result {
  /// x[m][j] for the input's jobs and types; each row sums to <= 1 (moved into the policy's
  /// allocation: empty in a policy's last_solve()).
  std::vector<std::vector<double>> x;
  /// max_min: t* = min_m sum_j a[m][j] x[m][j] of the first stage (0 without jobs);
  /// max_sum: the optimal sum.
  double value = 0;
  int classes = 0;       ///< classes in the LP
  int iterations = 0;    ///< simplex iterations over all stages
  bool warm = false;     ///< the first stage started from a carried-over basis
  bool crashed = false;  ///< the first stage started from a crash basis
  double seconds = 0;    ///< wall time, including building the classes
};

/// Spare rows of job x type matrices (an LP input's rows, an allocation's x): a policy that
/// solves every round hands back last round's and the next round's matrices reuse them, where
/// a 10,000-GPU round otherwise allocated and freed two vectors per active job.
class row_pool {
 public:
  /// An n x k matrix of zeros, its rows taken from the pool where it has some.
  std::vector<std::vector<double>> take(std::size_t n, std::size_t k);
  /// Keeps `rows`' storage for later takes.
  void give(std::vector<std::vector<double>>&& rows);

 private:
  std::vector<std::vector<double>> spare_;
};

/// Solves allocation LPs, keeping the CLP model and its basis between calls. Movable, not
/// copyable.
class allocation_lp {
 public:
  /// A solver with nothing to warm-start from.
  allocation_lp();
  /// Frees the CLP model.
  ~allocation_lp();
  /// Moves the model and the carried-over basis.
  allocation_lp(allocation_lp&&) noexcept;
  /// Moves the model and the carried-over basis.
  allocation_lp& operator=(allocation_lp&&) noexcept;

  /// Solves one LP. Errors: inconsistent input (invalid_input), a solver failure, or a stage
  /// that did not reach optimality (solver_failed; the LP always has the feasible point x = 0,
  /// so this means a limit was hit or CLP gave up).
  result<allocation_lp_result> solve(const allocation_lp_input& in, allocation_objective obj,
                                     const allocation_lp_settings& s = {});

  /// Forgets the carried-over basis.
  void reset();

  /// Where solutions' and inputs' rows come from and go back to (lp_input_for, recycle).
  row_pool& rows() { return rows_; }

 private:
  struct state;
  std::unique_ptr<state> state_;
  row_pool rows_;
};

/// Checks what every allocation policy needs of a snapshot (a cluster, a spec per job, and a
/// positive scale factor). The messages do not name the policy; the Gavel adapter
/// (make_gavel_policy) prefixes its name.
status check_snapshot(const snapshot& s);

/// An LP input for the snapshot's jobs: ids, scale factors and GPUs per type, with every row
/// sized to the cluster's types and set to 0 for the policy to fill.
allocation_lp_input lp_input_for(const snapshot& s);
/// The same, its rows taken from `pool`.
allocation_lp_input lp_input_for(const snapshot& s, row_pool& pool);

}  // namespace tessera
