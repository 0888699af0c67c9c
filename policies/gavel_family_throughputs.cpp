// The throughput matrices Gavel's policies optimise over (declared in gavel_family.hpp).
#include <algorithm>

#include "policies/gavel_family.hpp"

namespace tessera {

matrix policy_throughputs(const snapshot& s) {
  const std::size_t k = s.cl ? s.cl->types.size() : 0;
  matrix t(s.jobs.size(), std::vector<double>(k, 0.0));
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const auto& tp = s.jobs[m].throughput;
    for (std::size_t j = 0; j < k && j < tp.size(); ++j) t[m][j] = std::max(0.0, tp[j]);
  }
  return t;
}

std::vector<double> equal_share_throughputs(const snapshot& s, const matrix& t) {
  std::vector<double> eq(t.size(), 0.0);
  if (!s.cl) return eq;
  const auto& types = s.cl->types;
  double gpus = 0;
  for (const auto& ty : types) gpus += ty.gpus;
  if (gpus <= 0) return eq;
  double demand = 0;  // sum of scale factors of the snapshot's jobs
  for (const auto& j : s.jobs) demand += j.spec ? j.spec->scale_factor : 1;
  const double f = demand > 0 ? std::min(1.0, gpus / demand) : 1.0;
  for (std::size_t m = 0; m < t.size(); ++m) {
    double v = 0;
    for (std::size_t j = 0; j < types.size() && j < t[m].size(); ++j)
      v += t[m][j] * types[j].gpus;
    eq[m] = f * v / gpus;
  }
  return eq;
}

}  // namespace tessera
