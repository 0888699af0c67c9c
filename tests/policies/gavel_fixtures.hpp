#pragma once
// Hand-built clusters and snapshots for the Gavel allocation-policy tests.

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"

namespace tessera::test {

/// A cluster, the jobs' specs and a snapshot pointing at both. Build with `add_type` and
/// `add_job`, then call `finish()` before using `snap`; keep the fixture alive meanwhile.
struct gavel_fixture {
  std::vector<server> servers;
  cluster cl;
  std::vector<job> specs;
  std::vector<job_view> views;
  snapshot snap;

  /// Adds one server of `gpus` GPUs of a new type named `name`.
  void add_type(const std::string& name, int gpus) {
    server s;
    s.name = name + "-0";
    s.gpu_type = name;
    s.gpus = gpus;
    servers.push_back(s);
  }
  /// Adds a job with throughput per type (steps/s), scale factor and steps.
  void add_job(std::vector<double> tput, int scale = 1, double total_steps = 1000,
               double remaining = -1, double arrival = 0, double weight = 1) {
    job j;
    j.id = static_cast<job_id>(specs.size());
    j.job_type = "model" + std::to_string(j.id);
    j.scale_factor = scale;
    j.total_steps = total_steps;
    j.arrival = arrival;
    j.priority_weight = weight;
    specs.push_back(j);
    job_view v;
    v.remaining_steps = remaining < 0 ? total_steps : remaining;
    v.steps_done = total_steps - v.remaining_steps;
    v.throughput = std::move(tput);
    views.push_back(v);
  }
  /// Builds the cluster and the snapshot (time `now`).
  const snapshot& finish(double now = 0) {
    cl = make_cluster(servers);
    snap = snapshot{};
    snap.now = now;
    snap.cl = &cl;
    snap.jobs = views;
    for (std::size_t m = 0; m < specs.size(); ++m) snap.jobs[m].spec = &specs[m];
    return snap;
  }
};

/// A random small instance: 1-4 GPU types of 1-16 GPUs, 1-12 jobs with scale factors
/// 1/2/4/8, throughputs in [0.2, 20] with about one in four zero, random progress, ages
/// and weights.
inline std::unique_ptr<gavel_fixture> random_fixture(std::mt19937& rng) {
  auto f = std::make_unique<gavel_fixture>();
  const int ntypes = 1 + static_cast<int>(rng() % 4);
  for (int j = 0; j < ntypes; ++j)
    f->add_type("t" + std::to_string(j), 1 + static_cast<int>(rng() % 16));
  const int njobs = 1 + static_cast<int>(rng() % 12);
  std::uniform_real_distribution<double> tput(0.2, 20.0);
  const int scales[] = {1, 2, 4, 8};
  for (int m = 0; m < njobs; ++m) {
    std::vector<double> t(ntypes);
    for (auto& v : t) v = rng() % 4 == 0 ? 0.0 : tput(rng);
    const double total = 100 + static_cast<double>(rng() % 10000);
    const double remaining = rng() % 3 == 0 ? total : total * (0.05 + 0.9 * (rng() % 100) / 100.0);
    f->add_job(t, scales[rng() % 4], total, remaining, static_cast<double>(rng() % 5000),
               1.0 + static_cast<double>(rng() % 3));
  }
  f->finish(5000 + static_cast<double>(rng() % 5000));
  return f;
}

}  // namespace tessera::test
