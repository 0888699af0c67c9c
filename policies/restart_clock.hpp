#pragma once
/// @file restart_clock.hpp
/// When each job the executor charges a restart (job_view::restart_seconds > 0) (re)started
/// the placement it runs on, kept by a policy from round to round, so that the policy can
/// keep such a job where it runs until the restart has paid for itself (option
/// `restart_amortize` of the `tessera` and `hops` policies). A job "stays" when its copy 0
/// runs on the same set of servers as in the previous plan.

#include <map>

#include "runtime/core/plan.hpp"

namespace tessera {

class restart_clock {
 public:
  /// Whether `jv` is charged a restart and (re)started its placement less than `factor` x
  /// its restart time before `now`; false for a job not placed in the last plan noted.
  bool amortising(const job_view& jv, double now, double factor) const;
  /// After planning `plan` for snapshot `s` (whose last_plan is the previous round's): each
  /// placed job charged a restart started now, unless it stays; jobs not placed are
  /// forgotten. With `factor` <= 0, or no job charged a restart, it forgets every job.
  void note(const snapshot& s, const round_plan& plan, double factor);

 private:
  std::map<job_id, double> started_;  ///< placed jobs charged a restart: when they started
};

}  // namespace tessera
