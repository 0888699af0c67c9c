#include "runtime/sim/sim.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "runtime/core/job_index.hpp"
#include "runtime/sim/sim_executor.hpp"
#include "runtime/core/round_loop.hpp"

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

/// What the simulation keeps of one active job besides its view, in active order: its
/// contention, and the job_record fields that change every round, stored into the record when
/// the job retires or the run ends (the records, one per trace job, would be visited at random
/// every round: a cache miss per active job and round at 100,000 jobs).
struct live_job {
  std::size_t record = 0;  ///< index into schedule_result::jobs and the trace
  double contention = 0;   ///< integral of active-job count over time active
  double active_time = 0;
  double first_start = -1;  ///< job_record's fields, current while the job is active
  double finish = -1;
  double run_time = 0;
  double gpu_seconds = 0;
};

/// Space sharing: for each job of a pair, half the seconds both jobs held their shared GPUs,
/// which it does not charge (its partner does), so a pair's GPU-seconds count once.
std::unordered_map<job_id, double> shared_gpu_seconds(const round_plan& p,
                                                      const std::vector<copy_progress>& ran) {
  std::unordered_map<job_id, double> busy, out;
  if (std::none_of(p.assignments.begin(), p.assignments.end(),
                   [](const assignment& as) { return as.partner >= 0; }))
    return out;  // no pairs: skip the per-job map
  for (const auto& cp : ran)
    if (cp.copy == 0) busy[cp.job] = cp.busy_seconds;
  for (const auto& as : p.assignments) {
    if (as.partner < 0) continue;
    auto a = busy.find(as.job), b = busy.find(as.partner);
    if (a != busy.end() && b != busy.end()) out[as.job] = std::min(a->second, b->second) / 2;
  }
  return out;
}

/// One simulation: the shared round loop (runtime/core/round_loop.hpp) over the throughput model
/// of sim_executor, on a virtual clock.
class simulation {
 public:
  simulation(const cluster& cl, const throughput_table& table, const std::vector<job>& jobs,
             policy& pol, const sim_config& cfg)
      : cl_(cl),
        table_(table),
        jobs_(jobs),
        pol_(pol),
        cfg_(cfg),
        exec_(cl, table, cfg.restart_cost, cfg.aggregation, cfg.fork_efficiency) {
    exec_.set_restart_costs(cfg.restart_costs);
  }

  result<schedule_result> run();

 private:
  status make_records();
  status admit();
  status play_round();
  /// Stores active job i's round-by-round fields (live_job, steps done) into its record.
  void store(std::size_t i);
  void apply_progress(const round_plan& p, const std::vector<copy_progress>& ran,
                      std::vector<bool>& done);
  void retire(const std::vector<bool>& done);
  double iso_share_time(const job_view& v, const live_job& lj) const;
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
  /// The active jobs' views, in admission order, which is arrival order (ties by id): what
  /// plan_round expects, so they move into each round's snapshot and back without a copy
  /// or a sort. live_ is parallel to it.
  std::vector<job_view> views_;
  std::vector<live_job> live_;
  job_index index_;                ///< position in views_ by job id, rebuilt each round
  std::vector<int> type_scratch_;  ///< apply_progress's per-job GPU type, reused
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
    job_view v;
    v.spec = j;
    v.throughput = type_throughputs(cl_, table_, *j);
    v.restart_seconds = exec_.restart_cost_of(j->job_type);
    if (auto st = check_runnable(*j, v.throughput); !st) return st.err();
    live_job lj;
    lj.record = record_of_.at(j->id);  // admitted once: its record's fields are live_job's defaults
    views_.push_back(std::move(v));
    live_.push_back(lj);
  }
  if (!in.empty()) ++version_;
  return {};
}

result<schedule_result> simulation::run() {
  if (!(cfg_.round_length > 0 && std::isfinite(cfg_.round_length)))
    return error{error_kind::invalid_input, "round length must be positive and finite"};
  if (!(cfg_.restart_cost >= 0 && std::isfinite(cfg_.restart_cost)))
    return error{error_kind::invalid_input, "restart cost must be non-negative and finite"};
  for (const auto& [type, seconds] : cfg_.restart_costs)
    if (!(seconds >= 0 && std::isfinite(seconds)))
      return error{error_kind::invalid_input,
                   "restart cost of '" + type + "' must be non-negative and finite"};
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
    if (views_.empty()) {
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
    prog.active = static_cast<int>(views_.size());
    if (cfg_.on_progress) cfg_.on_progress(prog);
    if (windowed_ && cfg_.stop_after_window && window_left_ == 0) break;
  }
  for (std::size_t i = 0; i < views_.size(); ++i) store(i);  // the jobs still active
  for (const auto& r : res_.jobs) res_.end_time = std::max(res_.end_time, r.finish);
  res_.complete = windowed_ && cfg_.stop_after_window
                      ? window_left_ == 0
                      : completed_ == static_cast<int>(jobs_.size());
  return std::move(res_);
}

/// Plans the round at now_, runs it through the executor, applies its progress.
status simulation::play_round() {
  for (std::size_t i = 0; i < views_.size(); ++i) {
    views_[i].run_time = live_[i].run_time;
    views_[i].attained_service = live_[i].gpu_seconds;
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
  auto planned = plan_round(pol_, ctx, std::move(views_));
  if (!planned) return planned.err();
  auto ran = exec_.execute(planned->snap, planned->plan);
  if (!ran) return ran.err();
  views_ = std::move(planned->snap.jobs);
  // plan_round keeps jobs already in arrival order as given, so views_ still lines up
  // with live_; checked, as a wrong line-up would credit one job's progress to another.
  bool aligned = views_.size() == live_.size();
  for (std::size_t i = 0; aligned && i < views_.size(); ++i)
    aligned = views_[i].spec == &jobs_[live_[i].record];
  if (!aligned) return error{error_kind::internal, "simulator: the round reordered its jobs"};
  res_.rounds.push_back(
      record_round(planned->plan, res_.total_gpus, static_cast<int>(views_.size())));
  std::vector<bool> done(views_.size(), false);
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
  index_.assign(views_.size(), [this](std::size_t i) { return views_[i].spec->id; });
  // The GPU type each job ran on (-2: not placed); a task split over several types ran on
  // no single type (-1).
  std::vector<int>& type_of = type_scratch_;
  type_of.assign(views_.size(), -2);
  for (const auto& as : p.assignments) {
    const std::size_t i = index_.find(as.job);
    if (i == job_index::npos) continue;
    int& t = type_of[i];
    t = t == -2 ? as.type : (as.tasks > 0 && t != as.type ? -1 : as.type);
  }
  const auto shared = shared_gpu_seconds(p, ran);
  for (std::size_t c = 0; c < ran.size(); ++c) {
    const auto& cp = ran[c];
    const std::size_t i = index_.find(cp.job);
    auto& v = views_.at(i);
    auto& lj = live_[i];
    if (lj.first_start < 0) lj.first_start = now_;
    v.steps_done += cp.steps;
    // A forked job's copies run side by side (the executor reports them one after another):
    // its run time grows by its longest copy's.
    if (c == 0 || ran[c - 1].job != cp.job) {
      double held = 0;
      for (std::size_t d = c; d < ran.size() && ran[d].job == cp.job; ++d)
        held = std::max(held, ran[d].busy_seconds);
      lj.run_time += held;
    }
    const int gpus = cp.gpus > 0 ? cp.gpus : v.spec->scale_factor;
    auto half = shared.find(cp.job);
    lj.gpu_seconds += (cp.busy_seconds - (half == shared.end() ? 0.0 : half->second)) * gpus;
    if (cp.finished) {
      v.steps_done = v.spec->total_steps;
      lj.finish = cp.finish_time;
      done[i] = true;
    }
  }
  const double n_active = static_cast<double>(views_.size());
  for (std::size_t i = 0; i < views_.size(); ++i) {
    auto& lj = live_[i];
    const double in_round = done[i] ? lj.finish - now_ : cfg_.round_length;
    lj.contention += n_active * in_round;
    lj.active_time += in_round;
    views_[i].last_type = type_of[i] == -2 ? -1 : type_of[i];
  }
}

void simulation::store(std::size_t i) {
  const auto& lj = live_[i];
  auto& rec = res_.jobs[lj.record];
  rec.first_start = lj.first_start;
  rec.finish = lj.finish;
  rec.run_time = lj.run_time;
  rec.gpu_seconds = lj.gpu_seconds;
  rec.steps_done = views_[i].steps_done;
}

/// Time the job would take on an isolated 1/M share of the cluster (M = the mean number of
/// active jobs over its life), for finish-time fairness.
double simulation::iso_share_time(const job_view& v, const live_job& lj) const {
  const double g = res_.total_gpus;
  const double mean_m = lj.active_time > 0 ? lj.contention / lj.active_time : 1.0;
  const double f = std::min(1.0, g / (std::max(1.0, mean_m) * v.spec->scale_factor));
  double mix = 0;
  for (std::size_t k = 0; k < cl_.types.size(); ++k) mix += v.throughput[k] * cl_.types[k].gpus / g;
  return mix > 0 ? v.spec->total_steps / (f * mix) : 0;
}

/// Records the round's outcome of every active job and drops the finished ones, keeping
/// the others in order (compacted in place).
void simulation::retire(const std::vector<bool>& done) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < views_.size(); ++i) {
    if (!done[i]) {
      if (kept != i) {
        views_[kept] = std::move(views_[i]);
        live_[kept] = live_[i];
      }
      ++kept;
      continue;
    }
    ++completed_;
    store(i);
    auto& rec = res_.jobs[live_[i].record];
    rec.restarts = exec_.restarts(views_[i].spec->id);
    rec.iso_share_time = iso_share_time(views_[i], live_[i]);
    double best = 0;  // the job's fastest GPU type (no types: no expected time)
    for (const double r : views_[i].throughput) best = std::max(best, r);
    if (best > 0) rec.expected_time = views_[i].spec->total_steps / best;
    if (in_window(views_[i].spec->id)) --window_left_;
  }
  if (kept != views_.size()) ++version_;
  views_.resize(kept);
  live_.resize(kept);
}

}  // namespace

result<schedule_result> simulate(const cluster& cl, const throughput_table& table,
                                 const std::vector<job>& jobs, policy& pol, const sim_config& cfg) {
  if (cfg.assume_consolidated) {
    const throughput_table flat = table.consolidated_only();
    return simulation(cl, flat, jobs, pol, cfg).run();
  }
  return simulation(cl, table, jobs, pol, cfg).run();
}

}  // namespace tessera
