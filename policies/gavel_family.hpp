#pragma once
/// @file gavel_family.hpp
/// Pieces shared by Gavel's policies (OSDI'20, section 4): the throughput matrix a policy
/// optimises over, the equal-share throughput used to normalise fairness objectives, and the
/// adapter that runs an allocation policy through the shared round mechanism.

#include <memory>
#include <string>
#include <vector>

#include "runtime/core/policy.hpp"

namespace tessera {

/// Row-major dense matrix of jobs x GPU types.
using matrix = std::vector<std::vector<double>>;

/// Throughputs the policy sees: the snapshot's per-type values (negatives read as 0). The
/// heterogeneity-agnostic variants see them through the type-blind pooled view
/// (policies/type_blind.hpp), i.e. one type holding each job's mean.
matrix policy_throughputs(const snapshot& s);
/// The same values written into `t`, already jobs x types and zero (an LP input's rows, say),
/// so a policy that turns them into its rows allocates no second matrix.
void policy_throughputs_into(const snapshot& s, matrix& t);

/// Time fraction of each job under an equal 1/M share of a cluster of G GPUs (M the
/// snapshot's jobs). `by_gpus` false: every job gets the same fraction
/// f = min(1, G / sum_m scale_m), the most that lets all run at once (an equal time share).
/// `by_gpus` true: each job gets G/M GPUs, so a gang of scale_m runs a fraction
/// min(1, G / (M scale_m)) (Gavel's IsolatedPolicy, the share Themis's finish-time
/// fairness compares with). Both fit the cluster: sum_m scale_m f_m <= G.
std::vector<double> equal_share_fractions(const snapshot& s, bool by_gpus);

/// Throughput of each job under an equal 1/M share of the cluster: its fraction f_m
/// (equal_share_fractions) spread over the types in proportion to their GPU counts, i.e.
/// T_equal_m = f_m * sum_j T[m][j] * n_j / G.
std::vector<double> equal_share_throughputs(const snapshot& s, const matrix& t,
                                            bool by_gpus = false);

/// Wraps an allocation policy and the shared Gavel mechanism (priorities, deficits, lease
/// extension, consolidated placement) into a policy named `name`. The allocation is
/// recomputed when the job set changes, or every round if the allocation policy asks. An
/// allocation policy does not know its name: its errors reach the caller prefixed with
/// `name`.
std::unique_ptr<policy> make_gavel_policy(std::string name,
                                          std::unique_ptr<allocation_policy> alloc);

}  // namespace tessera
