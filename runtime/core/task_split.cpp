#include "runtime/core/task_split.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

int tasks_per_gpu(const assignment& a) {
  const int g = a.gpus();
  if (g <= 0 || a.tasks <= 0) return 0;
  return (a.tasks + g - 1) / g;
}

double task_seconds(const server_throughput& rates, int server, const std::string& job_type,
                    int scale, bool multi_server) {
  const double r = rates.rate_at(server, job_type, scale, multi_server).steps_per_s;
  return r > 0 ? 1.0 / r : std::numeric_limits<double>::infinity();
}

bool spans_servers(const std::vector<const assignment*>& parts) {
  int first = -1;
  for (const auto* a : parts)
    for (const auto& sh : a->shares) {
      if (first < 0) first = sh.server;
      if (sh.server != first) return true;
    }
  return false;
}

double split_step_seconds(const server_throughput& rates, const job& j,
                          const std::vector<const assignment*>& parts) {
  const double inf = std::numeric_limits<double>::infinity();
  if (parts.empty()) return inf;
  const bool multi = spans_servers(parts);
  double step = 0;
  for (const auto* a : parts) {
    const int per_gpu = tasks_per_gpu(*a);
    if (per_gpu <= 0 || a->shares.empty()) return inf;
    double slowest = 0;
    for (const auto& sh : a->shares)
      slowest =
          std::max(slowest, task_seconds(rates, sh.server, j.job_type, j.scale_factor, multi));
    step = std::max(step, per_gpu * slowest);
  }
  return step;
}

double split_rate(const server_throughput& rates, const job& j,
                  const std::vector<const assignment*>& parts) {
  const double s = split_step_seconds(rates, j, parts);
  return std::isfinite(s) && s > 0 ? 1.0 / s : 0.0;
}

bool split_runs_on(const snapshot& s, const job_view& jv, int server) {
  const auto& sv = s.cl->servers.at(static_cast<std::size_t>(server));
  const int t = sv.type_index;
  if (t < 0 || t >= static_cast<int>(jv.throughput.size())) return false;
  if (jv.throughput[t] > 0) return true;
  // A type with fewer GPUs than K hosts no gang, but a task split may use it.
  if (!s.rates || s.cl->types[t].gpus >= jv.spec->scale_factor) return false;
  const auto r = s.rates->rate_at(server, jv.spec->job_type, jv.spec->scale_factor, false);
  return r.steps_per_s > 0 && r.source != throughput_source::analytic;
}

}  // namespace tessera
