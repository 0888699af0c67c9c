#include "actors/task_layout.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace tessera {

std::vector<int> spread_tasks(int tasks, const std::vector<int>& weights) {
  std::vector<int> out(weights.size(), 0);
  const long long total = std::accumulate(weights.begin(), weights.end(), 0LL);
  if (total <= 0 || tasks <= 0) return out;
  std::vector<std::pair<long long, std::size_t>> rest;  // (remainder numerator, bin)
  int given = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const long long share = static_cast<long long>(tasks) * weights[i];
    out[i] = static_cast<int>(share / total);
    given += out[i];
    rest.emplace_back(share % total, i);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; given < tasks; ++k, ++given) ++out[rest[k].second];
  return out;
}

std::vector<copy_layout> layout_copies(const round_plan& p,
                                       const std::function<int(job_id)>& scale_of) {
  std::vector<copy_layout> out;
  std::map<copy_id, std::size_t> index;
  // Per copy: server -> (gpus, tasks, task-times).
  std::vector<std::map<int, copy_part>> by_server;
  for (const auto& as : p.assignments) {
    auto [it, fresh] = index.emplace(as.id(), out.size());
    if (fresh) {
      out.push_back(copy_layout{as.job, as.copy, scale_of(as.job), as.partner, {}});
      by_server.emplace_back();
    }
    const std::size_t c = it->second;
    const int tasks = as.tasks > 0 ? as.tasks : out[c].scale;
    std::vector<int> gpus;
    for (const auto& sh : as.shares) gpus.push_back(sh.gpus);
    const auto spread = spread_tasks(tasks, gpus);
    for (std::size_t i = 0; i < as.shares.size(); ++i) {
      auto& part = by_server[c][as.shares[i].server];
      part.server = as.shares[i].server;
      part.gpus += as.shares[i].gpus;
      part.tasks += spread[i];
      const int per_gpu = (spread[i] + as.shares[i].gpus - 1) / as.shares[i].gpus;
      part.task_times = std::max(part.task_times, per_gpu);
    }
  }
  for (std::size_t c = 0; c < out.size(); ++c) {
    int next = 0;
    for (auto& [server, part] : by_server[c]) {
      part.shard_begin = next;
      next += part.tasks;
      out[c].parts.push_back(part);
    }
  }
  return out;
}

}  // namespace tessera
