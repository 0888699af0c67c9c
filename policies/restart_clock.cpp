#include "policies/restart_clock.hpp"

#include <set>

namespace tessera {

bool restart_clock::amortising(const job_view& jv, double now, double factor) const {
  if (!(factor > 0) || !(jv.restart_seconds > 0) || !jv.spec) return false;
  const auto it = started_.find(jv.spec->id);
  return it != started_.end() && now - it->second < factor * jv.restart_seconds;
}

void restart_clock::note(const snapshot& s, const round_plan& plan, double factor) {
  std::set<job_id> charged;
  if (factor > 0)
    for (const auto& jv : s.jobs)
      if (jv.restart_seconds > 0) charged.insert(jv.spec->id);
  if (charged.empty()) {
    started_.clear();
    return;
  }
  // Each charged job's copy-0 servers (over every assignment of a task split).
  auto collect = [&charged](const round_plan& from, std::map<job_id, std::set<int>>& into) {
    for (const auto& as : from.assignments)
      if (as.copy == 0 && charged.count(as.job))
        for (const auto& sh : as.shares) into[as.job].insert(sh.server);
  };
  std::map<job_id, std::set<int>> before, placed;
  if (s.last_plan) collect(*s.last_plan, before);
  collect(plan, placed);
  std::map<job_id, double> started;
  for (const auto& [job, servers] : placed) {
    const auto it = started_.find(job);
    const auto b = before.find(job);
    const bool stayed = it != started_.end() && b != before.end() && b->second == servers;
    started[job] = stayed ? it->second : s.now;
  }
  started_ = std::move(started);
}

}  // namespace tessera
