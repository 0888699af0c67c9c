// The throughput matrices Gavel's policies optimise over (declared in gavel_family.hpp).
#include <algorithm>

#include "policies/gavel_family.hpp"

namespace tessera {

matrix policy_throughputs(const snapshot& s) {
  const std::size_t k = s.cl ? s.cl->types.size() : 0;
  matrix t(s.jobs.size(), std::vector<double>(k, 0.0));
  policy_throughputs_into(s, t);
  return t;
}

void policy_throughputs_into(const snapshot& s, matrix& t) {
  for (std::size_t m = 0; m < s.jobs.size() && m < t.size(); ++m) {
    const auto& tp = s.jobs[m].throughput;
    for (std::size_t j = 0; j < t[m].size() && j < tp.size(); ++j) t[m][j] = std::max(0.0, tp[j]);
  }
}

std::vector<double> equal_share_fractions(const snapshot& s, bool by_gpus) {
  std::vector<double> f(s.jobs.size(), 0.0);
  if (!s.cl) return f;
  double gpus = 0;
  for (const auto& ty : s.cl->types) gpus += ty.gpus;
  if (gpus <= 0) return f;
  double demand = 0;  // sum of scale factors of the snapshot's jobs
  for (const auto& j : s.jobs) demand += j.spec ? j.spec->scale_factor : 1;
  const double uniform = demand > 0 ? std::min(1.0, gpus / demand) : 1.0;
  const double per_job_gpus = gpus / static_cast<double>(std::max<std::size_t>(1, f.size()));
  for (std::size_t m = 0; m < f.size(); ++m) {
    const double scale = s.jobs[m].spec ? s.jobs[m].spec->scale_factor : 1;
    f[m] = by_gpus ? std::min(1.0, per_job_gpus / scale) : uniform;
  }
  return f;
}

std::vector<double> equal_share_throughputs(const snapshot& s, const matrix& t, bool by_gpus) {
  std::vector<double> eq(t.size(), 0.0);
  if (!s.cl) return eq;
  const auto& types = s.cl->types;
  double gpus = 0;
  for (const auto& ty : types) gpus += ty.gpus;
  if (gpus <= 0) return eq;
  const std::vector<double> f = equal_share_fractions(s, by_gpus);
  for (std::size_t m = 0; m < t.size() && m < f.size(); ++m) {
    double v = 0;
    for (std::size_t j = 0; j < types.size() && j < t[m].size(); ++j) v += t[m][j] * types[j].gpus;
    eq[m] = f[m] * v / gpus;
  }
  return eq;
}

}  // namespace tessera
