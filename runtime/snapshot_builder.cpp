#include "runtime/snapshot_builder.hpp"

#include <algorithm>
#include <unordered_set>

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

status validate_plan(const cluster& cl, const round_plan& p, const std::string& policy_name) {
  std::vector<int> used(cl.servers.size(), 0);
  std::unordered_set<long long> seen;
  for (const auto& as : p.assignments) {
    if (!seen.insert(as.job * 1024 + as.copy).second)
      return error{error_kind::internal,
                   policy_name + " placed job " + std::to_string(as.job) + " twice"};
    for (const auto& sh : as.shares) {
      if (sh.server < 0 || sh.server >= static_cast<int>(cl.servers.size()) || sh.gpus <= 0)
        return error{error_kind::internal, policy_name + " used an invalid server share"};
      used[sh.server] += sh.gpus;
      if (used[sh.server] > cl.servers[sh.server].gpus)
        return error{error_kind::internal,
                     policy_name + " over-filled server " + cl.servers[sh.server].name};
    }
  }
  return {};
}

status check_runnable(const job& j, const std::vector<double>& throughput) {
  if (std::none_of(throughput.begin(), throughput.end(), [](double v) { return v > 0; }))
    return error{error_kind::invalid_input,
                 "job " + std::to_string(j.id) + " (" + j.job_type + ", scale " +
                     std::to_string(j.scale_factor) + ") can run on no GPU type of the cluster"};
  return {};
}

}  // namespace tessera
