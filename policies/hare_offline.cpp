#include "policies/hare_offline.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "policies/hare.hpp"
#include "runtime/server_throughput.hpp"

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
        fastest = std::max(fastest,
                           rates.rate_at(sv.id, j.job_type, j.scale_factor, multi).steps_per_s);
    bound.push_back(fastest > 0 ? j.total_steps / fastest : 0.0);
  }
  return bound;
}

std::vector<option_spec> hare_offline_options() { return hare_options(); }

namespace {

class hare_offline_policy final : public policy {
 public:
  explicit hare_offline_policy(hare_fill_params p) : p_(p) {}
  std::string name() const override { return "hare_offline"; }
  bool stacks_tasks() const override { return p_.relaxed; }

  result<round_plan> plan(const snapshot& s) override {
    std::vector<double> work(s.jobs.size());
    for (std::size_t i = 0; i < s.jobs.size(); ++i) work[i] = hare_remaining_work(s.jobs[i]);
    std::vector<std::size_t> order(s.jobs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (work[a] != work[b]) return work[a] < work[b];
      const job& ja = *s.jobs[a].spec;
      const job& jb = *s.jobs[b].spec;
      if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
      return ja.id < jb.id;
    });
    return hare_fill(s, order, p_, times_);
  }

 private:
  hare_fill_params p_;
  hare_task_times times_;
};

}  // namespace

std::unique_ptr<policy> make_hare_offline(const options& o) {
  hare_fill_params p;
  p.relaxed = o.get("relaxed") != 0;
  return std::make_unique<hare_offline_policy>(p);
}

}  // namespace tessera
