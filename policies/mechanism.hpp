#pragma once
/// @file mechanism.hpp
/// Gavel's round-based mechanism (OSDI'20 section 5), shared by every allocation policy.
///
/// Input: the snapshot and an allocation x[m][j] (time fractions). Each round:
///  1. Account the previous round: job m ran on type j for one round length.
///  2. priority[m][j] = x[m][j] / (share of wall time m received on j since the last reset);
///     a job that received nothing on a type it is allocated gets infinite priority.
///     deficit[m][j] accumulates x[m][j]*L minus the time actually received.
///  3. Candidates (m, j) with x[m][j] > 0 are visited by: jobs whose allocation sums to 1
///     (to 1e-6) first, then priority, deficit and x (descending), then job id; a job is
///     scheduled on j when it is not yet scheduled this round and j still has scale_m free
///     GPUs. One type per job per round. The first key departs from Gavel: with the ratio
///     priority alone, any job not yet served since the last reset (infinite priority) can
///     preempt a job the allocation says must never stop (x sums to 1), e.g. the longest job
///     under the makespan policy or the head of the FIFO queue, stretching exactly those.
///     Capacity constraints make room for all of them, up to packing.
///  4. Placement, largest jobs first (so they find whole servers before smaller jobs split
///     them): a job that stays on its previous type keeps its previous servers when they
///     still have room (lease extension); else it goes to the single server of its type with
///     the least sufficient free GPUs (best fit), else to the fewest servers, taking the
///     servers with most free GPUs first.
/// Space sharing (allocation::pairs, Gavel's "_packed" policies): a pair of jobs is one more
/// unit with its own time fractions, received time, priority and deficit, as in Gavel, where a
/// pair is a job combination of its own. It is a candidate on type j when pair.x[j] > 0 and
/// both jobs have one scale factor; it is scheduled when neither job is yet, taking
/// scale GPUs for both, and placed like one job; the plan holds one assignment per job of
/// the pair, each naming the other (assignment::partner). A job's time in a pair does not
/// count as time alone. GPUs still free after the candidates go to jobs not yet scheduled,
/// alone, in arrival order, each on its fastest type with room (Gavel's queue holds every job
/// and pair, those with no share last, so its rounds are work-conserving there too; a pair
/// allocation spread over many job pairs otherwise left GPUs idle while jobs waited). With no
/// pairs the mechanism is the one above.
/// The counters reset whenever the allocation is recomputed for a new job set (reset()).
/// Complexity per round: O(U*K log(U*K)) for the ordering plus O(U*S) for placement, with U
/// units (M jobs plus the allocation's pairs), K GPU types and S servers.

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <unordered_map>
#include <vector>

#include "runtime/core/id_table.hpp"
#include "runtime/core/job_index.hpp"
#include "runtime/core/plan.hpp"

namespace tessera {

/// The stateful mechanism; one instance per policy instance.
class gavel_mechanism {
 public:
  /// Starts a new accounting period at `now` (a new allocation for a new job set). Deficits
  /// are kept: they remember how far each job is behind across periods.
  void reset(double now);

  /// Plans one round for the allocation `a` (rows parallel to s.jobs).
  round_plan plan(const snapshot& s, const allocation& a);

 private:
  /// A pair's time on each type.
  struct job_stats {
    std::vector<double> received;  ///< seconds on each type since the last reset
    std::vector<double> deficit;   ///< seconds owed on each type
  };
  /// A job's or a pair's statistics where they are stored: k values each.
  struct stats_ref {
    double* received;
    double* deficit;
  };
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  /// A (unit, type) the round may schedule; a unit is a job alone or a pair.
  struct candidate {
    bool full;  ///< the unit's jobs' allocations sum to 1: they must run every round
    double priority, deficit, x;
    job_id id, id2;     ///< the job and its partner (-1 when alone)
    std::size_t m, m2;  ///< their indices into snapshot::jobs (m2 = npos when alone)
    std::size_t j;      ///< GPU type
  };
  void account(const snapshot& s, const allocation& a);
  /// The pool row of job `id`'s statistics, taken (zeroed) when it has none.
  std::uint32_t stats_row(job_id id);
  /// The candidates of step 3 into cand_, and into order_ their positions in the order
  /// they are visited.
  void candidates(const snapshot& s, const allocation& a);

  // Jobs' statistics: row r of pool_ holds received[k_] then deficit[k_] of the job whose
  // row_of_ entry is r; rows of jobs that left are in free_rows_. One dense array the rounds
  // walk, where a hash map of per-job vectors cost three cache misses per job and round.
  id_table<std::uint32_t> row_of_;
  std::vector<double> pool_;
  std::vector<std::uint32_t> free_rows_;
  std::size_t k_ = 0;
  /// Pairs' statistics, by their job ids (lower first).
  std::map<std::pair<job_id, job_id>, job_stats> pair_stats_;
  // Per-round scratch, kept to reuse its storage: snapshot::jobs by id, each job's statistics
  // and pool row (set by account), the type each ran on alone in the previous round, the
  // candidates and their visiting order.
  job_index index_;
  std::vector<stats_ref> row_stats_;
  std::vector<std::uint32_t> row_index_;
  std::vector<int> ran_scratch_;
  std::vector<candidate> cand_;
  /// What the sort compares first, packed beside the candidate's position (see candidates).
  struct sort_key {
    std::uint64_t priority, deficit;  ///< order-preserving bits, descending values first
    std::uint32_t pos;                ///< into cand_
    bool full;
  };
  std::vector<sort_key> keys_;
  std::vector<std::uint32_t> order_;
  double reset_time_ = 0;
  double accounted_until_ = -1;  ///< start time of the last plan already accounted
};

/// Places jobs, already assigned to GPU types, onto servers (step 4 above). `jobs[i]` goes to
/// type `types[i]`; returns one share list per job (empty when it did not fit, which cannot
/// happen when the per-type GPU counts were respected). `previous` holds each job's shares in
/// the last round (may be empty).
std::vector<std::vector<server_share>> place_on_servers(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<std::vector<server_share>>& previous);
/// The same with `previous[i]` pointing at job i's previous shares (null or empty: none), as
/// the mechanism calls it each round without copying them.
std::vector<std::vector<server_share>> place_on_servers_view(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<const std::vector<server_share>*>& previous);

}  // namespace tessera
