#include "policies/type_blind.hpp"

#include <algorithm>

namespace tessera {

namespace {

class type_blind final : public allocation_policy {
 public:
  explicit type_blind(std::unique_ptr<allocation_policy> inner) : inner_(std::move(inner)) {}

  bool recompute_every_round() const override { return inner_->recompute_every_round(); }

  result<allocation> allocate(const snapshot& s) override {
    if (!s.cl) return error{error_kind::internal, "snapshot has no cluster"};
    const std::size_t k = s.cl->types.size();
    if (pooled_servers_ != s.cl->servers.size()) {
      std::vector<server> servers = s.cl->servers;
      for (auto& sv : servers) {
        sv.gpu_type = "pooled";
        sv.speed = 1.0;
      }
      pooled_ = make_cluster(std::move(servers));
      pooled_servers_ = s.cl->servers.size();
    }
    snapshot p = s;
    p.cl = &pooled_;
    p.last_plan = nullptr;
    for (auto& jv : p.jobs) {
      double sum = 0;
      int n = 0;
      for (double t : jv.throughput)
        if (t > 0) sum += t, ++n;
      jv.throughput.assign(1, n > 0 ? sum / n : 0.0);
      jv.last_type = jv.last_type >= 0 ? 0 : -1;
    }
    auto y = inner_->allocate(p);
    if (!y) return y.err();
    allocation a;
    a.x.assign(s.jobs.size(), std::vector<double>(k, 0.0));
    std::vector<double> used(k, 0.0);
    for (std::size_t m = 0; m < s.jobs.size(); ++m) {
      const double ym = y->x.at(m).at(0);
      if (ym <= 0) continue;
      double usable = 0;
      for (std::size_t j = 0; j < k; ++j)
        if (s.jobs[m].throughput[j] > 0) usable += s.cl->types[j].gpus;
      if (usable <= 0) continue;
      for (std::size_t j = 0; j < k; ++j) {
        if (s.jobs[m].throughput[j] <= 0) continue;
        a.x[m][j] = ym * s.cl->types[j].gpus / usable;
        used[j] += s.jobs[m].spec->scale_factor * a.x[m][j];
      }
    }
    for (std::size_t j = 0; j < k; ++j)
      if (used[j] > s.cl->types[j].gpus)
        for (auto& row : a.x) row[j] *= s.cl->types[j].gpus / used[j];
    return a;
  }

 private:
  std::unique_ptr<allocation_policy> inner_;
  cluster pooled_;
  std::size_t pooled_servers_ = static_cast<std::size_t>(-1);
};

}  // namespace

std::unique_ptr<allocation_policy> make_type_blind(std::unique_ptr<allocation_policy> inner) {
  return std::make_unique<type_blind>(std::move(inner));
}

}  // namespace tessera
