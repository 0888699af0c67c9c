#include "policies/hare_offline.hpp"

#include <algorithm>
#include <limits>

#include "policies/hare.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

double hare_remaining_work(const job_view& jv) {
  const double best = hare_best_rate(jv);
  if (!(best > 0)) return std::numeric_limits<double>::infinity();
  const double w = jv.spec->priority_weight > 0 ? jv.spec->priority_weight : 1.0;
  return std::max(0.0, jv.remaining_steps) * jv.spec->scale_factor / best / w;
}

std::vector<double> hare_offline_lower_bound(const cluster& cl, const throughput_table& table,
                                             const std::vector<job>& jobs) {
  const server_throughput rates(cl, table);
  std::vector<double> bound;
  bound.reserve(jobs.size());
  for (const auto& j : jobs) {
    double fastest = 0;
    for (const auto& sv : cl.servers)
      for (const bool multi : {false, true})
        fastest =
            std::max(fastest, rates.rate_at(sv.id, j.job_type, j.scale_factor, multi).steps_per_s);
    bound.push_back(fastest > 0 ? j.total_steps / fastest : 0.0);
  }
  return bound;
}

std::vector<option_spec> hare_offline_options() { return hare_options(); }

std::unique_ptr<policy> make_hare_offline(const std::string& name, const options& o) {
  hare_fill_params p;
  p.relaxed = o.flag("relaxed");
  return make_hare_ordered(name, hare_remaining_work, p);
}

}  // namespace tessera
