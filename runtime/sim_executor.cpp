#include "runtime/sim_executor.hpp"

#include <algorithm>
#include <unordered_map>

namespace tessera {

sim_executor::sim_executor(const cluster& cl, const throughput_table& table,
                           double restart_cost)
    : cl_(cl), table_(table), restart_cost_(restart_cost) {}

double sim_executor::rate(const job& j, const std::vector<server_share>& shares) const {
  if (shares.empty()) return 0;
  const auto& first = cl_.servers.at(shares.front().server);
  double speed = first.speed;
  for (const auto& sh : shares) {
    const auto& sv = cl_.servers.at(sh.server);
    if (sv.type_index != first.type_index) return 0;  // Gavel jobs run on one type
    speed = std::min(speed, sv.speed);
  }
  auto t = table_.isolated(first.gpu_type, {j.job_type, j.scale_factor}, shares.size() == 1);
  return t ? *t * speed : 0.0;
}

int sim_executor::restarts(job_id id) const {
  auto it = restarts_.find(id);
  return it == restarts_.end() ? 0 : it->second;
}

result<std::vector<copy_progress>> sim_executor::execute(const snapshot& s,
                                                         const round_plan& p) {
  std::unordered_map<job_id, const job_view*> jobs;
  for (const auto& jv : s.jobs) jobs[jv.spec->id] = &jv;
  std::vector<copy_progress> out;
  std::unordered_map<job_id, std::vector<server_share>> now_shares;
  for (const auto& as : p.assignments) {
    auto it = jobs.find(as.job);
    if (it == jobs.end())
      return error{error_kind::internal,
                   "plan names job " + std::to_string(as.job) + ", which is not active"};
    const job_view& jv = *it->second;
    const double r = rate(*jv.spec, as.shares);
    if (r <= 0)
      return error{error_kind::internal, "job " + std::to_string(as.job) + " (" +
                                             jv.spec->job_type +
                                             ") placed where it has no throughput"};
    auto prev = last_shares_.find(as.job);
    const bool moved = prev == last_shares_.end() || prev->second != as.shares;
    const double lost = moved ? std::min(restart_cost_, p.length) : 0.0;
    if (moved && jv.steps_done > 0) ++restarts_[as.job];
    double steps = r * (p.length - lost);
    if (as.step_budget >= 0) steps = std::min(steps, as.step_budget);
    copy_progress cp;
    cp.job = as.job;
    cp.copy = as.copy;
    if (steps >= jv.remaining_steps) {
      cp.steps = jv.remaining_steps;
      cp.finished = true;
      cp.busy_seconds = lost + jv.remaining_steps / r;
      cp.finish_time = p.start + cp.busy_seconds;
    } else {
      cp.steps = steps;
      cp.busy_seconds = lost + steps / r;
    }
    now_shares[as.job] = as.shares;
    out.push_back(cp);
  }
  last_shares_ = std::move(now_shares);
  return out;
}

}  // namespace tessera
