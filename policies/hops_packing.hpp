#pragma once
/// @file hops_packing.hpp
/// Step 5 of Hops (policies/hops.hpp): the ILP's chosen configurations and fill patterns
/// (policies/hops_ilp.hpp) placed on concrete servers. Exposed for tests and the bench.
///
/// Per class: whole-server shares first (on the job's previous servers when possible, else a
/// run of consecutive servers), then patterns to the other servers (a server holding a
/// running job's share gets a pattern with a slot of that size when there is one), then
/// shares to pattern slots (kept shares first, then the rest in server order).

#include <vector>

#include "policies/hops_ilp.hpp"
#include "runtime/core/plan.hpp"

namespace tessera {

/// Places the chosen configurations on servers: one share list per job (empty = not
/// placed). `previous[i]` is job i's shares in the last round (may be empty); a job keeps
/// its previous servers where the patterns allow. Respects per-server capacity.
std::vector<std::vector<server_share>> pack_hops_solution(
    const hops_ilp_input& in, const hops_ilp_result& r,
    const std::vector<std::vector<server_share>>& previous);

}  // namespace tessera
