#include "runtime/sim/sim_executor.hpp"

#include <algorithm>
#include <unordered_map>

#include "runtime/core/task_split.hpp"

namespace tessera {

std::vector<copy_progress> run_copies(job_id job, double remaining,
                                      const std::vector<copy_run>& copies, double start,
                                      double length, double aggregation_s, double efficiency) {
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

sim_executor::sim_executor(const cluster& cl, const throughput_table& table, double restart_cost)
    : rates_(cl, table), restart_cost_(restart_cost) {}

sim_executor::sim_executor(const cluster& cl, const throughput_table& table, double restart_cost,
                           copy_aggregation aggregation)
    : rates_(cl, table), restart_cost_(restart_cost), aggregation_(aggregation) {}

sim_executor::sim_executor(const cluster& cl, const throughput_table& table, double restart_cost,
                           copy_aggregation aggregation, copy_efficiency efficiency)
    : rates_(cl, table),
      restart_cost_(restart_cost),
      aggregation_(aggregation),
      efficiency_(efficiency) {}

double sim_executor::rate(const job& j, const std::vector<server_share>& shares) const {
  return rates_.rate(j.job_type, shares);
}

double sim_executor::placed_rate_alone(const job& j, const std::vector<server_share>& shares,
                                       job_memory& m) {
  if (m.spec != &j) {  // first seen, or another job object under that id
    m.spec = &j;
    m.row = rates_.tier2_row(j.job_type);
  }
  return rates_.rate(j.job_type, m.row, shares);
}

int sim_executor::restarts(job_id id) const {
  const int* n = restarts_.find(id);
  return n ? *n : 0;
}

double sim_executor::placed_rate(const snapshot& s, const round_plan& p, const job_view& jv,
                                 const copy_group& g, job_memory& m) {
  const assignment& as = *g.first;
  if (g.split) {
    std::vector<const assignment*> parts;
    for (std::size_t a = g.first_index; a != npos; a = next_part_[a])
      parts.push_back(&p.assignments[a]);
    return split_rate(rates_, *jv.spec, parts);
  }
  if (as.partner < 0) return placed_rate_alone(*jv.spec, as.shares, m);
  // Space sharing: its co-located throughput beside its partner.
  const std::size_t other = index_.find(as.partner);
  if (other == job_index::npos) return 0;
  const auto pair = rates_.colocated_rate(jv.spec->job_type, s.jobs[other].spec->job_type,
                                          jv.spec->scale_factor, as.shares);
  return pair ? pair->first : 0.0;
}

status sim_executor::group_copies(const snapshot& s, const round_plan& p) {
  index_.assign(s.jobs.size(), [&s](std::size_t i) { return s.jobs[i].spec->id; });
  groups_.clear();
  first_group_.assign(s.jobs.size(), npos);
  next_part_.assign(p.assignments.size(), npos);
  std::vector<std::size_t> last_part;  // per group: its last assignment so far
  for (std::size_t a = 0; a < p.assignments.size(); ++a) {
    const assignment& as = p.assignments[a];
    const std::size_t view = index_.find(as.job);
    if (view == job_index::npos)
      return error{error_kind::internal,
                   "plan names job " + std::to_string(as.job) + ", which is not active"};
    std::size_t g = first_group_[view];
    while (g != npos && groups_[g].copy != as.copy) g = groups_[g].next_of_job;
    if (g == npos) {  // the copy's first assignment: a new group, chained to its job's
      g = groups_.size();
      groups_.push_back(copy_group{as.job, as.copy, view, &as, a, false, first_group_[view]});
      first_group_[view] = g;
      last_part.push_back(a);
      continue;
    }
    groups_[g].split = true;
    next_part_[last_part[g]] = a;
    last_part[g] = a;
  }
  for (auto& g : groups_) g.split = g.split || g.first->tasks > 0;
  return {};
}

result<std::vector<copy_progress>> sim_executor::execute(const snapshot& s, const round_plan& p) {
  if (auto st = group_copies(s, p); !st) return st.err();
  std::vector<copy_progress> out;
  out.reserve(groups_.size());
  std::vector<job_id> forked_order;  // forked jobs, in plan order
  std::unordered_map<job_id, std::vector<copy_run>> forked_runs;
  for (const auto& g : groups_) {
    const job_view& jv = s.jobs[g.view];
    const assignment& as = *g.first;
    // A gang runs at the placement's rate; a task split at 1 / its step time. Its shares are
    // those of all its parts (for the restart-cost comparison with the previous round) and its
    // step budget the tightest one given.
    std::vector<server_share> split_shares;
    double budget = as.step_budget;
    if (g.split)
      for (std::size_t a = g.first_index; a != npos; a = next_part_[a]) {
        const assignment& part = p.assignments[a];
        split_shares.insert(split_shares.end(), part.shares.begin(), part.shares.end());
        if (part.step_budget >= 0)
          budget = budget < 0 ? part.step_budget : std::min(budget, part.step_budget);
      }
    const std::vector<server_share>& shares = g.split ? split_shares : as.shares;
    job_memory& m = jobs_[g.job];  // the one look-up of the job this round
    const double r = placed_rate(s, p, jv, g, m);
    if (r <= 0)
      return error{error_kind::internal, "job " + std::to_string(g.job) + " (" + jv.spec->job_type +
                                             ") placed where it has no throughput"};
    // Forked (two or more copies in this plan): its copies run together below.
    const bool forked = groups_[first_group_[g.view]].next_of_job != npos;
    const bool moved = moved_since_last_round(g, shares, forked, m);
    const double lost = forked
                            ? (moved ? std::min(restart_cost_of(jv.spec->job_type), p.length) : 0.0)
                            : restart_lost(m, jv.spec->job_type, moved, p.length);
    if (moved && jv.steps_done > 0) ++restarts_[g.job];
    int gpus = 0;
    for (const auto& sh : shares) gpus += sh.gpus;
    if (forked) {
      if (forked_runs.find(g.job) == forked_runs.end()) forked_order.push_back(g.job);
      forked_runs[g.job].push_back(copy_run{g.copy, r, lost, budget});
      forked_gpus_[{g.job, g.copy}] = gpus;
      continue;
    }
    out.push_back(run_gang(g, jv, r, lost, budget, p));
    out.back().gpus = gpus;
  }
  for (const job_id id : forked_order) {
    const job_view& jv = s.jobs[index_.find(id)];
    const auto& runs = forked_runs.at(id);
    const double eff = efficiency_.factor(jv.spec->job_type, static_cast<int>(runs.size()));
    auto ran =
        run_copies(id, jv.remaining_steps, runs, p.start, p.length, aggregation_.seconds(), eff);
    for (auto& cp : ran) cp.gpus = forked_gpus_.at({cp.job, cp.copy});
    out.insert(out.end(), ran.begin(), ran.end());
  }
  forked_gpus_.clear();
  forget_unplaced(p);
  return out;
}

copy_progress sim_executor::run_gang(const copy_group& g, const job_view& jv, double r, double lost,
                                     double budget, const round_plan& p) const {
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
  return cp;
}

bool sim_executor::moved_since_last_round(const copy_group& g,
                                          const std::vector<server_share>& shares, bool forked,
                                          job_memory& m) {
  // Entries are updated in place (their vectors' storage reused); one counts as the
  // previous round's placement only when stamped with that round. A copy is compared with
  // its own entry; a job's only copy is remembered as the job's (copy 0), as forked copies
  // 1.. are remembered apart. A job's memory starts with round -2: no previous placement.
  const placed_shares* before = nullptr;
  if (g.copy == 0) {
    before = &m.last;
  } else {
    auto it = last_copy_shares_.find(copy_id{g.job, g.copy});
    if (it != last_copy_shares_.end()) before = &it->second;
  }
  const bool moved = !before || before->round != round_ - 1 || before->shares != shares;
  placed_shares& last = forked && g.copy != 0 ? last_copy_shares_[copy_id{g.job, g.copy}] : m.last;
  last.shares = shares;
  last.round = round_;
  return moved;
}

double sim_executor::restart_cost_of(const std::string& job_type) const {
  if (restart_by_type_.empty()) return restart_cost_;
  const auto it = restart_by_type_.find(job_type);
  return it == restart_by_type_.end() ? restart_cost_ : it->second;
}

double sim_executor::restart_lost(job_memory& m, const std::string& job_type, bool moved,
                                  double length) {
  if (restart_cost_ == 0 && restart_by_type_.empty()) return 0;  // no restart costs at all
  if (!moved && m.restart_left <= 0) return 0;
  double& left = m.restart_left;
  if (moved) left = restart_cost_of(job_type);
  const double lost = std::min(left, length);
  left -= lost;
  return lost;
}

void sim_executor::forget_unplaced(const round_plan& p) {
  // Entries of jobs not placed this round are stale: drop them now and then, so the tables
  // hold about the jobs placed lately rather than every job ever placed. Dropping one changes
  // nothing: its placement would count as a move anyway (not stamped with the previous
  // round), and a move resets the restart seconds left; its type row is looked up again.
  if (jobs_.size() + last_copy_shares_.size() > 2 * p.assignments.size() + 1024) {
    jobs_.erase_if([this](job_id, const job_memory& e) { return e.last.round != round_; });
    for (auto it = last_copy_shares_.begin(); it != last_copy_shares_.end();)
      it = it->second.round == round_ ? std::next(it) : last_copy_shares_.erase(it);
  }
  ++round_;
}

}  // namespace tessera
