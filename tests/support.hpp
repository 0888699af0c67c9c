#pragma once
// Small builders shared by the tests.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/policy.hpp"
#include "runtime/model.hpp"
#include "runtime/plan.hpp"
#include "runtime/throughput.hpp"

namespace tessera::test {

/// A job with the fields the scheduler reads; the Gavel command fields stay empty.
inline job make_job(job_id id, const std::string& type, int scale, double steps,
                    double arrival = 0, double weight = 1) {
  job j;
  j.id = id;
  j.job_type = type;
  j.scale_factor = scale;
  j.total_steps = steps;
  j.arrival = arrival;
  j.priority_weight = weight;
  return j;
}

/// A snapshot of `jobs` (all fresh) at time `now` with per-type throughputs given directly
/// and no per-server model (policies then scale the per-type view by speed factors).
inline snapshot make_snapshot(const cluster& cl, const std::vector<job>& jobs,
                              const std::vector<std::vector<double>>& tput, double now = 0) {
  snapshot s;
  s.now = now;
  s.round_length = 360;
  s.cl = &cl;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    job_view v;
    v.spec = &jobs[i];
    v.remaining_steps = jobs[i].total_steps;
    v.throughput = tput[i];
    s.jobs.push_back(v);
  }
  return s;
}

/// Replays a fixed plan every round (for simulator tests): the assignments of active jobs.
class fixed_plan final : public policy {
 public:
  explicit fixed_plan(std::vector<assignment> a) : a_(std::move(a)) {}
  std::string name() const override { return "fixed"; }
  result<round_plan> plan(const snapshot& s) override {
    round_plan p;
    for (const auto& as : a_)
      for (const auto& jv : s.jobs)
        if (jv.spec->id == as.job) p.assignments.push_back(as);
    return p;
  }

 private:
  std::vector<assignment> a_;
};

/// A cluster, a throughput table for it and a job set (property tests).
struct instance {
  cluster cl;
  throughput_table table;
  std::vector<job> jobs;
};

/// Size limits of random_instance.
struct instance_limits {
  int max_servers = 6;    ///< 1 .. max_servers servers
  int max_jobs = 12;      ///< 1 .. max_jobs jobs
  int max_steps = 20000;  ///< total steps in [200, 200 + max_steps)
};

/// 1-6 servers of 1-8 GPUs over 1-3 types (some at half speed), 1-12 jobs of scale 1-8 (at
/// most the widest type's GPUs), random consolidated throughputs, arrivals in [0, 4000) s
/// (a third at 0), weights 1 or 2; `lim` changes the counts. Every random draw is its own
/// statement, so the instances are the same with every compiler.
inline instance random_instance(std::mt19937& rng, const instance_limits& lim = {}) {
  instance in;
  const char* names[] = {"v100", "p100", "k80"};
  const int ntypes = 1 + static_cast<int>(rng() % 3);
  std::vector<server> servers;
  const int nservers = 1 + static_cast<int>(rng() % static_cast<unsigned>(lim.max_servers));
  for (int i = 0; i < nservers; ++i) {
    const int gpus = 1 << (rng() % 4);
    const double speed = rng() % 4 == 0 ? 0.5 : 1.0;
    servers.push_back({0, "s" + std::to_string(i), names[i % ntypes], 0, gpus, speed});
  }
  in.cl = make_cluster(servers);
  int widest = 0;
  for (const auto& t : in.cl.types) widest = std::max(widest, t.gpus);
  std::uniform_real_distribution<double> tput(0.2, 5.0);
  const int njobs = 1 + static_cast<int>(rng() % static_cast<unsigned>(lim.max_jobs));
  for (int m = 0; m < njobs; ++m) {
    const std::string type = "model" + std::to_string(m % 4);
    int scale = 1 << (rng() % 4);
    while (scale > widest) scale /= 2;
    for (const auto& t : in.cl.types)
      if (!in.table.isolated(t.name, {type, scale}))
        in.table.set_isolated(t.name, {type, scale}, tput(rng) * scale);
    const double steps = 200 + static_cast<double>(rng() % static_cast<unsigned>(lim.max_steps));
    const double arrival = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 4000);
    const double weight = 1 + static_cast<double>(rng() % 2);
    in.jobs.push_back(make_job(m, type, scale, steps, arrival, weight));
  }
  return in;
}

}  // namespace tessera::test
