#pragma once
/// @file type_blind.hpp
/// The heterogeneity-agnostic view of an allocation policy (Gavel's baselines, OSDI'20 §6).
///
/// An agnostic scheduler cannot tell GPU types apart, so it sees one pool of G GPUs: the
/// wrapped policy solves its problem on a snapshot whose cluster has a single type holding
/// every GPU and whose jobs each have one throughput, their mean over the types they can run
/// on. Its answer y_m (the job's time fraction on the pool) is then spread over the real
/// types in proportion to their GPU counts, as blind placement lands on them on average:
/// x[m][j] = y_m * n_j / sum_{j' usable by m} n_j'. A type whose capacity that exceeds (it can
/// only happen when some jobs cannot use some types) has its column scaled down to fit.
///
/// Why not Gavel's code's way (the same LP with every throughput set to 1): that LP's optimum
/// is a face, not a point, and which allocation it returns is the solver's accident. Gavel's
/// interior-point solver lands near the face's centre, i.e. near an even spread; a simplex
/// vertex piles jobs onto one type (often the slowest), which measures the solver rather than
/// the policy. The pooled view makes the even spread explicit and solver-independent.
///
/// Complexity: the wrapped policy's, on one type, plus O(M K) to build and expand.

#include <memory>

#include "runtime/core/policy.hpp"

namespace tessera {

/// Wraps `inner` so it plans on the type-blind pooled view of every snapshot.
std::unique_ptr<allocation_policy> make_type_blind(std::unique_ptr<allocation_policy> inner);

}  // namespace tessera
