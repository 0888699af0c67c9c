#include "runtime/sim.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "runtime/sim_executor.hpp"
#include "runtime/round_loop.hpp"

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

/// One active job during a simulation.
struct live_job {
  job_view view;                   ///< the policy's view, kept up to date
  std::size_t record = 0;          ///< index into schedule_result::jobs
  double contention = 0;           ///< integral of active-job count over time active
  double active_time = 0;
};

/// Space sharing: for each job of a pair, half the seconds both jobs held their shared GPUs,
/// which it does not charge (its partner does), so a pair's GPU-seconds count once.
std::unordered_map<job_id, double> shared_gpu_seconds(const round_plan& p,
                                                      const std::vector<copy_progress>& ran) {
  std::unordered_map<job_id, double> busy, out;
  for (const auto& cp : ran)
    if (cp.copy == 0) busy[cp.job] = cp.busy_seconds;
  for (const auto& as : p.assignments) {
    if (as.partner < 0) continue;
    auto a = busy.find(as.job), b = busy.find(as.partner);
    if (a != busy.end() && b != busy.end()) out[as.job] = std::min(a->second, b->second) / 2;
  }
  return out;
}

/// One simulation: the shared round loop (runtime/round_loop.hpp) over the throughput model
/// of sim_executor, on a virtual clock.
class simulation {
 public:
  simulation(const cluster& cl, const throughput_table& table, const std::vector<job>& jobs,
             policy& pol, const sim_config& cfg)
      : cl_(cl), table_(table), jobs_(jobs), pol_(pol), cfg_(cfg),
        exec_(cl, table, cfg.restart_cost, cfg.aggregation, cfg.fork_efficiency) {}

  result<schedule_result> run();

 private:
  status make_records();
  status admit();
  status play_round();
  void apply_progress(const round_plan& p, const std::vector<copy_progress>& ran,
                      std::vector<bool>& done);
  void retire(const std::vector<bool>& done);
  double iso_share_time(const live_job& lj) const;
  bool in_window(job_id id) const {
    return windowed_ && id >= cfg_.window_begin && id <= cfg_.window_end;
  }

  const cluster& cl_;
  const throughput_table& table_;
  const std::vector<job>& jobs_;
  policy& pol_;
  const sim_config& cfg_;
  sim_executor exec_;
  schedule_result res_;
  std::unordered_map<job_id, std::size_t> record_of_;
  arrival_queue arrivals_;
  std::vector<live_job> active_;
  double now_ = 0;
  std::uint64_t version_ = 0;
  round_plan last_plan_;
  bool have_last_ = false;
  bool windowed_ = false;
  int window_left_ = 0;
  int completed_ = 0;
  int rounds_ = 0;
};

/// One record per job, in trace order; every job queued for admission.
status simulation::make_records() {
  res_.policy = pol_.name();
  res_.total_gpus = cl_.total_gpus();
  res_.jobs.reserve(jobs_.size());
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    const job& j = jobs_[i];
    if (!record_of_.emplace(j.id, i).second)
      return error{error_kind::invalid_input, "job id " + std::to_string(j.id) + " repeats"};
    job_record r;
    r.id = j.id;
    r.job_type = j.job_type;
    r.scale_factor = j.scale_factor;
    r.total_steps = j.total_steps;
    r.arrival = j.arrival;
    res_.jobs.push_back(r);
    arrivals_.push(&j);
  }
  windowed_ = cfg_.window_begin >= 0 && cfg_.window_end >= cfg_.window_begin;
  for (const auto& j : jobs_)
    if (in_window(j.id)) ++window_left_;
  return {};
}

/// Admits the jobs that have arrived by now; a job no GPU type can run is an error.
status simulation::admit() {
  const auto in = arrivals_.admit(now_);
  for (const job* j : in) {
    live_job lj;
    lj.view.spec = j;
    lj.view.throughput = type_throughputs(cl_, table_, *j);
    lj.record = record_of_.at(j->id);
    if (auto st = check_runnable(*j, lj.view.throughput); !st) return st.err();
    active_.push_back(std::move(lj));
  }
  if (!in.empty()) ++version_;
  return {};
}

result<schedule_result> simulation::run() {
  if (!(cfg_.round_length > 0 && std::isfinite(cfg_.round_length)))
    return error{error_kind::invalid_input, "round length must be positive and finite"};
  if (!(cfg_.restart_cost >= 0 && std::isfinite(cfg_.restart_cost)))
    return error{error_kind::invalid_input, "restart cost must be non-negative and finite"};
  const auto& fe = cfg_.fork_efficiency;
  if (fe.enabled && !(fe.b_noise > 0 && fe.default_batch > 0 && std::isfinite(fe.default_batch)))
    return error{error_kind::invalid_input,
                 "copy efficiency: noise scale and default batch must be positive"};
  if (auto st = make_records(); !st) return st.err();
  now_ = arrivals_.empty() ? 0.0 : arrivals_.next_arrival();
  sim_progress prog;
  prog.total = static_cast<int>(jobs_.size());
  while (true) {
    if (auto st = admit(); !st) return st.err();
    if (active_.empty()) {
      if (arrivals_.empty()) break;
      now_ = std::max(now_, arrivals_.next_arrival());
      have_last_ = false;
      continue;
    }
    if (now_ > cfg_.max_time || rounds_ >= cfg_.max_rounds) break;
    if (auto st = play_round(); !st) return st.err();
    prog.now = now_;
    prog.rounds = ++rounds_;
    prog.completed = completed_;
    prog.active = static_cast<int>(active_.size());
    if (cfg_.on_progress) cfg_.on_progress(prog);
    if (windowed_ && cfg_.stop_after_window && window_left_ == 0) break;
  }
  for (const auto& r : res_.jobs) res_.end_time = std::max(res_.end_time, r.finish);
  res_.complete = windowed_ && cfg_.stop_after_window
                      ? window_left_ == 0
                      : completed_ == static_cast<int>(jobs_.size());
  return std::move(res_);
}

/// Plans the round at now_, runs it through the executor, applies its progress.
status simulation::play_round() {
  std::vector<job_view> views;
  views.reserve(active_.size());
  for (auto& lj : active_) {
    const auto& rec = res_.jobs[lj.record];
    lj.view.run_time = rec.run_time;
    lj.view.attained_service = rec.gpu_seconds;
    views.push_back(lj.view);
  }
  round_context ctx;
  ctx.now = now_;
  ctx.round_length = cfg_.round_length;
  ctx.cl = &cl_;
  ctx.last_plan = have_last_ ? &last_plan_ : nullptr;
  ctx.job_set_version = version_;
  ctx.rates = &exec_.rates();
  ctx.fork_efficiency = &cfg_.fork_efficiency;
  ctx.timeline = cfg_.timeline;
  auto planned = plan_round(pol_, ctx, std::move(views));
  if (!planned) return planned.err();
  auto ran = exec_.execute(planned->snap, planned->plan);
  if (!ran) return ran.err();
  res_.rounds.push_back(record_round(planned->plan, res_.total_gpus,
                                     static_cast<int>(active_.size())));
  std::vector<bool> done(active_.size(), false);
  apply_progress(planned->plan, ran.value(), done);
  retire(done);
  last_plan_ = std::move(planned->plan);
  have_last_ = true;
  now_ += cfg_.round_length;
  return {};
}

/// Credits each copy's steps, run time and GPU-seconds to its job; marks finished jobs.
void simulation::apply_progress(const round_plan& p, const std::vector<copy_progress>& ran,
                                std::vector<bool>& done) {
  std::unordered_map<job_id, std::size_t> index;
  for (std::size_t i = 0; i < active_.size(); ++i) index[active_[i].view.spec->id] = i;
  std::unordered_map<job_id, int> type_of;
  for (const auto& as : p.assignments) {
    // A task split over several GPU types ran on no single type.
    auto [t, fresh] = type_of.emplace(as.job, as.type);
    if (!fresh) t->second = as.tasks > 0 && t->second != as.type ? -1 : as.type;
  }
  std::map<copy_id, int> gpus_of;  // GPUs each copy held (all its parts)
  for (const auto& as : p.assignments) gpus_of[as.id()] += as.gpus();
  const auto shared = shared_gpu_seconds(p, ran);
  // A forked job's copies run side by side: its run time grows by its longest copy's.
  std::unordered_map<job_id, double> held_for;
  for (const auto& cp : ran) held_for[cp.job] = std::max(held_for[cp.job], cp.busy_seconds);
  for (const auto& cp : ran) {
    auto& lj = active_[index.at(cp.job)];
    auto& rec = res_.jobs[lj.record];
    if (rec.first_start < 0) rec.first_start = now_;
    lj.view.steps_done += cp.steps;
    if (auto h = held_for.find(cp.job); h != held_for.end()) {
      rec.run_time += h->second;
      held_for.erase(h);
    }
    const auto held = gpus_of.find({cp.job, cp.copy});
    const int gpus = held != gpus_of.end() && held->second > 0 ? held->second
                                                               : lj.view.spec->scale_factor;
    auto half = shared.find(cp.job);
    rec.gpu_seconds += (cp.busy_seconds - (half == shared.end() ? 0.0 : half->second)) * gpus;
    if (cp.finished) {
      lj.view.steps_done = lj.view.spec->total_steps;
      rec.finish = cp.finish_time;
      done[index.at(cp.job)] = true;
    }
  }
  const double n_active = static_cast<double>(active_.size());
  for (std::size_t i = 0; i < active_.size(); ++i) {
    auto& lj = active_[i];
    const double in_round = done[i] ? res_.jobs[lj.record].finish - now_ : cfg_.round_length;
    lj.contention += n_active * in_round;
    lj.active_time += in_round;
    auto t = type_of.find(lj.view.spec->id);
    lj.view.last_type = t == type_of.end() ? -1 : t->second;
  }
}

/// Time the job would take on an isolated 1/M share of the cluster (M = the mean number of
/// active jobs over its life), for finish-time fairness.
double simulation::iso_share_time(const live_job& lj) const {
  const double g = res_.total_gpus;
  const double mean_m = lj.active_time > 0 ? lj.contention / lj.active_time : 1.0;
  const double f = std::min(1.0, g / (std::max(1.0, mean_m) * lj.view.spec->scale_factor));
  double mix = 0;
  for (std::size_t k = 0; k < cl_.types.size(); ++k)
    mix += lj.view.throughput[k] * cl_.types[k].gpus / g;
  return mix > 0 ? lj.view.spec->total_steps / (f * mix) : 0;
}

/// Records the round's outcome of every active job and drops the finished ones.
void simulation::retire(const std::vector<bool>& done) {
  std::vector<live_job> still;
  still.reserve(active_.size());
  for (std::size_t i = 0; i < active_.size(); ++i) {
    auto& lj = active_[i];
    auto& rec = res_.jobs[lj.record];
    rec.steps_done = lj.view.steps_done;
    if (!done[i]) {
      still.push_back(std::move(lj));
      continue;
    }
    ++completed_;
    rec.restarts = exec_.restarts(lj.view.spec->id);
    rec.iso_share_time = iso_share_time(lj);
    if (in_window(lj.view.spec->id)) --window_left_;
  }
  if (still.size() != active_.size()) ++version_;
  active_ = std::move(still);
}

}  // namespace

result<schedule_result> simulate(const cluster& cl, const throughput_table& table,
                                 const std::vector<job>& jobs, policy& pol,
                                 const sim_config& cfg) {
  if (cfg.assume_consolidated) {
    const throughput_table flat = table.consolidated_only();
    return simulation(cl, flat, jobs, pol, cfg).run();
  }
  return simulation(cl, table, jobs, pol, cfg).run();
}

}  // namespace tessera
