#include "runtime/sim.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "runtime/sim_executor.hpp"
#include "runtime/snapshot_builder.hpp"

namespace tessera {

std::vector<double> type_throughputs(const cluster& cl, const throughput_table& table,
                                     const job& j) {
  std::vector<double> t(cl.types.size(), 0.0);
  std::vector<int> largest(cl.types.size(), 0);  // GPUs on the type's largest server
  for (const auto& sv : cl.servers)
    largest[sv.type_index] = std::max(largest[sv.type_index], sv.gpus);
  for (std::size_t k = 0; k < cl.types.size(); ++k) {
    if (cl.types[k].gpus < j.scale_factor) continue;
    // A job wider than every server of the type always spans servers.
    const bool consolidated = largest[k] >= j.scale_factor;
    auto v = table.isolated(cl.types[k].name, {j.job_type, j.scale_factor}, consolidated);
    if (v && *v > 0) t[k] = *v * cl.types[k].mean_speed;
  }
  return t;
}

namespace {

/// Mutable state of one job during a simulation.
struct live_job {
  const job* spec = nullptr;
  std::size_t record = 0;          ///< index into sim_result::jobs
  std::vector<double> throughput;  ///< per type, as policies see it
  double steps_done = 0;
  double contention = 0;           ///< integral of active-job count over time active
  double active_time = 0;
  int last_type = -1;
};

}  // namespace

result<sim_result> simulate(const cluster& cl, const throughput_table& table,
                            const std::vector<job>& jobs, policy& pol, const sim_config& cfg) {
  sim_result res;
  res.policy = pol.name();
  res.total_gpus = cl.total_gpus();
  if (cfg.round_length <= 0)
    return error{error_kind::invalid_input, "round length must be positive"};

  // Arrival order (stable by id).
  std::vector<std::size_t> order(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t l, std::size_t r) {
    if (jobs[l].arrival != jobs[r].arrival) return jobs[l].arrival < jobs[r].arrival;
    return jobs[l].id < jobs[r].id;
  });
  std::unordered_set<job_id> ids;
  res.jobs.reserve(jobs.size());
  for (const auto& j : jobs) {
    if (!ids.insert(j.id).second)
      return error{error_kind::invalid_input, "job id " + std::to_string(j.id) + " repeats"};
    job_record r;
    r.id = j.id;
    r.job_type = j.job_type;
    r.scale_factor = j.scale_factor;
    r.total_steps = j.total_steps;
    r.arrival = j.arrival;
    res.jobs.push_back(r);
  }
  const bool windowed = cfg.window_begin >= 0 && cfg.window_end >= cfg.window_begin;
  int window_left = 0;
  if (windowed)
    for (const auto& j : jobs)
      if (j.id >= cfg.window_begin && j.id <= cfg.window_end) ++window_left;

  sim_executor exec(cl, table, cfg.restart_cost, cfg.aggregation);
  std::vector<live_job> active;
  std::size_t next = 0;
  double now = jobs.empty() ? 0.0 : jobs[order[0]].arrival;
  std::uint64_t version = 0;
  round_plan last_plan;
  bool have_last = false;
  int completed = 0;
  sim_progress prog;
  prog.total = static_cast<int>(jobs.size());

  while (true) {
    // Admit arrivals.
    bool changed = false;
    while (next < order.size() && jobs[order[next]].arrival <= now + 1e-9) {
      const job& j = jobs[order[next]];
      live_job lj;
      lj.spec = &j;
      lj.record = order[next];
      lj.throughput = type_throughputs(cl, table, j);
      if (auto st = check_runnable(j, lj.throughput); !st) return st.err();
      active.push_back(std::move(lj));
      ++next;
      changed = true;
    }
    if (changed) ++version;
    if (active.empty()) {
      if (next >= order.size()) break;
      now = std::max(now, jobs[order[next]].arrival);
      have_last = false;
      continue;
    }
    if (now > cfg.max_time) break;

    // Snapshot and plan.
    std::vector<job_accounting> acc;
    acc.reserve(active.size());
    for (const auto& lj : active)
      acc.push_back(job_accounting{lj.spec, lj.steps_done, res.jobs[lj.record].run_time,
                                   res.jobs[lj.record].gpu_seconds, lj.throughput, lj.last_type});
    snapshot s = build_snapshot(now, cfg.round_length, cl, acc, have_last ? &last_plan : nullptr,
                                version);
    s.rates = &exec.rates();
    auto planned = pol.plan(s);
    if (!planned) return planned.err();
    round_plan p = std::move(planned.value());
    p.start = now;
    p.length = cfg.round_length;
    if (auto st = validate_plan(s, p, pol.name()); !st) return st.err();
    auto ran = exec.execute(s, p);
    if (!ran) return ran.err();

    round_record rr;
    rr.start = now;
    for (const auto& as : p.assignments) rr.busy_gpus += as.gpus();
    rr.idle_gpus = res.total_gpus - rr.busy_gpus;
    rr.active_jobs = static_cast<int>(active.size());
    {
      std::unordered_set<job_id> running;
      for (const auto& as : p.assignments) running.insert(as.job);
      rr.waiting_jobs = static_cast<int>(active.size() - running.size());
    }
    res.rounds.push_back(rr);

    // Apply progress.
    std::unordered_map<job_id, std::size_t> index;
    for (std::size_t i = 0; i < active.size(); ++i) index[active[i].spec->id] = i;
    std::unordered_map<job_id, int> type_of;
    for (const auto& as : p.assignments) {
      // A task split over several GPU types ran on no single type.
      auto [t, fresh] = type_of.emplace(as.job, as.type);
      if (!fresh) t->second = as.tasks > 0 && t->second != as.type ? -1 : as.type;
    }
    std::unordered_map<long long, int> gpus_of;  // (job, copy) -> GPUs it held (all its parts)
    for (const auto& as : p.assignments) gpus_of[as.job * 1024 + as.copy] += as.gpus();
    std::vector<bool> done(active.size(), false);
    // A forked job's copies run side by side: its run time grows by its longest copy's.
    std::unordered_map<job_id, double> held_for;
    for (const auto& cp : ran.value())
      held_for[cp.job] = std::max(held_for[cp.job], cp.busy_seconds);
    for (const auto& cp : ran.value()) {
      auto& lj = active[index.at(cp.job)];
      auto& rec = res.jobs[lj.record];
      if (rec.first_start < 0) rec.first_start = now;
      lj.steps_done += cp.steps;
      if (auto h = held_for.find(cp.job); h != held_for.end()) {
        rec.run_time += h->second;
        held_for.erase(h);
      }
      const auto held = gpus_of.find(cp.job * 1024 + cp.copy);
      const int gpus = held != gpus_of.end() && held->second > 0 ? held->second
                                                                 : lj.spec->scale_factor;
      rec.gpu_seconds += cp.busy_seconds * gpus;
      if (cp.finished) {
        lj.steps_done = lj.spec->total_steps;
        rec.finish = cp.finish_time;
        done[index.at(cp.job)] = true;
      }
    }
    const double n_active = static_cast<double>(active.size());
    for (std::size_t i = 0; i < active.size(); ++i) {
      auto& lj = active[i];
      auto& rec = res.jobs[lj.record];
      const double in_round = done[i] ? rec.finish - now : cfg.round_length;
      lj.contention += n_active * in_round;
      lj.active_time += in_round;
      auto t = type_of.find(lj.spec->id);
      lj.last_type = t == type_of.end() ? -1 : t->second;
    }
    // Retire finished jobs.
    std::vector<live_job> still;
    still.reserve(active.size());
    for (std::size_t i = 0; i < active.size(); ++i) {
      auto& lj = active[i];
      auto& rec = res.jobs[lj.record];
      rec.steps_done = lj.steps_done;
      if (!done[i]) {
        still.push_back(std::move(lj));
        continue;
      }
      ++completed;
      rec.restarts = exec.restarts(lj.spec->id);
      const double g = res.total_gpus;
      const double mean_m = lj.active_time > 0 ? lj.contention / lj.active_time : 1.0;
      const double f = std::min(1.0, g / (std::max(1.0, mean_m) * lj.spec->scale_factor));
      double mix = 0;
      for (std::size_t k = 0; k < cl.types.size(); ++k)
        mix += lj.throughput[k] * cl.types[k].gpus / g;
      rec.iso_share_time = mix > 0 ? lj.spec->total_steps / (f * mix) : 0;
      if (windowed && lj.spec->id >= cfg.window_begin && lj.spec->id <= cfg.window_end)
        --window_left;
    }
    if (still.size() != active.size()) ++version;
    active = std::move(still);
    last_plan = std::move(p);
    have_last = true;
    now += cfg.round_length;

    prog.now = now;
    ++prog.rounds;
    prog.completed = completed;
    prog.active = static_cast<int>(active.size());
    if (cfg.on_progress) cfg.on_progress(prog);
    if (windowed && cfg.stop_after_window && window_left == 0) break;
  }
  double end = 0;
  for (const auto& r : res.jobs) end = std::max(end, r.finish);
  res.end_time = end;
  res.complete = windowed && cfg.stop_after_window
                     ? window_left == 0
                     : completed == static_cast<int>(jobs.size());
  return res;
}

}  // namespace tessera
