#include "policies/tessera_policy.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "policies/hare_offline.hpp"
#include "policies/hops.hpp"
#include "policies/restart_clock.hpp"
#include "policies/type_plan.hpp"
#include "runtime/core/copy_efficiency.hpp"

namespace tessera {

namespace {

/// What the order needs of one job.
struct order_key {
  tessera_class cls = tessera_class::normal;
  double key = 0;  ///< ascending within the class
};

/// Finish-time fairness the job is heading for if it runs at its fair share from now on:
/// (elapsed + remaining / fair rate) / (total / fair rate), where the fair rate is its
/// throughput on the cluster's GPU mix (per-type rates weighted by the types' GPU counts)
/// times f = min(1, GPUs / (active jobs x K)), the simulator's isolated 1/M share. Above 1
/// the job has made fewer steps than that share would have made since its arrival.
double projected_ftf(const snapshot& s, const job_view& jv, std::size_t active) {
  const cluster& cl = *s.cl;
  const double g = std::max(1, cl.total_gpus());
  const int k = std::max(1, jv.spec->scale_factor);
  double mix = 0;
  for (std::size_t t = 0; t < cl.types.size() && t < jv.throughput.size(); ++t)
    mix += jv.throughput[t] * cl.types[t].gpus / g;
  const double f = std::min(1.0, g / (std::max<double>(1.0, active) * k));
  if (!(mix > 0) || !(jv.spec->total_steps > 0)) return 0;
  const double elapsed = std::max(0.0, s.now - jv.spec->arrival);
  return (elapsed * f * mix + jv.remaining_steps) / jv.spec->total_steps;
}

/// The early guard (step 1b): normal jobs whose latency ratio `lr` has passed early_guard
/// rounds per hour of expected run time join the starving class, most urgent first, while
/// their GPUs fit in early_share of the cluster's; each keyed by its urgency on the main
/// guard (below 1), so after the jobs past that.
void admit_early(const snapshot& s, const tessera_params& p, const std::vector<double>& lr,
                 std::vector<order_key>& keys) {
  const double early = p.early_guard * s.round_length / 3600.0;
  if (!(early > 0) || !(p.early_share > 0)) return;
  std::vector<std::size_t> waiting;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (keys[i].cls == tessera_class::normal && lr[i] >= early) waiting.push_back(i);
  std::stable_sort(waiting.begin(), waiting.end(),
                   [&](std::size_t a, std::size_t b) { return lr[a] > lr[b]; });
  const double main = p.lr_guard > 0 ? p.lr_guard * s.round_length / 3600.0 : early;
  double budget = p.early_share * s.cl->total_gpus();
  for (std::size_t i : waiting) {
    const int k = std::max(1, s.jobs[i].spec->scale_factor);
    if (k > budget) continue;
    budget -= k;
    keys[i] = {tessera_class::starving, -lr[i] / main};
  }
}

/// Each job's class and key within it (step 1).
std::vector<order_key> order_keys(const snapshot& s, const tessera_params& p, double horizon) {
  const std::size_t n = s.jobs.size();
  std::vector<double> best(n, 0.0), rem(n, 0.0);
  double work = 0;  // GPU-seconds of remaining work at each job's best rate
  for (std::size_t i = 0; i < n; ++i) {
    best[i] = hare_best_rate(s.jobs[i]);
    if (best[i] > 0) rem[i] = s.jobs[i].remaining_steps / best[i];
    work += std::max(1, s.jobs[i].spec->scale_factor) * rem[i];
  }
  const double drain = work / std::max(1, s.cl->total_gpus());
  const double lr_guard = p.lr_guard * s.round_length / 3600.0;  // in LR: rounds per hour of E
  std::vector<order_key> keys(n);
  std::vector<double> lr(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const job_view& jv = s.jobs[i];
    const double expected = best[i] > 0 ? jv.spec->total_steps / best[i] : 0.0;
    lr[i] = latency_ratio(s.now, jv, expected);
    // Urgency: how far past its guard the job is, on either measure (>= 1: starving).
    double urgency = lr_guard > 0 ? lr[i] / lr_guard : 0.0;
    if (p.ftf_guard > 0) urgency = std::max(urgency, projected_ftf(s, jv, n) / p.ftf_guard);
    const bool bounds_drain = p.critical_share > 0 && rem[i] >= p.critical_share * drain;
    const bool bounds_plan =
        p.critical_horizon > 0 && horizon > 0 && rem[i] >= p.critical_horizon * horizon;
    if (rem[i] > 0 && (bounds_drain || bounds_plan))
      keys[i] = {tessera_class::critical, -rem[i]};
    else if (urgency >= 1)
      keys[i] = {tessera_class::starving, -urgency};
    else
      keys[i] = {tessera_class::normal,
                 p.by_remaining ? hare_remaining_work(jv) : hare_service(jv)};
  }
  admit_early(s, p, lr, keys);
  return keys;
}

}  // namespace

std::vector<std::size_t> tessera_order(const snapshot& s, const tessera_params& p,
                                       std::vector<tessera_class>* classes, double horizon) {
  const std::vector<order_key> keys = order_keys(s, p, horizon);
  std::vector<std::size_t> order(s.jobs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (keys[a].cls != keys[b].cls) return keys[a].cls < keys[b].cls;
    if (keys[a].key != keys[b].key) return keys[a].key < keys[b].key;
    const job& ja = *s.jobs[a].spec;
    const job& jb = *s.jobs[b].spec;
    if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
    return ja.id < jb.id;
  });
  if (classes) {
    classes->resize(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) (*classes)[i] = keys[i].cls;
  }
  return order;
}

double tessera_fit_floor(const job_view& jv, double now, const tessera_params& p) {
  const double best = hare_best_rate(jv);
  if (!(p.min_fit > 0) || !(jv.restart_seconds > 0) || !(best > 0)) return 0;
  if (p.fit_patience > 0 && latency_ratio(now, jv, jv.spec->total_steps / best) >= p.fit_patience)
    return 0;
  return p.min_fit * best;
}

bool tessera_fork_pays(double r_sum, double r_new, int copies, double fork_gain, double eff_now,
                       double eff_next) {
  if (!(r_new > 0) || copies < 1) return false;
  return eff_next * (r_sum + r_new) >= (1 + fork_gain) * eff_now * r_sum;
}

namespace {

class tessera_policy final : public policy {
 public:
  tessera_policy(std::string name, tessera_params p) : name_(std::move(name)), p_(p) {}
  std::string name() const override { return name_; }
  bool stacks_tasks() const override { return p_.fill.relaxed; }

  result<round_plan> plan(const snapshot& s) override {
    if (!s.cl) return error{error_kind::internal, name_ + ": snapshot without a cluster"};
    const type_plan types = planned(s) ? fluid_type_plan(s, plan_params()) : type_plan{};
    const std::vector<std::size_t> order =
        tessera_order(s, p_, nullptr, types.solved ? types.horizon : 0.0);
    hare_filler filler(s, p_.fill, times_);
    const std::vector<char> kept = keep_restarted(s, filler);
    const type_servers servers = types.solved ? type_servers(*s.cl) : type_servers{};
    std::vector<double> rate(s.jobs.size(), 0.0);  // sum of the copies' step rates
    for (const std::size_t i : order) {
      if (filler.free_total() == 0) break;
      if (kept[i]) continue;  // placed where it was, not forked
      const double step = place_first(s, i, filler, types, servers);
      if (step > 0 && step < std::numeric_limits<double>::infinity()) rate[i] = 1.0 / step;
    }
    fork(s, order, filler, std::move(rate));
    round_plan plan = filler.take_plan();
    restarts_.note(s, plan, p_.restart_amortize);
    return plan;
  }

 private:
  /// Each GPU type's servers, and the servers of every other type, as `avoid` sets.
  struct type_servers {
    std::vector<std::set<int>> of, outside;
    type_servers() = default;  ///< none: a round without a type plan does not read them
    explicit type_servers(const cluster& cl) : of(cl.types.size()), outside(cl.types.size()) {
      for (std::size_t u = 0; u < cl.servers.size(); ++u)
        for (std::size_t t = 0; t < cl.types.size(); ++t)
          (static_cast<std::size_t>(cl.servers[u].type_index) == t ? of : outside)[t].insert(
              static_cast<int>(u));
    }
  };

  /// Whether this round has a type plan: option type_plan, and some job charged restarts.
  bool planned(const snapshot& s) const {
    if (!p_.type_plan) return false;
    for (const job_view& jv : s.jobs)
      if (jv.restart_seconds > 0) return true;
    return false;
  }

  /// The type plan's settings, from the policy's.
  type_plan_params plan_params() const {
    type_plan_params tp;
    tp.min_fit = p_.min_fit;
    tp.least_share = p_.plan_share;
    return tp;
  }

  /// Step 2 for copy 0 of s.jobs[i]: on each of its planned types alone, at >= min_fit x its
  /// best rate and its fit floor; else on the best placement left at its fit floor, off the
  /// bottleneck types outside its plan when it is a long job (plan_hold).
  double place_first(const snapshot& s, std::size_t i, hare_filler& filler, const type_plan& types,
                     const type_servers& servers) const {
    const job_view& jv = s.jobs[i];
    const double floor = tessera_fit_floor(jv, s.now, p_);
    const auto at_least = [](double r) { return [r](double step) { return step * r <= 1; }; };
    if (!types.solved || !(jv.restart_seconds > 0)) return filler.place(i, 0, {}, at_least(floor));
    const double best = hare_best_rate(jv);
    const double fit = std::max(floor, p_.min_fit * best);
    const std::vector<std::size_t>& pref = types.prefer(i);
    for (const std::size_t t : pref) {
      const double step = filler.place(i, 0, servers.outside[t], at_least(fit));
      if (step < std::numeric_limits<double>::infinity()) return step;
    }
    std::set<int> closed;
    const bool hold = p_.plan_hold > 0 && !pref.empty() && best > 0 &&
                      jv.remaining_steps / best >= p_.plan_hold * types.horizon;
    for (std::size_t t = 0; hold && t < types.bottleneck.size(); ++t) {
      if (types.bottleneck[t] && std::find(pref.begin(), pref.end(), t) == pref.end())
        closed.insert(servers.of[t].begin(), servers.of[t].end());
    }
    return filler.place(i, 0, closed, at_least(floor));
  }

  /// The efficiency of `n` averaged copies of the job, as the executor charges it.
  static double eff(const snapshot& s, const job_view& jv, int n) {
    return s.fork_efficiency ? s.fork_efficiency->factor(jv.spec->job_type, n) : 1.0;
  }

  /// Step 3: more copies on the GPUs still free, round robin in the order.
  /// `rate[i]`: the step rate of job i's first copy (0 when it was not placed).
  void fork(const snapshot& s, const std::vector<std::size_t>& order, hare_filler& filler,
            std::vector<double> rate) const {
    const int most = s.copy_limit > 0 ? std::min(p_.max_copies, s.copy_limit) : p_.max_copies;
    std::vector<int> copies(rate.size(), 1);
    for (int copy = 1; copy < most; ++copy) {
      bool added = false;
      for (const std::size_t i : order) {
        if (filler.free_total() == 0) return;
        const job_view& jv = s.jobs[i];
        if (!(rate[i] > 0) || copies[i] != copy) continue;             // unplaced, or done forking
        if (copy >= fork_limit(s, *jv.spec, p_.max_copies)) continue;  // its own limit
        const double now_eff = eff(s, jv, copy);
        if (jv.remaining_steps <= now_eff * rate[i] * s.round_length) continue;
        const double next_eff = eff(s, jv, copy + 1);
        const double wait = std::max(0.0, s.now - jv.spec->arrival - jv.run_time);
        const double cap = p_.fork_lr_cap * s.round_length / 3600.0;  // in LR, as lr_guard
        const auto pays = [&](double step) {
          if (!(step > 0) ||
              !tessera_fork_pays(rate[i], 1.0 / step, copy, p_.fork_gain, now_eff, next_eff))
            return false;
          const double run = jv.run_time + jv.remaining_steps / (next_eff * (rate[i] + 1 / step));
          return cap <= 0 || wait <= cap * run;
        };
        const double step = filler.place(i, copy, filler.servers_of(jv.spec->id), pays);
        if (step < std::numeric_limits<double>::infinity()) {
          rate[i] += 1.0 / step;
          ++copies[i];
          added = true;
        }
      }
      if (!added) return;
    }
  }

  /// Step 0: jobs still amortising their last restart keep last round's GPUs.
  std::vector<char> keep_restarted(const snapshot& s, hare_filler& filler) const {
    const std::vector<char> best = p_.sticky ? at_best(s) : std::vector<char>(s.jobs.size(), 0);
    std::vector<char> kept(s.jobs.size(), 0);
    for (std::size_t i = 0; i < s.jobs.size(); ++i)
      if (restarts_.amortising(s.jobs[i], s.now, p_.restart_amortize) || best[i])
        kept[i] = filler.keep(i);
    return kept;
  }

  /// Per job of `s`: copy 0 (of a job charged restarts) ran last round on GPUs of the job's
  /// best type only, one task per GPU, so it could not run faster elsewhere. One pass over
  /// the jobs and one over the last plan.
  static std::vector<char> at_best(const snapshot& s) {
    std::vector<char> best(s.jobs.size(), 0);
    if (!s.last_plan) return best;
    std::unordered_map<job_id, std::size_t> index;
    for (std::size_t i = 0; i < s.jobs.size(); ++i)
      if (s.jobs[i].restart_seconds > 0 && !s.jobs[i].throughput.empty())
        index.emplace(s.jobs[i].spec->id, i);
    std::vector<int> gpus(s.jobs.size(), 0);
    std::vector<char> elsewhere(s.jobs.size(), 0);  // a share off the best type
    for (const auto& as : s.last_plan->assignments) {
      const auto it = index.find(as.job);
      if (as.copy != 0 || it == index.end()) continue;
      const auto& t = s.jobs[it->second].throughput;
      const int type = static_cast<int>(std::max_element(t.begin(), t.end()) - t.begin());
      for (const auto& sh : as.shares)
        if (s.cl->servers[static_cast<std::size_t>(sh.server)].type_index != type)
          elsewhere[it->second] = 1;
      gpus[it->second] += as.gpus();
    }
    for (std::size_t i = 0; i < s.jobs.size(); ++i)
      best[i] =
          gpus[i] > 0 && !elsewhere[i] && gpus[i] >= std::max(1, s.jobs[i].spec->scale_factor);
    return best;
  }

  std::string name_;
  tessera_params p_;
  hare_task_times times_;
  restart_clock restarts_;  ///< when jobs charged a restart (re)started
};

}  // namespace

std::vector<option_spec> tessera_policy_options() {
  return {
      bool_option("relaxed",
                  "1: a job's tasks may share GPUs and mix types (relaxed synchronisation); 0: one "
                  "task per GPU",
                  true),
      {"lr_guard",
       "jobs that have waited this many rounds per hour of expected run time go "
       "first (latency ratio >= this x round length / 3600 s); 0: no guard",
       8, 0, 1e6},
      {"early_guard",
       "jobs that have waited this many rounds per hour of expected run time (below "
       "lr_guard) go first too, most urgent first, while their GPUs fit in early_share of the "
       "cluster's; 0: no early guard",
       1.5, 0, 1e6},
      {"early_share", "share of the cluster's GPUs that early-guarded jobs may be given first",
       0.05, 0, 1},
      {"ftf_guard",
       "jobs heading for a finish-time fairness above this at their fair share go "
       "first; 0: no guard",
       1.2, 0, 1e6},
      {"critical_share",
       "jobs whose remaining time is this multiple of the drain time go first; "
       "0: none",
       5.0, 0, 1e6},
      int_option("max_copies", "most copies a job is forked into, on distinct servers; 1: none", 3,
                 1, 16),
      {"fork_gain", "least relative gain in a job's effective rate for one more copy", 0.02, 0, 10},
      bool_option("by_remaining",
                  "1: the jobs under the guards go by least remaining work (Hare's clairvoyant "
                  "order); 0: by least attained service (job sizes unknown)",
                  true),
      {"fork_lr_cap",
       "no copy that would lift the job's projected latency ratio above this x "
       "round length / 3600 s (rounds waited per hour of run); 0: no cap",
       2.4, 0, 1e6},
      {"restart_amortize",
       "a job the executor charges a restart keeps its GPUs until it has run this x its "
       "restart time since it (re)started; 0: off",
       16.0, 0, 1e6},
      bool_option("sticky",
                  "1: a job charged restarts that ran last round on GPUs of its best type, one "
                  "task per GPU, keeps them (it could not run faster elsewhere); 0: it competes "
                  "again once its restart is amortised",
                  false),
      {"min_fit",
       "a job the executor charges a restart starts only on a placement of at least this x its "
       "best step rate (it is kept there a while); 0: any placement",
       0.3, 0, 1},
      {"fit_patience",
       "the fit floor no longer applies once the job's latency ratio (wait / run time at its "
       "best rate) reaches this; 0: it always applies",
       10.0, 0, 1e6},
      bool_option("type_plan",
                  "1: each job tries first the GPU types the round's fluid makespan plan gives "
                  "it (policies/type_plan.hpp); 0: its fastest free placement",
                  true),
      {"plan_share", "a type is in a job's plan when it holds at least this share of its work", 0.1,
       1e-6, 1},
      {"plan_hold",
       "jobs whose remaining time at their best rate is at least this x the plan's horizon "
       "stay off bottleneck types outside their plan; 0: no job does",
       0.02, 0, 1e6},
      {"critical_horizon",
       "with a type plan, jobs whose remaining time at their best rate is at least this x the "
       "plan's horizon (they bound it) are critical too; 0: no such job",
       0.9, 0, 1},
  };
}

std::unique_ptr<policy> make_tessera_policy(const std::string& name, tessera_params p) {
  return std::make_unique<tessera_policy>(name, p);
}

std::unique_ptr<policy> make_tessera(const std::string& name, const options& o) {
  tessera_params p;
  p.fill.relaxed = o.flag("relaxed");
  p.lr_guard = o.get("lr_guard");
  p.early_guard = o.get("early_guard");
  p.early_share = o.get("early_share");
  p.critical_share = o.get("critical_share");
  p.ftf_guard = o.get("ftf_guard");
  p.max_copies = o.integer("max_copies");
  p.fork_gain = o.get("fork_gain");
  p.fork_lr_cap = o.get("fork_lr_cap");
  p.by_remaining = o.flag("by_remaining");
  p.restart_amortize = o.get("restart_amortize");
  p.sticky = o.flag("sticky");
  p.min_fit = o.get("min_fit");
  p.fit_patience = o.get("fit_patience");
  p.type_plan = o.flag("type_plan");
  p.plan_share = o.get("plan_share");
  p.plan_hold = o.get("plan_hold");
  p.critical_horizon = o.get("critical_horizon");
  return make_tessera_policy(name, p);
}

}  // namespace tessera
