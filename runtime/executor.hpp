#pragma once
/// @file executor.hpp
/// Executes round plans. The simulator's executor advances a virtual clock through a
/// throughput model; the actor runtime's drives real nodes. The round loop never knows which.

#include <vector>

#include "runtime/plan.hpp"
#include "runtime/result.hpp"

namespace tessera {

/// What one assignment achieved during a round.
struct copy_progress {
  job_id job = 0;
  int copy = 0;
  double steps = 0;          ///< steps completed this round
  double busy_seconds = 0;   ///< seconds the copy held its GPUs (including restart cost)
  bool finished = false;     ///< the job reached its total steps
  double finish_time = 0;    ///< absolute time it finished (valid when finished)
};

/// Runs a round plan and reports progress.
class executor {
 public:
  virtual ~executor() = default;
  /// Executes `p` for the jobs of `s` (whose remaining steps bound the work).
  virtual result<std::vector<copy_progress>> execute(const snapshot& s, const round_plan& p) = 0;
};

}  // namespace tessera
