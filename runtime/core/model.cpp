#include "runtime/core/model.hpp"

#include <algorithm>

namespace tessera {

int cluster::total_gpus() const {
  int n = 0;
  for (const auto& s : servers) n += s.gpus;
  return n;
}

int cluster::type_index(const std::string& name) const {
  for (std::size_t j = 0; j < types.size(); ++j)
    if (types[j].name == name) return static_cast<int>(j);
  return -1;
}

cluster make_cluster(std::vector<server> servers) {
  cluster c;
  std::vector<double> speed_sum;
  for (std::size_t i = 0; i < servers.size(); ++i) {
    auto& s = servers[i];
    s.id = static_cast<int>(i);
    int j = c.type_index(s.gpu_type);
    if (j < 0) {
      j = static_cast<int>(c.types.size());
      c.types.push_back(gpu_type{s.gpu_type, 0, 1.0});
      speed_sum.push_back(0.0);
    }
    s.type_index = j;
    c.types[j].gpus += s.gpus;
    speed_sum[j] += s.speed * s.gpus;
  }
  for (std::size_t j = 0; j < c.types.size(); ++j)
    c.types[j].mean_speed = c.types[j].gpus > 0 ? speed_sum[j] / c.types[j].gpus : 1.0;
  c.servers = std::move(servers);
  return c;
}

std::vector<int> gpu_options(const job& j) {
  std::vector<int> out;
  for (int g : j.acceptable_gpus)
    if (g > 0) out.push_back(g);
  if (out.empty()) out.push_back(std::max(1, j.scale_factor));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace tessera
