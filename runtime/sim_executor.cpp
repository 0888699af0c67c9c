#include "runtime/sim_executor.hpp"

#include <algorithm>
#include <unordered_map>

#include "runtime/task_split.hpp"

namespace tessera {

std::vector<copy_progress> run_copies(job_id job, double remaining,
                                      const std::vector<copy_run>& copies, double start,
                                      double length, double aggregation_s,
                                      double efficiency) {
  // Copy c trains from a_c (its restart cost) to e_c (the end of the training window
  // W = length - aggregation, or earlier when its step budget runs out); the job's progress
  // at time t is efficiency * P(t), P(t) = sum_c r_c * clamp(t - a_c, 0, e_c - a_c), piecewise
  // linear; it finishes when P reaches `raw` = remaining / efficiency.
  const double raw = remaining / efficiency;
  const double window = std::max(0.0, length - aggregation_s);
  const std::size_t n = copies.size();
  std::vector<double> a(n), e(n);
  for (std::size_t c = 0; c < n; ++c) {
    a[c] = std::min(copies[c].lost, window);
    e[c] = window;
    if (copies[c].step_budget >= 0 && copies[c].rate > 0)
      e[c] = std::min(e[c], a[c] + copies[c].step_budget / copies[c].rate);
    e[c] = std::max(e[c], a[c]);
  }
  auto progress = [&](double t) {
    double sum = 0;
    for (std::size_t c = 0; c < n; ++c)
      sum += copies[c].rate * std::clamp(t - a[c], 0.0, e[c] - a[c]);
    return sum;
  };
  std::vector<copy_progress> out(n);
  for (std::size_t c = 0; c < n; ++c) {
    out[c].job = job;
    out[c].copy = copies[c].copy;
  }
  if (progress(window) >= raw) {
    // Walk the breakpoints to the segment where P reaches `remaining`, then solve linearly.
    std::vector<double> bp{0.0, window};
    for (std::size_t c = 0; c < n; ++c) {
      bp.push_back(a[c]);
      bp.push_back(e[c]);
    }
    std::sort(bp.begin(), bp.end());
    double t_star = window;
    for (std::size_t i = 0; i + 1 < bp.size(); ++i) {
      const double lo = bp[i], hi = bp[i + 1];
      const double p_hi = progress(hi);
      if (p_hi < raw || hi <= lo) continue;
      const double p_lo = progress(lo);
      double slope = 0;  // sum of rates of copies training throughout (lo, hi)
      for (std::size_t c = 0; c < n; ++c)
        if (a[c] <= lo && e[c] >= hi) slope += copies[c].rate;
      t_star = slope > 0 ? lo + (raw - p_lo) / slope : hi;
      t_star = std::clamp(t_star, lo, hi);
      break;
    }
    double credited = 0;
    for (std::size_t c = 0; c < n; ++c) {
      out[c].steps = efficiency * copies[c].rate * std::clamp(t_star - a[c], 0.0, e[c] - a[c]);
      credited += out[c].steps;
      out[c].busy_seconds = std::min(length, t_star + aggregation_s);
      out[c].finished = true;
      out[c].finish_time = start + out[c].busy_seconds;
    }
    out[0].steps += remaining - credited;  // rounding: the copies' sum is exactly `remaining`
    return out;
  }
  for (std::size_t c = 0; c < n; ++c) {
    out[c].steps = efficiency * copies[c].rate * (e[c] - a[c]);
    out[c].busy_seconds = a[c] >= window ? length : std::min(length, e[c] + aggregation_s);
  }
  return out;
}

sim_executor::sim_executor(const cluster& cl, const throughput_table& table,
                           double restart_cost)
    : rates_(cl, table), restart_cost_(restart_cost) {}

sim_executor::sim_executor(const cluster& cl, const throughput_table& table,
                           double restart_cost, copy_aggregation aggregation)
    : rates_(cl, table), restart_cost_(restart_cost), aggregation_(aggregation) {}

sim_executor::sim_executor(const cluster& cl, const throughput_table& table,
                           double restart_cost, copy_aggregation aggregation,
                           copy_efficiency efficiency)
    : rates_(cl, table),
      restart_cost_(restart_cost),
      aggregation_(aggregation),
      efficiency_(efficiency) {}

double sim_executor::rate(const job& j, const std::vector<server_share>& shares) const {
  return rates_.rate(j.job_type, shares);
}

int sim_executor::restarts(job_id id) const {
  auto it = restarts_.find(id);
  return it == restarts_.end() ? 0 : it->second;
}

double sim_executor::placed_rate(const std::unordered_map<job_id, const job_view*>& jobs,
                                 const job_view& jv, const std::vector<const assignment*>& parts,
                                 bool split) const {
  if (split) return split_rate(rates_, *jv.spec, parts);
  const assignment& as = *parts.front();
  if (as.partner < 0) return rate(*jv.spec, as.shares);
  // Space sharing: its co-located throughput beside its partner.
  auto other = jobs.find(as.partner);
  if (other == jobs.end()) return 0;
  const auto pair = rates_.colocated_rate(jv.spec->job_type, other->second->spec->job_type,
                                          jv.spec->scale_factor, as.shares);
  return pair ? pair->first : 0.0;
}

result<std::vector<copy_progress>> sim_executor::execute(const snapshot& s,
                                                         const round_plan& p) {
  std::unordered_map<job_id, const job_view*> jobs;
  for (const auto& jv : s.jobs) jobs[jv.spec->id] = &jv;
  // The assignments of each job copy, in plan order of first appearance: one for a gang (or
  // a Hops/Hadar placement), several for a task split (runtime/task_split.hpp).
  struct copy_group {
    job_id job = 0;
    int copy = 0;
    std::vector<const assignment*> parts;
  };
  std::vector<copy_group> groups;
  {
    std::map<copy_id, std::size_t> index;
    for (const auto& as : p.assignments) {
      auto [it, fresh] = index.emplace(as.id(), groups.size());
      if (fresh) groups.push_back(copy_group{as.job, as.copy, {}});
      groups[it->second].parts.push_back(&as);
    }
  }
  std::vector<copy_progress> out;
  std::unordered_map<job_id, std::vector<server_share>> now_shares;
  std::map<copy_id, std::vector<server_share>> now_copy_shares;
  std::unordered_map<job_id, int> copies;  // copies per job in this plan
  for (const auto& g : groups) ++copies[g.job];
  std::vector<job_id> forked_order;        // forked jobs, in plan order
  std::unordered_map<job_id, std::vector<copy_run>> forked;
  for (const auto& g : groups) {
    auto it = jobs.find(g.job);
    if (it == jobs.end())
      return error{error_kind::internal,
                   "plan names job " + std::to_string(g.job) + ", which is not active"};
    const job_view& jv = *it->second;
    const assignment& as = *g.parts.front();
    const bool split = g.parts.size() > 1 || as.tasks > 0;
    // A gang runs at the placement's rate; a task split at 1 / its step time. Its shares are
    // those of all its parts (for the restart-cost comparison with the previous round) and its
    // step budget the tightest one given.
    std::vector<server_share> split_shares;
    double budget = as.step_budget;
    if (split)
      for (const auto* a : g.parts) {
        split_shares.insert(split_shares.end(), a->shares.begin(), a->shares.end());
        if (a->step_budget >= 0) budget = budget < 0 ? a->step_budget
                                                     : std::min(budget, a->step_budget);
      }
    const std::vector<server_share>& shares = split ? split_shares : as.shares;
    const double r = placed_rate(jobs, jv, g.parts, split);
    if (r <= 0)
      return error{error_kind::internal, "job " + std::to_string(g.job) + " (" +
                                             jv.spec->job_type +
                                             ") placed where it has no throughput"};
    bool moved = true;
    if (g.copy == 0) {
      auto prev = last_shares_.find(g.job);
      moved = prev == last_shares_.end() || prev->second != shares;
    } else {
      auto prev = last_copy_shares_.find({g.job, g.copy});
      moved = prev == last_copy_shares_.end() || prev->second != shares;
    }
    const double lost = moved ? std::min(restart_cost_, p.length) : 0.0;
    if (moved && jv.steps_done > 0) ++restarts_[g.job];
    if (copies[g.job] > 1) {  // a forked job: its copies run together below
      if (g.copy == 0)
        now_shares[g.job] = shares;
      else
        now_copy_shares[{g.job, g.copy}] = shares;
      if (forked.find(g.job) == forked.end()) forked_order.push_back(g.job);
      forked[g.job].push_back(copy_run{g.copy, r, lost, budget});
      continue;
    }
    double steps = r * (p.length - lost);
    if (budget >= 0) steps = std::min(steps, budget);
    copy_progress cp;
    cp.job = g.job;
    cp.copy = g.copy;
    if (steps >= jv.remaining_steps) {
      cp.steps = jv.remaining_steps;
      cp.finished = true;
      cp.busy_seconds = lost + jv.remaining_steps / r;
      cp.finish_time = p.start + cp.busy_seconds;
    } else {
      cp.steps = steps;
      cp.busy_seconds = lost + steps / r;
    }
    now_shares[g.job] = shares;
    out.push_back(cp);
  }
  for (const job_id id : forked_order) {
    const job_view& jv = *jobs.at(id);
    const auto& runs = forked.at(id);
    const double eff = efficiency_.factor(jv.spec->job_type, static_cast<int>(runs.size()));
    auto ran = run_copies(id, jv.remaining_steps, runs, p.start, p.length,
                          aggregation_.seconds(), eff);
    out.insert(out.end(), ran.begin(), ran.end());
  }
  last_shares_ = std::move(now_shares);
  last_copy_shares_ = std::move(now_copy_shares);
  return out;
}

}  // namespace tessera
