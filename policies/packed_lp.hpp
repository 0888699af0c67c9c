#pragma once
/// @file packed_lp.hpp
/// The allocation LP of Gavel's space-sharing ("_packed") policies (OSDI'20, section 3.1 "Space
/// sharing": the allocation ranges over job combinations, a job alone or two jobs sharing a
/// GPU, and a job's effective throughput sums its throughput in each combination).
///
/// Variables: x[m][j], the time fraction job m runs alone on type j, and x[p][j] for every
/// pair p = {m, n} of jobs with one scale factor whose co-location throughputs on type j are
/// both positive in the executor's table (snapshot::rates, the GPU-type table's "(other, k)"
/// entries, server_throughput::colocated_table) and k <= gpus_j. Constraints: each job's
/// alone and pair fractions sum to <= 1; for each type, sum_m k_m x[m][j] + sum_p k_p x[p][j] <=
/// gpus_j (a pair's GPUs count once). The objective is a max-min of per-job effective rates
///   e_m = sum_j a[m][j] x[m][j] + w_m sum_{p ∋ m} sum_j T^co_m(p, j) x[p][j],
/// with `alone` rows a[m] and weights w_m given by the policy (e.g. a = w T with w =
/// k / (priority T_equal) for max-min fairness), T^co the co-located throughput times the
/// type's mean speed factor. Optional efficiency stage, as allocation_lp's: keep every job at
/// >= (1 - 1e-6) t* and maximise sum_m e_m. Jobs with an all-zero row and w = 0 are left out.
///
/// Class reduction (exact, as in allocation_lp.hpp): jobs with the same job type, scale,
/// weight and alone row form a class. The LP is symmetric under permuting a class's
/// members, so an optimum exists that gives every pair of members of classes c and d the
/// same fraction; the LP is solved over classes with one variable v[c][d][j] per class
/// pair, the pairs' total fraction (each member of c takes v / count_c, or 2 v / count_c
/// when c = d, which needs two members). The answer lists every job pair: v / (count_c
/// count_d), or v / (count_c (count_c - 1) / 2) within a class.
///
/// Cost: one LP (two with the efficiency stage) of up to C K + P K + 1 columns and 2C + K rows,
/// with C classes, K types and P <= C (C + 1) / 2 class pairs that share a scale factor and a
/// co-location entry; cold-started (no basis is carried over). The answer holds one entry per
/// job pair of a class pair with a positive fraction, at most M (M - 1) / 2.
///
/// No sharing anywhere (`shares_no_gpu`): where the throughput table has no co-location entry
/// at all (Sia's table as imported, or no rates), no pair can exist and the LP is the plain
/// max-min of policies/allocation_lp.hpp. The packed policies then run as their unpacked
/// twins, each holding one: the same rows computed the same way, and allocation_lp's warm
/// start from the last round. Solving this LP cold every round cost the policies that
/// recompute every round 13x (makespan) and 6x (finish-time fairness) their twins' time on
/// Sia's workloads (docs/benchmarks/sia.md). The decision is the table's, not the round's, so
/// runs on a table with co-location entries (Gavel's) always take the class LP and are
/// unchanged.

#include <vector>

#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"

namespace tessera {

/// The policy's part of a packed LP, rows parallel to snapshot::jobs.
struct packed_lp_input {
  std::vector<std::vector<double>> alone;  ///< a[m][j] >= 0 over the cluster's types
  std::vector<double> weight;              ///< w_m >= 0, applied to co-located throughputs
  bool efficiency_stage = true;            ///< second stage maximising the sum
};

/// A packed LP's answer.
struct packed_lp_result {
  allocation alloc;      ///< fractions alone (x) and in pairs (pairs, a < b)
  double value = 0;      ///< t* of the first stage (0 without jobs)
  int classes = 0;       ///< classes in the LP
  int pair_columns = 0;  ///< pair variables in the class LP
};

/// Solves the packed max-min LP for the snapshot's jobs. Pairs need `s.rates` (none without
/// it: the LP is then the plain one). Errors: inconsistent input (invalid_input) or a solve
/// that did not reach optimality (solver_failed).
result<packed_lp_result> solve_packed_lp(const snapshot& s, const packed_lp_input& in);

/// True when the snapshot's throughput table lets no two jobs share a GPU: no rates, or no
/// co-location entry in the table.
bool shares_no_gpu(const snapshot& s);

/// A packed policy's allocation where no GPU can be shared: its unpacked `twin`'s (a policy
/// with allocate() and last_solve(), e.g. max_min_fairness), with the twin's t* and class
/// count recorded in `last` (no pair columns).
template <class Twin>
result<allocation> allocate_as_twin(Twin& twin, const snapshot& s, packed_lp_result& last) {
  auto a = twin.allocate(s);
  if (!a) return a.err();
  last = packed_lp_result{};
  last.value = twin.last_solve().value;
  last.classes = twin.last_solve().classes;
  return a;
}

}  // namespace tessera
