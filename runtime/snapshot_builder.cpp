#include "runtime/snapshot_builder.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace tessera {

job_view make_job_view(const job_accounting& a) {
  job_view v;
  v.spec = a.spec;
  v.steps_done = a.steps_done;
  v.remaining_steps = a.spec->total_steps - a.steps_done;
  v.run_time = a.run_time;
  v.attained_service = a.attained_service;
  v.throughput = a.throughput;
  v.last_type = a.last_type;
  return v;
}

snapshot build_snapshot(double now, double round_length, const cluster& cl,
                        const std::vector<job_accounting>& jobs, const round_plan* last,
                        std::uint64_t job_set_version) {
  snapshot s;
  s.now = now;
  s.round_length = round_length;
  s.cl = &cl;
  s.last_plan = last;
  s.job_set_version = job_set_version;
  s.jobs.reserve(jobs.size());
  for (const auto& a : jobs) s.jobs.push_back(make_job_view(a));
  return s;
}

namespace {

/// validate_plan's checks; `jobs` (may be null) adds the checks against the active jobs.
status check_plan(const cluster& cl, const round_plan& p, const std::string& policy_name,
                  const std::vector<job_view>* jobs) {
  std::vector<int> used(cl.servers.size(), 0);
  // (job, copy) -> assignments, whether all of them carry tasks, and their tasks' sum.
  struct copy_use {
    int parts = 0;
    bool all_tasks = true;
    long long tasks = 0;
  };
  std::map<std::pair<job_id, int>, copy_use> copies;
  for (const auto& as : p.assignments) {
    const std::string who = "job " + std::to_string(as.job) +
                            (as.copy != 0 ? " copy " + std::to_string(as.copy) : "");
    auto& use = copies[{as.job, as.copy}];
    ++use.parts;
    use.all_tasks = use.all_tasks && as.tasks > 0;
    use.tasks += as.tasks;
    if (use.parts > 1 && !use.all_tasks)
      return error{error_kind::internal,
                   policy_name + " placed " + who + " twice" +
                       (use.tasks > 0 ? " (a task split needs tasks > 0 on every placement)"
                                      : "")};
    if (as.tasks < 0)
      return error{error_kind::internal, policy_name + " gave " + who + " " +
                                             std::to_string(as.tasks) + " tasks per step"};
    for (const auto& sh : as.shares) {
      if (sh.server < 0 || sh.server >= static_cast<int>(cl.servers.size()) || sh.gpus <= 0)
        return error{error_kind::internal, policy_name + " used an invalid server share"};
      used[sh.server] += sh.gpus;
      if (used[sh.server] > cl.servers[sh.server].gpus)
        return error{error_kind::internal,
                     policy_name + " over-filled server " + cl.servers[sh.server].name};
    }
    if (as.tasks > 0 && as.tasks < as.gpus())
      return error{error_kind::internal,
                   policy_name + " gave " + who + " " + std::to_string(as.gpus()) +
                       " GPUs for " + std::to_string(as.tasks) +
                       " tasks per step (every GPU of a placement must run a task)"};
  }
  if (!jobs) return {};
  std::map<job_id, const job_view*> active;
  for (const auto& jv : *jobs) active[jv.spec->id] = &jv;
  for (const auto& [key, use] : copies) {
    auto it = active.find(key.first);
    if (it == active.end())
      return error{error_kind::internal, policy_name + " placed job " +
                                             std::to_string(key.first) + ", which is not active"};
    const int k = it->second->spec->scale_factor;
    if (use.all_tasks && use.tasks != k)
      return error{error_kind::internal,
                   policy_name + " placed " + std::to_string(use.tasks) + " tasks per step of job " +
                       std::to_string(key.first) +
                       (key.second != 0 ? " copy " + std::to_string(key.second) : "") +
                       " over " + std::to_string(use.parts) +
                       " placements; they must sum to its scale factor " + std::to_string(k)};
  }
  return {};
}

}  // namespace

status validate_plan(const cluster& cl, const round_plan& p, const std::string& policy_name) {
  return check_plan(cl, p, policy_name, nullptr);
}

status validate_plan(const snapshot& s, const round_plan& p, const std::string& policy_name) {
  return check_plan(*s.cl, p, policy_name, &s.jobs);
}

status check_runnable(const job& j, const std::vector<double>& throughput) {
  if (std::none_of(throughput.begin(), throughput.end(), [](double v) { return v > 0; }))
    return error{error_kind::invalid_input,
                 "job " + std::to_string(j.id) + " (" + j.job_type + ", scale " +
                     std::to_string(j.scale_factor) + ") can run on no GPU type of the cluster"};
  return {};
}

}  // namespace tessera
