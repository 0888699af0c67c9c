#include "runtime/core/round_loop.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "runtime/core/job_index.hpp"
#include "runtime/core/records.hpp"
#include "runtime/core/server_throughput.hpp"
#include "runtime/core/timeline.hpp"

namespace tessera {

void arrival_queue::push(const job* j) {
  // Insert after every job that arrives no later (ties by id), so admission order is arrival
  // order even for jobs submitted while the loop runs. Searched from the back: jobs mostly
  // come in arrival order.
  auto after = std::find_if(waiting_.rbegin(), waiting_.rend(), [&](const job* w) {
    return w->arrival < j->arrival || (w->arrival == j->arrival && w->id <= j->id);
  });
  waiting_.insert(after.base(), j);
}

std::vector<const job*> arrival_queue::admit(double now) {
  std::vector<const job*> in;
  while (!waiting_.empty() && waiting_.front()->arrival <= now + 1e-9) {
    in.push_back(waiting_.front());
    waiting_.pop_front();
  }
  return in;
}

double arrival_queue::next_arrival() const {
  return waiting_.empty() ? std::numeric_limits<double>::infinity() : waiting_.front()->arrival;
}

result<planned_round> plan_round(policy& pol, const round_context& ctx,
                                 std::vector<job_view> jobs) {
  auto earlier = [](const job_view& a, const job_view& b) {
    if (a.spec->arrival != b.spec->arrival) return a.spec->arrival < b.spec->arrival;
    return a.spec->id < b.spec->id;
  };
  // The simulator passes its jobs in arrival order already: checking is O(n), sorting more.
  if (!std::is_sorted(jobs.begin(), jobs.end(), earlier))
    std::stable_sort(jobs.begin(), jobs.end(), earlier);
  planned_round r;
  snapshot& s = r.snap;
  s.now = ctx.now;
  s.round_length = ctx.round_length;
  s.cl = ctx.cl;
  s.last_plan = ctx.last_plan;
  s.job_set_version = ctx.job_set_version;
  s.rates = ctx.rates;
  s.copy_limit = ctx.copy_limit;
  s.fork_efficiency = ctx.fork_efficiency;
  s.jobs = std::move(jobs);
  for (auto& v : s.jobs) v.remaining_steps = v.spec->total_steps - v.steps_done;
  auto planned = pol.plan(s);
  if (!planned) return planned.err();
  r.plan = std::move(planned.value());
  r.plan.start = ctx.now;
  r.plan.length = ctx.round_length;
  if (auto st = validate_plan(s, r.plan, pol.name()); !st) return st.err();
  if (ctx.timeline) ctx.timeline->record(s, r.plan);
  return r;
}

round_record record_round(const round_plan& p, int total_gpus, int active_jobs) {
  round_record rr;
  rr.start = p.start;
  // Jobs placed, counted once. A plan of whole gangs of copy 0 names each job once (a valid
  // plan places a copy twice only as task splits), so it is counted without sorting ids.
  bool each_once = true;
  for (const auto& as : p.assignments) {
    if (as.partner < 0 || as.job < as.partner) rr.busy_gpus += as.gpus();  // a pair once
    each_once = each_once && as.copy == 0 && as.tasks == 0;
  }
  std::ptrdiff_t placed = static_cast<std::ptrdiff_t>(p.assignments.size());
  if (!each_once) {
    std::vector<job_id> running;  // sorted, then deduplicated
    running.reserve(p.assignments.size());
    for (const auto& as : p.assignments) running.push_back(as.job);
    std::sort(running.begin(), running.end());
    placed = std::unique(running.begin(), running.end()) - running.begin();
  }
  rr.idle_gpus = total_gpus - rr.busy_gpus;
  rr.active_jobs = active_jobs;
  rr.waiting_jobs = active_jobs - static_cast<int>(placed);
  return rr;
}

namespace {

/// The space-sharing rules (plan.hpp, assignment::partner): a pair is two gang placements of
/// copy 0, each naming the other, with the same type and shares. With `s` (a snapshot), both
/// jobs are active, of one scale factor, and the executor's table has a co-location
/// throughput for them on that GPU type.
status check_pairs(const round_plan& p, const std::string& policy_name, const snapshot* s) {
  std::map<job_id, const assignment*> paired;
  for (const auto& as : p.assignments)
    if (as.partner >= 0) paired[as.job] = &as;
  if (paired.empty()) return {};
  static thread_local job_index active;  // storage reused across rounds
  active.assign(s ? s->jobs.size() : 0, [s](std::size_t i) { return s->jobs[i].spec->id; });
  for (const auto& [id, as] : paired) {
    const std::string who = policy_name + " paired job " + std::to_string(id) + " with job " +
                            std::to_string(as->partner);
    if (as->copy != 0 || as->tasks != 0 || as->partner == id)
      return error{error_kind::internal, who + ": only copy 0 of two distinct gang jobs pair"};
    auto other = paired.find(as->partner);
    if (other == paired.end() || other->second->partner != id || other->second->type != as->type ||
        !(other->second->shares == as->shares))
      return error{error_kind::internal, who + ", which does not name it back on the same GPUs"};
    if (!s || id > as->partner) continue;
    const std::size_t a = active.find(id), b = active.find(as->partner);
    if (a == job_index::npos || b == job_index::npos) continue;  // check_plan names the job
    const job& ja = *s->jobs[a].spec;
    const job& jb = *s->jobs[b].spec;
    if (ja.scale_factor != jb.scale_factor)
      return error{error_kind::internal, who + " of another scale factor"};
    if (!s->rates ||
        !s->rates->colocated_rate(ja.job_type, jb.job_type, ja.scale_factor, as->shares))
      return error{error_kind::internal,
                   who + " where the throughput table has no co-location throughput for " +
                       ja.job_type + " beside " + jb.job_type};
  }
  return {};
}

/// What check_plan tallies of one job copy's assignments.
struct copy_use {
  copy_id id;
  int parts = 0;          ///< assignments
  bool all_tasks = true;  ///< every one of them carries tasks
  long long tasks = 0;    ///< their tasks' sum
};

/// Numbers the plan's job copies in copy_id order: fills `uses` with one entry per copy and
/// returns each assignment's entry. A sort of the assignments' positions rather than a map
/// of copies, which allocated a node per assignment every round.
std::vector<std::size_t> copy_groups(const round_plan& p, std::vector<copy_use>& uses) {
  const auto& as = p.assignments;
  // The ids sorted beside their positions (no indirection in the comparisons: sorting
  // positions by the assignments they name took 3.5% of a 10,000-GPU LAS-aware run).
  struct keyed {
    copy_id id;
    std::size_t pos;
  };
  std::vector<keyed> order(as.size());
  std::vector<std::size_t> group(as.size());
  for (std::size_t a = 0; a < as.size(); ++a) order[a] = {as[a].id(), a};
  std::sort(order.begin(), order.end(), [](const keyed& l, const keyed& r) { return l.id < r.id; });
  for (const keyed& k : order) {
    if (uses.empty() || uses.back().id != k.id) uses.push_back({k.id});
    group[k.pos] = uses.size() - 1;
  }
  return group;
}

/// validate_plan's checks; `s` (may be null) adds the checks against the active jobs.
status check_plan(const cluster& cl, const round_plan& p, const std::string& policy_name,
                  const snapshot* s) {
  if (auto st = check_pairs(p, policy_name, s); !st) return st;
  const std::vector<job_view>* jobs = s ? &s->jobs : nullptr;
  std::vector<int> used(cl.servers.size(), 0);
  // Per job copy: its assignments, whether all of them carry tasks, and their tasks' sum;
  // uses[group[a]] is assignment a's copy (groups numbered in copy_id order).
  std::vector<copy_use> uses;
  const std::vector<std::size_t> group = copy_groups(p, uses);
  for (std::size_t a = 0; a < p.assignments.size(); ++a) {
    const assignment& as = p.assignments[a];
    // Named only when an error is reported: building it for every assignment was a large
    // share of a round's allocations.
    auto who = [&as] {
      return "job " + std::to_string(as.job) +
             (as.copy != 0 ? " copy " + std::to_string(as.copy) : "");
    };
    auto& use = uses[group[a]];
    ++use.parts;
    use.all_tasks = use.all_tasks && as.tasks > 0;
    use.tasks += as.tasks;
    if (use.parts > 1 && !use.all_tasks)
      return error{error_kind::internal,
                   policy_name + " placed " + who() + " twice" +
                       (use.tasks > 0 ? " (a task split needs tasks > 0 on every placement)" : "")};
    if (as.tasks < 0)
      return error{error_kind::internal, policy_name + " gave " + who() + " " +
                                             std::to_string(as.tasks) + " tasks per step"};
    const bool second_of_pair = as.partner >= 0 && as.job > as.partner;
    for (const auto& sh : as.shares) {
      if (sh.server < 0 || sh.server >= static_cast<int>(cl.servers.size()) || sh.gpus <= 0)
        return error{error_kind::internal, policy_name + " used an invalid server share"};
      if (second_of_pair) continue;  // a pair's GPUs count once
      used[sh.server] += sh.gpus;
      if (used[sh.server] > cl.servers[sh.server].gpus)
        return error{error_kind::internal,
                     policy_name + " over-filled server " + cl.servers[sh.server].name};
    }
    if (as.tasks > 0 && as.tasks < as.gpus())
      return error{error_kind::internal,
                   policy_name + " gave " + who() + " " + std::to_string(as.gpus()) + " GPUs for " +
                       std::to_string(as.tasks) +
                       " tasks per step (every GPU of a placement must run a task)"};
  }
  if (!jobs) return {};
  static thread_local job_index active;  // storage reused across rounds
  active.assign(jobs->size(), [jobs](std::size_t i) { return (*jobs)[i].spec->id; });
  for (const auto& use : uses) {
    const copy_id key = use.id;
    const std::size_t at = active.find(key.job);
    if (at == job_index::npos)
      return error{error_kind::internal, policy_name + " placed job " + std::to_string(key.job) +
                                             ", which is not active"};
    const job& spec = *(*jobs)[at].spec;
    if (spec.max_copies > 0 && key.copy >= spec.max_copies)
      return error{error_kind::internal, policy_name + " forked job " + std::to_string(key.job) +
                                             " into copy " + std::to_string(key.copy) +
                                             "; it allows at most " +
                                             std::to_string(spec.max_copies) + " (max_copies)"};
    const int k = spec.scale_factor;
    if (use.all_tasks && use.tasks != k)
      return error{error_kind::internal,
                   policy_name + " placed " + std::to_string(use.tasks) +
                       " tasks per step of job " + std::to_string(key.job) +
                       (key.copy != 0 ? " copy " + std::to_string(key.copy) : "") + " over " +
                       std::to_string(use.parts) +
                       " placements; they must sum to its scale factor " + std::to_string(k)};
  }
  return {};
}

}  // namespace

status validate_plan(const cluster& cl, const round_plan& p, const std::string& policy_name) {
  return check_plan(cl, p, policy_name, nullptr);
}

status validate_plan(const snapshot& s, const round_plan& p, const std::string& policy_name) {
  return check_plan(*s.cl, p, policy_name, &s);
}

status check_runnable(const job& j, const std::vector<double>& throughput) {
  if (std::none_of(throughput.begin(), throughput.end(), [](double v) { return v > 0; }))
    return error{error_kind::invalid_input, "job " + std::to_string(j.id) + " (" + j.job_type +
                                                ", scale " + std::to_string(j.scale_factor) +
                                                ") can run on no GPU type of the cluster"};
  return {};
}

}  // namespace tessera
