#include "actors/summary.hpp"

#include <algorithm>
#include <numeric>

namespace tessera::actors {

schedule_result schedule_of(const run_summary& s, const std::string& policy, int total_gpus) {
  schedule_result r;
  r.policy = policy;
  r.total_gpus = total_gpus;
  r.complete = s.ok;
  r.rounds = s.round_records;
  for (const auto& j : s.jobs) {
    job_record rec;
    rec.id = j.id;
    rec.job_type = j.job_type;
    rec.scale_factor = j.scale;
    rec.total_steps = static_cast<double>(j.total_steps);
    rec.arrival = j.arrival;
    rec.first_start = j.first_start;
    rec.finish = j.finished ? j.finish : -1;
    rec.steps_done = static_cast<double>(j.steps);
    rec.run_time = j.run_time;
    rec.gpu_seconds = std::accumulate(j.busy_gpu_seconds.begin(), j.busy_gpu_seconds.end(), 0.0);
    rec.restarts = j.restarts;
    r.end_time = std::max(r.end_time, rec.finish);
    r.jobs.push_back(std::move(rec));
  }
  return r;
}

metrics run_metrics(const run_summary& s, const std::string& policy, int total_gpus) {
  return compute_metrics(schedule_of(s, policy, total_gpus));
}

}  // namespace tessera::actors
