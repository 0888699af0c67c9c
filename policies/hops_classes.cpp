// Hops' server classes and their cached rates (step 1 of policies/hops.hpp; declared in
// policies/hops_internal.hpp).
#include <map>
#include <tuple>

#include "policies/hops.hpp"
#include "policies/hops_internal.hpp"

namespace tessera::detail {

bool hops_may_run_on(const cluster& cl, const job_view& jv, int server) {
  const int t = cl.servers[server].type_index;
  return jv.throughput.empty() ||
         (t >= 0 && t < static_cast<int>(jv.throughput.size()) && jv.throughput[t] > 0);
}

void hops_server_classes::refresh(const snapshot& s, const server_throughput& rt, bool force) {
  if (!force && &rt == rt_ && rt.version() == rt_version_ && s.cl == classes_for_ &&
      !classes_.empty())
    return;
  rt_ = &rt;
  rt_version_ = rt.version();
  classes_for_ = s.cl;
  ++generation_;
  cache_.clear();
  classes_.clear();
  class_of_.assign(s.cl->servers.size(), -1);
  std::map<std::tuple<int, double, int, int>, int> index;
  for (const auto& sv : s.cl->servers) {
    const auto key =
        std::make_tuple(sv.type_index, sv.speed, sv.gpus, rt.has_measurements(sv.id) ? sv.id : -1);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, static_cast<int>(classes_.size())).first;
      classes_.push_back(hops_class{{}, sv.gpus});
    }
    classes_[it->second].servers.push_back(sv.id);
    class_of_[sv.id] = it->second;
  }
}

const hops_class_rates& hops_server_classes::rates_for(const std::string& job_type, int gpus) {
  std::string key = job_type;
  key += '\x1f';
  key += std::to_string(gpus);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto cr = std::make_unique<hops_class_rates>();
  cr->single.assign(classes_.size(), 0.0);
  cr->multi.assign(classes_.size(), 0.0);
  double best_single = 0;
  int best_k = -1;
  for (std::size_t k = 0; k < classes_.size(); ++k) {
    const int rep = classes_[k].servers.front();
    if (gpus <= classes_[k].capacity) {
      cr->single[k] = rt_->rate_at(rep, job_type, gpus, false).steps_per_s;
      if (cr->single[k] > 0) cr->fits_one_server = true;
    }
    if (gpus >= 2) cr->multi[k] = rt_->rate_at(rep, job_type, gpus, true).steps_per_s;
    if (cr->single[k] > best_single) {
      best_single = cr->single[k];
      best_k = static_cast<int>(k);
    }
  }
  if (best_k >= 0) {
    cr->sensitivity = placement_sensitivity(gpus, cr->single[best_k], cr->multi[best_k]);
  } else if (gpus >= 2) {
    // No server holds the job: judge it on the type table's one-server entry anyway.
    const int rep = classes_.empty() ? -1 : classes_.front().servers.front();
    const double one = rep < 0 ? 0 : rt_->rate_at(rep, job_type, gpus, false).steps_per_s;
    cr->sensitivity = placement_sensitivity(gpus, one, cr->multi.empty() ? 0 : cr->multi[0]);
  }
  return *cache_.emplace(std::move(key), std::move(cr)).first->second;
}

}  // namespace tessera::detail
