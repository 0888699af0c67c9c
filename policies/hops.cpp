#include "policies/hops.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "policies/hops_internal.hpp"

namespace tessera {

using detail::hops_candidate;
using detail::hops_config_set;
using detail::hops_round_state;
using detail::hops_server_classes;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Weight multiplier of makespan-critical jobs in the ILP objective.
constexpr double critical_weight = 10.0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Each active job's first copy in the last round (null: none), by position in
/// snapshot::jobs; `index` is scratch whose storage is reused.
void previous_assignments(const snapshot& s, job_index& index,
                          std::vector<const assignment*>& prev) {
  prev.assign(s.jobs.size(), nullptr);
  if (!s.last_plan) return;
  index.assign(s.jobs.size(), [&s](std::size_t i) { return s.jobs[i].spec->id; });
  for (const auto& as : s.last_plan->assignments)
    if (as.copy == 0)
      if (const std::size_t m = index.find(as.job); m != job_index::npos) prev[m] = &as;
}

/// The queue entry of job m with configuration set `set`: its queue keys.
hops_candidate candidate(const snapshot& s, const hops_params& p, std::size_t m,
                         const assignment* was, const hops_config_set* set) {
  const job_view& jv = s.jobs[m];
  hops_candidate c;
  c.m = m;
  c.set = set;
  c.lr = latency_ratio(s.now, jv, jv.spec->total_steps / set->best);
  c.prio = c.lr + (was ? p.preempt_margin : 0.0);
  c.remaining = jv.remaining_steps / set->best;
  return c;
}

/// Critical jobs (an addition to Hops; option critical_slack): the makespan from now is at
/// least L = max(drain time of the queue's remaining work over the cluster's GPUs, longest
/// remaining run time). A job whose own remaining run time is within the slack of L extends
/// the makespan one for one when it waits, so it goes first.
void mark_critical(std::vector<hops_candidate>& queue, int total, double slack) {
  if (!(slack > 0)) return;
  double work = 0, longest = 0;
  for (const auto& c : queue) {
    work += c.min_need() * c.remaining;
    longest = std::max(longest, c.remaining);
  }
  const double bound = std::max(work / std::max(1, total), longest);
  for (auto& c : queue) c.critical = bound > 0 && c.remaining >= (1.0 - slack) * bound;
}

/// Queue order: pinned jobs first, then critical jobs (longest remaining first), then the
/// queue key descending, then arrival, then id.
void sort_queue(const snapshot& s, std::vector<hops_candidate>& queue) {
  std::sort(queue.begin(), queue.end(), [&](const hops_candidate& a, const hops_candidate& b) {
    if (a.pinned() != b.pinned()) return a.pinned();
    if (a.critical != b.critical) return a.critical;
    if (a.critical && a.remaining != b.remaining) return a.remaining > b.remaining;
    if (a.prio != b.prio) return a.prio > b.prio;
    const job& ja = *s.jobs[a.m].spec;
    const job& jb = *s.jobs[b.m].spec;
    if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
    return ja.id < jb.id;
  });
}

/// Step 3: the longest queue prefix whose minimum GPU needs fit in `window` x the cluster's
/// GPUs (every job when `window` is 0), at least one job.
std::size_t service_window(const std::vector<hops_candidate>& queue, double window, int total) {
  const double limit = window > 0 ? window * total : inf;
  std::size_t n = 0;
  double need = 0;
  while (n < queue.size() && need + queue[n].min_need() <= limit) need += queue[n++].min_need();
  if (n == 0 && !queue.empty()) n = 1;
  return n;
}

/// Objective values of the window's configurations: (LR + bias)^lambda, times
/// critical_weight for critical and pinned jobs (valued at the window's highest LR), times
/// (G + size_value x GPUs), times 1 + stay_bonus for a configuration that keeps the job's
/// placement.
void window_values(const std::vector<hops_candidate>& queue, std::size_t window,
                   const hops_params& p, std::vector<std::vector<double>>& value) {
  double top_lr = 0;
  for (std::size_t i = 0; i < window; ++i) top_lr = std::max(top_lr, queue[i].lr);
  value.resize(window);  // the rows' storage is reused from round to round
  for (std::size_t i = 0; i < window; ++i) {
    const auto& c = queue[i];
    double slowest = inf;
    for (const auto& cf : c.configs()) slowest = std::min(slowest, cf.throughput);
    const bool first = c.critical || c.pinned();
    const double lr = first ? top_lr : c.lr;
    // A critical job's speed is the makespan's: weigh it so that its fastest configuration
    // outbids the jobs it displaces there (they still run elsewhere). A pinned job's restart
    // is paid for only if it stays.
    const double boost = first ? critical_weight : 1.0;
    value[i].clear();
    const double w = boost * std::max(1e-6, std::pow(lr + p.bias, p.lambda));
    for (const auto& cf : c.configs())
      value[i].push_back(w * (cf.throughput / slowest + p.size_value * cf.gpus) *
                         (cf.stay ? 1.0 + p.stay_bonus : 1.0));
  }
}

/// The round's plan: one assignment per placed queue job, typed when all its servers share a
/// GPU type.
std::vector<assignment> assignments_of(const snapshot& s, hops_round_state& st) {
  std::vector<assignment> out;
  for (std::size_t i = 0; i < st.queue.size(); ++i) {
    if (st.placed[i].empty()) continue;
    assignment as;
    as.job = s.jobs[st.queue[i].m].spec->id;
    as.shares = std::move(st.placed[i]);
    int type = s.cl->servers[as.shares.front().server].type_index;
    for (const auto& sh : as.shares)
      if (s.cl->servers[sh.server].type_index != type) type = -1;
    as.type = type;
    out.push_back(std::move(as));
  }
  return out;
}

}  // namespace

double latency_ratio(double now, const job_view& jv, double expected_run_time) {
  if (!(expected_run_time > 0) || !jv.spec) return 0;
  const double wait = std::max(0.0, now - jv.spec->arrival - jv.run_time);
  return wait / expected_run_time;
}

double placement_sensitivity(int gpus, double single_rate, double multi_rate) {
  if (gpus <= 1) return 1.0;
  if (!(multi_rate > 0)) return inf;
  return single_rate / multi_rate;
}

hops::hops(std::string name, hops_params p)
    : name_(std::move(name)),
      p_(p),
      classes_(std::make_unique<hops_server_classes>()),
      sets_(std::make_unique<detail::hops_config_sets>()) {}

hops::~hops() = default;

const server_throughput& hops::throughputs(const snapshot& s) {
  if (s.rates) return *s.rates;
  const cluster& cl = *s.cl;
  throughput_table t;
  for (const auto& jv : s.jobs)
    for (std::size_t k = 0; k < cl.types.size() && k < jv.throughput.size(); ++k)
      if (jv.throughput[k] > 0)
        t.set_isolated(cl.types[k].name, {jv.spec->job_type, jv.spec->scale_factor},
                       jv.throughput[k] / cl.types[k].mean_speed);
  fallback_ = std::make_unique<server_throughput>(cl, std::move(t));
  return *fallback_;
}

bool hops::place_by_ilp(std::size_t window, hops_round_state& st) {
  // Built in last_ilp_ (kept for last_ilp()), whose vectors' storage the assignments reuse.
  hops_ilp_input& in = last_ilp_;
  in.classes = classes_->classes();
  in.configs.resize(window);
  for (std::size_t i = 0; i < window; ++i) in.configs[i] = st.queue[i].configs();
  in.group_tolerance = p_.group_tolerance;
  milp_settings ms;
  ms.time_limit_s = p_.ilp_time_limit;
  ms.relative_gap = p_.ilp_gap;
  ms.preprocess = p_.ilp_preprocess;
  ms.relaxation_first = p_.ilp_relaxation_first;
  auto r = solve_hops_ilp(in, ms);
  stats_.ilp_ran = true;
  if (r) {
    stats_.outcome = r->solution.outcome;
    stats_.ilp_seconds = r->solution.seconds;
    stats_.columns = r->columns;
    stats_.rows = r->rows;
    stats_.integers = r->integers;
    stats_.groups = r->groups;
    stats_.ilp_from_relaxation = r->solution.from_relaxation;
  }
  if (!r || !r->solution.has_solution) {
    stats_.ilp_fallback = true;
    return false;
  }
  const std::vector<std::vector<server_share>> prev_w(st.previous.begin(),
                                                      st.previous.begin() + window);
  auto packed = pack_hops_solution(in, r.value(), prev_w);
  for (std::size_t i = 0; i < window; ++i) st.placed[i] = std::move(packed[i]);
  return true;
}

result<round_plan> hops::plan(const snapshot& s) {
  const auto t0 = std::chrono::steady_clock::now();
  stats_ = hops_round_stats{};
  round_plan out;
  out.start = s.now;
  out.length = s.round_length;
  if (!s.cl) return error{error_kind::internal, name_ + ": snapshot without a cluster"};
  const cluster& cl = *s.cl;
  stats_.active_jobs = static_cast<int>(s.jobs.size());
  if (s.jobs.empty() || cl.servers.empty()) return out;

  // 1. Throughputs and server classes (rebuilt for a fallback model, which may sit where an
  //    old one did).
  classes_->refresh(s, throughputs(s), !s.rates);
  if (classes_->generation() != sets_generation_) {
    sets_->clear();
    sets_generation_ = classes_->generation();
  }

  // 2. The queue: configurations, expected run time and latency ratio of every job.
  previous_assignments(s, index_, prev_);
  hops_round_state st;
  st.queue.reserve(s.jobs.size());
  const detail::hops_config_sets::params sp{p_.sensitivity_threshold, p_.split_configs};
  sets_->trim(2 * s.jobs.size() + 1024);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const bool pin = restarts_.amortising(s.jobs[m], s.now, p_.restart_amortize);
    if (const auto* set = sets_->get(cl, *classes_, sp, s.jobs[m], prev_[m], pin))
      st.queue.push_back(candidate(s, p_, m, prev_[m], set));
  }
  for (const auto& c : st.queue)
    stats_.max_latency_ratio = std::max(stats_.max_latency_ratio, c.lr);
  mark_critical(st.queue, cl.total_gpus(), p_.critical_slack);
  sort_queue(s, st.queue);

  // 3. Service window, and the objective values of its configurations.
  const std::size_t window = service_window(st.queue, p_.window, cl.total_gpus());
  stats_.window_jobs = static_cast<int>(window);
  st.placed.assign(st.queue.size(), {});
  st.previous.assign(st.queue.size(), {});
  for (std::size_t i = 0; i < st.queue.size(); ++i)
    if (const assignment* was = prev_[st.queue[i].m]) st.previous[i] = was->shares;
  window_values(st.queue, window, p_, last_ilp_.value);
  const auto& value = last_ilp_.value;

  // 4-5. ILP and packing, else the greedy pass.
  const bool by_ilp = p_.use_ilp && window > 0 && place_by_ilp(window, st);
  st.free_gpus.assign(cl.servers.size(), 0);
  for (const auto& sv : cl.servers) st.free_gpus[sv.id] = sv.gpus;
  for (const auto& v : st.placed)
    for (const auto& sh : v) st.free_gpus[sh.server] -= sh.gpus;
  if (!by_ilp) detail::hops_greedy_place(classes_->classes(), window, value, st);
  for (const auto& v : st.placed)
    if (!v.empty()) ++stats_.placed_by_ilp;

  // 6. Fragment filling.
  if (p_.fill_fragments)
    stats_.placed_by_filling =
        detail::hops_fill_fragments(s, *classes_, p_.sensitivity_threshold, st);

  out.assignments = assignments_of(s, st);
  restarts_.note(s, out, p_.restart_amortize);
  for (int f : st.free_gpus) stats_.idle_gpus += f;
  stats_.plan_seconds = seconds_since(t0);
  return out;
}

std::vector<option_spec> hops_options() {
  return {
      {"lambda", "exponent on (latency ratio + bias) in the ILP objective", 1.0, 0.0, 8.0},
      {"bias", "added to each job's latency ratio before the exponent", 1.0, 0.0, 1e6},
      {"window",
       "service window: the longest queue prefix whose minimum GPU needs fit in this multiple "
       "of the cluster's GPUs (0 = every job)",
       1.0, 0.0, 1000.0},
      {"sensitivity_threshold",
       "placement-sensitive when one-server / two-server per-GPU throughput is at least this", 1.4,
       1.0, 1000.0},
      {"ilp_time_limit", "seconds CBC may spend on one round's ILP", 2.0, 0.01, 3600.0},
      {"ilp_gap",
       "relative optimality gap at which the ILP's solve stops (1e-3: a tenth of "
       "group_tolerance's own bound on the plan)",
       1e-3, 0.0, 0.5},
      bool_option("ilp_preprocess",
                  "1 = CBC preprocesses each round's ILP (default), 0 = off: 1.2-1.5x faster "
                  "rounds at 2,500-10,000 GPUs, possibly another optimal plan "
                  "(docs/benchmarks/simulator-scale.md)",
                  true),
      {"stay_bonus",
       "objective bonus (fraction) for keeping a running job on its server class and GPU count",
       0.05, 0.0, 10.0},
      bool_option("ilp_relaxation_first",
                  "1 = answer each round's ILP from its LP relaxation and that rounding's "
                  "neighbourhood when within ilp_gap of the relaxation's bound, else CBC "
                  "(default; 4x less solve time at 10,000 GPUs, docs/benchmarks/"
                  "simulator-scale.md), 0 = CBC every round",
                  true),
      bool_option("fill_fragments", "1 = fill leftover GPUs after the ILP, 0 = off (ablation)",
                  true),
      bool_option("use_ilp",
                  "1 = CBC ILP, 0 = greedy in latency-ratio order (ablation; also the fallback "
                  "when CBC fails)",
                  true),
      bool_option("split_configs",
                  "1 = low-sensitivity jobs may also split into two halves within a server class",
                  true),
      {"preempt_margin",
       "latency-ratio head start of jobs that ran in the last round (hysteresis against "
       "preemption)",
       0.0, 0.0, 1000.0},
      {"size_value",
       "adds this x GPUs to G in each configuration's value, so that who runs is weighed per GPU "
       "(0 = the paper's objective)",
       1.0, 0.0, 1000.0},
      {"group_tolerance",
       "0 = one ILP column per window job and configuration; t > 0: jobs with the same "
       "configurations and weights within a factor 1 + t share integer columns (plan value "
       "within 1 + t of the per-job ILP's; far fewer columns in large windows)",
       0.01, 0.0, 1.0},
      {"restart_amortize",
       "a job charged a restart keeps its placement (only staying configurations, first in the "
       "queue, valued as critical) until it has run this many times its restart time; 0 = off "
       "(the paper's Hops); no effect without restart costs",
       8.0, 0.0, 1000.0},
      {"critical_slack",
       "jobs whose remaining run time is within this fraction of the makespan bound (longest "
       "remaining run time, or the queue's drain time) go first; 0 = off",
       0.1, 0.0, 1.0},
  };
}

std::unique_ptr<policy> make_hops(const std::string& name, const options& o) {
  hops_params p;
  p.lambda = o.get("lambda");
  p.bias = o.get("bias");
  p.window = o.get("window");
  p.sensitivity_threshold = o.get("sensitivity_threshold");
  p.ilp_time_limit = o.get("ilp_time_limit");
  p.ilp_gap = o.get("ilp_gap");
  p.ilp_preprocess = o.flag("ilp_preprocess");
  p.ilp_relaxation_first = o.flag("ilp_relaxation_first");
  p.stay_bonus = o.get("stay_bonus");
  p.fill_fragments = o.flag("fill_fragments");
  p.use_ilp = o.flag("use_ilp");
  p.split_configs = o.flag("split_configs");
  p.preempt_margin = o.get("preempt_margin");
  p.critical_slack = o.get("critical_slack");
  p.size_value = o.get("size_value");
  p.group_tolerance = o.get("group_tolerance");
  p.restart_amortize = o.get("restart_amortize");
  return std::make_unique<hops>(name, p);
}

}  // namespace tessera
