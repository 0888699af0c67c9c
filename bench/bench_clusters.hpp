#pragma once
// Clusters shared by the bench programs.
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/cluster_config.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace_gen.hpp"

namespace tessera::bench {

/// `base`'s servers scaled to `gpus`: below its size every k-th server (k = its GPUs / gpus),
/// above it whole copies of it, servers renamed "-cN" per copy.
inline cluster scaled(const cluster& base, int gpus) {
  std::vector<server> out;
  if (gpus < base.total_gpus()) {
    const int step = base.total_gpus() / gpus;
    for (std::size_t i = 0; i < base.servers.size(); i += step) out.push_back(base.servers[i]);
  } else {
    for (int copy = 0; copy * base.total_gpus() < gpus; ++copy)
      for (auto sv : base.servers) {
        sv.name += "-c" + std::to_string(copy);
        out.push_back(sv);
      }
  }
  return make_cluster(out);
}

/// Hops' setting for the policy benches: the bundled throughput table, config/hops_512.toml
/// (`config_dir` is the repository's config/) and `cfg`'s generated trace.
struct hops_setting {
  throughput_table table;
  cluster base;
  std::vector<job> jobs;
};

/// Loads hops_setting; the error's message when something cannot be loaded.
inline result<hops_setting> load_hops_setting(const std::string& config_dir,
                                              const trace_gen_config& cfg) {
  auto table = throughput_table::load_bundled();
  if (!table) return table.err();
  auto base = load_cluster(config_dir + "/hops_512.toml");
  if (!base) return base.err();
  auto templates = bundled_job_templates();
  if (!templates) return templates.err();
  auto jobs = generate_trace(cfg, templates.value(), table.value());
  if (!jobs) return jobs.err();
  return hops_setting{std::move(table.value()), std::move(base.value()), std::move(jobs.value())};
}

}  // namespace tessera::bench
