#include "policies/hare.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "runtime/core/server_throughput.hpp"
#include "runtime/core/task_split.hpp"

namespace tessera {

double hare_best_rate(const job_view& jv) {
  double best = 0;
  for (const double v : jv.throughput) best = std::max(best, v);
  return best;
}

double hare_service(const job_view& jv) {
  const double best = hare_best_rate(jv);
  if (!(best > 0)) return 0;
  const double w = jv.spec->priority_weight > 0 ? jv.spec->priority_weight : 1.0;
  return jv.steps_done * jv.spec->scale_factor / best / w;
}

void hare_task_times::refresh(const snapshot& s) {
  const std::uint64_t version = s.rates ? s.rates->version() : 0;
  if (!s.rates || s.rates != cached_rates_ || s.cl != cached_cluster_ ||
      version != cached_version_) {
    cache_.clear();
    classes_ = server_classes(std::vector<int>(s.cl->servers.size(), 0));
    cached_rates_ = s.rates;
    cached_cluster_ = s.cl;
    cached_version_ = version;
  }
}

const std::pair<std::vector<double>, std::vector<double>>& hare_task_times::get(
    const snapshot& s, const job_view& jv) {
  const int k = std::max(1, jv.spec->scale_factor);
  const std::string key =
      s.rates ? jv.spec->job_type + '\x1f' + std::to_string(k) : "#" + std::to_string(jv.spec->id);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const double inf = std::numeric_limits<double>::infinity();
  const cluster& cl = *s.cl;
  std::vector<double> single(cl.servers.size(), inf), multi(cl.servers.size(), inf);
  for (const auto& sv : cl.servers) {
    if (s.rates) {
      if (!split_runs_on(s, jv, sv.id)) continue;
      single[sv.id] = task_seconds(*s.rates, sv.id, jv.spec->job_type, k, false);
      if (k > 1) multi[sv.id] = task_seconds(*s.rates, sv.id, jv.spec->job_type, k, true);
    } else {
      const auto& t = cl.types[sv.type_index];
      const double v = sv.type_index < static_cast<int>(jv.throughput.size()) && t.mean_speed > 0
                           ? jv.throughput[sv.type_index] * sv.speed / t.mean_speed
                           : 0.0;
      if (v > 0) {
        single[sv.id] = 1.0 / v;
        if (k > 1) multi[sv.id] = 1.0 / v;
      }
    }
  }
  classes_.refine(single, multi);
  return cache_.emplace(key, std::make_pair(std::move(single), std::move(multi))).first->second;
}

namespace {

/// One way to place a job's K tasks: a list of GPUs as (server, tasks on that GPU).
struct task_placement {
  std::vector<std::pair<int, int>> gpus;
  double step = std::numeric_limits<double>::infinity();
  int servers = 0;
  bool lease = false;  ///< every server was the job's in the previous round
};

/// Fills in step, servers and lease of `c` from its GPU list.
void score(task_placement& c, const std::vector<double>& single, const std::vector<double>& multi,
           const std::set<int>& previous) {
  std::set<int> used;
  for (const auto& g : c.gpus) used.insert(g.first);
  c.servers = static_cast<int>(used.size());
  const bool span = c.servers > 1;
  c.step = 0;
  for (const auto& [u, n] : c.gpus) c.step = std::max(c.step, n * (span ? multi[u] : single[u]));
  c.lease = !previous.empty() &&
            std::all_of(used.begin(), used.end(), [&](int u) { return previous.count(u) > 0; });
}

/// True when `a` is a strictly better placement than `b`: shorter step (beyond rounding),
/// then fewer GPUs, fewer servers, then the previous round's servers.
bool better(const task_placement& a, const task_placement& b) {
  if (!std::isfinite(a.step)) return false;
  if (!std::isfinite(b.step)) return true;
  const double tol = 1e-9 * std::max(a.step, b.step);
  if (a.step < b.step - tol) return true;
  if (b.step < a.step - tol) return false;
  if (a.gpus.size() != b.gpus.size()) return a.gpus.size() < b.gpus.size();
  if (a.servers != b.servers) return a.servers < b.servers;
  return a.lease && !b.lease;
}

/// The placement of all K tasks on server u alone, spread evenly over as few of its free GPUs
/// as give the shortest step.
task_placement on_one_server(int u, int k, const std::vector<int>& free,
                             const std::vector<double>& single, const std::vector<double>& multi,
                             const std::set<int>& prev) {
  const int g = std::min(k, free[u]);
  const int per = (k + g - 1) / g;        // tasks on the busiest GPU
  const int used = (k + per - 1) / per;   // fewest GPUs with at most `per` tasks each
  const int full = k - (per - 1) * used;  // GPUs that run `per` tasks; the rest per - 1
  task_placement c;
  for (int i = 0; i < used; ++i) c.gpus.emplace_back(u, i < full ? per : per - 1);
  score(c, single, multi, prev);
  return c;
}

/// What one place() call may use: the job's per-server task times, the free GPUs by class
/// and the servers it must not use. A server is open to the job when it has a free GPU, a
/// finite task time and is not avoided; the rule scans open servers in the order (single-server
/// task time, free GPUs, id), which `before` reproduces.
struct fill_view {
  const std::vector<double>& single;
  const std::vector<double>& multi;
  const std::vector<int>& free;
  const server_classes& classes;
  const free_buckets& buckets;
  const std::set<int>& avoid;
  bool before(int a, int b) const {
    if (single[a] != single[b]) return single[a] < single[b];
    if (free[a] != free[b]) return free[a] < free[b];
    return a < b;
  }
};

/// Candidates (a): for each open server, all K tasks on it alone; the best of them by
/// `better`, first in scan order on ties. Servers of one class with the same free count give
/// the same candidate but for `lease`, so each (task time, free count) bucket is tried once,
/// with its lowest-id server of the previous round if it has one, else its lowest id.
task_placement best_one_server(const fill_view& v, int k, const hare_fill_params& p,
                               const std::set<int>& prev) {
  std::vector<int> cls;  // classes with a finite single-server task time, by that time
  for (int c = 0; c < v.classes.count(); ++c)
    if (std::isfinite(v.single[v.classes.first(c)])) cls.push_back(c);
  std::stable_sort(cls.begin(), cls.end(), [&](int a, int b) {
    return v.single[v.classes.first(a)] < v.single[v.classes.first(b)];
  });
  const auto avoided = [&](int u) { return v.avoid.count(u) > 0; };
  task_placement best;
  for (std::size_t i = 0, j = 0; i < cls.size(); i = j) {
    const double t = v.single[v.classes.first(cls[i])];
    for (j = i; j < cls.size() && v.single[v.classes.first(cls[j])] == t; ++j) {
    }
    const std::vector<int> group(cls.begin() + static_cast<std::ptrdiff_t>(i),
                                 cls.begin() + static_cast<std::ptrdiff_t>(j));
    for (int f = p.relaxed ? 1 : k; f <= v.buckets.max_free(); ++f) {
      int u = -1;
      for (const int w : prev)  // ascending: the first match is the lowest id
        if (w < static_cast<int>(v.free.size()) && v.free[w] == f && v.single[w] == t &&
            !avoided(w)) {
          u = w;
          break;
        }
      if (u < 0)
        v.buckets.walk(group, f, avoided, [&](int w) {
          u = w;
          return true;
        });
      if (u < 0) continue;
      task_placement c = on_one_server(u, k, v.free, v.single, v.multi, prev);
      if (better(c, best)) best = std::move(c);
    }
  }
  return best;
}

/// One task's possible GPU in earliest_finish_spread, ordered by finish time, then reuse of
/// a GPU of the job's before a new one, then a server the job already uses, then scan order.
struct task_slot {
  int u = -1;
  double finish = std::numeric_limits<double>::infinity();
  bool fresh = false;  ///< a GPU the job does not hold yet
  bool first_on_server = false;
};

/// Candidate (b), spanning servers: each of the K tasks in turn where it would finish
/// earliest, one more task on a GPU of the job's (relaxed only) or a free GPU, with spanning
/// task times; ties reuse a GPU before taking a new one, then prefer a server the job already
/// uses, then scan order. Its step is infinite when some task finds no GPU. Servers the job
/// does not use yet are looked up per class: the first in scan order of each class.
task_placement earliest_finish_spread(const fill_view& v, int k, const hare_fill_params& p,
                                      const std::set<int>& prev) {
  std::map<int, std::vector<int>> on;  // tasks per GPU of this job, per server
  const auto wins = [&](const task_slot& a, const task_slot& b) {
    if (b.u < 0) return true;
    if (a.finish != b.finish) return a.finish < b.finish;
    if (a.fresh != b.fresh) return !a.fresh;
    if (a.first_on_server != b.first_on_server) return !a.first_on_server;
    return v.before(a.u, b.u);
  };
  const auto skip = [&](int u) { return on.count(u) > 0 || v.avoid.count(u) > 0; };
  task_placement c;
  for (int task = 0; task < k; ++task) {
    task_slot pick;
    const auto consider = [&](const task_slot& t) {
      if (wins(t, pick)) pick = t;
    };
    for (const auto& [u, gpus] : on) {
      if (p.relaxed) {
        const int least = *std::min_element(gpus.begin(), gpus.end());
        consider({u, (least + 1) * v.multi[u], false, false});
      }
      if (v.free[u] > static_cast<int>(gpus.size())) consider({u, v.multi[u], true, false});
    }
    for (int cl = 0; cl < v.classes.count(); ++cl) {
      if (!std::isfinite(v.multi[v.classes.first(cl)])) continue;
      for (int f = 1; f <= v.buckets.max_free(); ++f)
        if (const int u = v.buckets.first(cl, f, skip); u >= 0) {
          consider({u, v.multi[u], true, true});
          break;
        }
    }
    if (pick.u < 0) return c;
    auto& gpus = on[pick.u];
    if (pick.fresh) {
      gpus.push_back(1);
    } else {
      ++*std::min_element(gpus.begin(), gpus.end());
    }
  }
  for (const auto& [u, gpus] : on)
    for (const int n : gpus) c.gpus.emplace_back(u, n);
  score(c, v.single, v.multi, prev);
  return c;
}

/// The servers of each job copy in the last round.
std::map<copy_id, std::set<int>> previous_servers(const snapshot& s) {
  std::map<copy_id, std::set<int>> previous;
  if (s.last_plan)
    for (const auto& as : s.last_plan->assignments)
      for (const auto& sh : as.shares) previous[as.id()].insert(sh.server);
  return previous;
}

/// Adds the placement `best` of job jv to the plan, one assignment per (server, tasks per
/// GPU), and takes its GPUs.
void add_placement(const cluster& cl, const job_view& jv, int copy, const task_placement& best,
                   round_plan& plan, const std::function<void(int, int)>& take) {
  std::map<std::pair<int, int>, int> groups;  // (server, tasks per GPU) -> GPUs
  for (const auto& [u, n] : best.gpus) ++groups[{u, -n}];
  for (const auto& [key, g] : groups) {
    const int u = key.first, per = -key.second;
    assignment as;
    as.job = jv.spec->id;
    as.copy = copy;
    as.type = cl.servers[u].type_index;
    as.shares = {server_share{u, g}};
    as.tasks = per * g;
    plan.assignments.push_back(std::move(as));
    take(u, g);
  }
}

}  // namespace

hare_filler::hare_filler(const snapshot& s, const hare_fill_params& p, hare_task_times& times)
    : s_(s), p_(p), times_(times), free_(s.cl->servers.size(), 0), previous_(previous_servers(s)) {
  times_.refresh(s);
  for (const auto& sv : s.cl->servers) {
    free_[sv.id] = sv.gpus;
    free_total_ += sv.gpus;
  }
  plan_.start = s.now;
  plan_.length = s.round_length;
}

const std::pair<std::vector<double>, std::vector<double>>& hare_filler::task_times(
    const job_view& jv) {
  const auto& t = times_.get(s_, jv);                    // may refine the server classes
  if (times_.classes().version() != buckets_version_) {  // new round, or classes split
    buckets_ = free_buckets(times_.classes(), free_);
    buckets_version_ = times_.classes().version();
  }
  return t;
}

void hare_filler::take(int u, int g) {
  const auto& classes = times_.classes();
  buckets_.update(u, classes.of(u), free_[u], free_[u] - g);
  free_[u] -= g;
  free_total_ -= g;
}

double hare_filler::place(std::size_t idx, int copy, const std::set<int>& avoid,
                          const std::function<bool(double)>& accept) {
  const double inf = std::numeric_limits<double>::infinity();
  if (free_total_ == 0) return inf;
  const job_view& jv = s_.jobs.at(idx);
  const int k = std::max(1, jv.spec->scale_factor);
  const auto& [single, multi] = task_times(jv);
  static const std::set<int> none;
  auto prev_it = previous_.find(copy_id{jv.spec->id, copy});
  const std::set<int>& prev = prev_it == previous_.end() ? none : prev_it->second;
  const fill_view view{single, multi, free_, times_.classes(), buckets_, avoid};
  task_placement best = best_one_server(view, k, p_, prev);
  if (k > 1) {
    task_placement c = earliest_finish_spread(view, k, p_, prev);
    if (better(c, best)) best = std::move(c);
  }
  if (!std::isfinite(best.step)) return inf;  // no free GPU this job can use
  if (accept && !accept(best.step)) return inf;
  add_placement(*s_.cl, jv, copy, best, plan_, [this](int u, int g) { take(u, g); });
  for (const auto& g : best.gpus) used_[jv.spec->id].insert(g.first);
  return best.step;
}

bool hare_filler::keep(std::size_t idx) {
  if (!s_.last_plan) return false;
  const job_view& jv = s_.jobs.at(idx);
  std::vector<const assignment*> parts;
  std::map<int, int> need;  // server -> GPUs
  for (const auto& as : s_.last_plan->assignments)
    if (as.job == jv.spec->id && as.copy == 0) {
      parts.push_back(&as);
      for (const auto& sh : as.shares) need[sh.server] += sh.gpus;
    }
  if (parts.empty()) return false;
  for (const auto& [u, g] : need)
    if (free_[static_cast<std::size_t>(u)] < g) return false;
  task_times(jv);  // the buckets follow the server classes it may refine
  for (const assignment* as : parts) {
    assignment kept = *as;
    kept.step_budget = -1;
    plan_.assignments.push_back(std::move(kept));
  }
  for (const auto& [u, g] : need) {
    take(u, g);
    used_[jv.spec->id].insert(u);
  }
  return true;
}

const std::set<int>& hare_filler::servers_of(job_id job) const {
  static const std::set<int> none;
  auto it = used_.find(job);
  return it == used_.end() ? none : it->second;
}

round_plan hare_fill(const snapshot& s, const std::vector<std::size_t>& order,
                     const hare_fill_params& p, hare_task_times& times) {
  hare_filler filler(s, p, times);
  for (const std::size_t idx : order) {
    if (filler.free_total() == 0) break;
    filler.place(idx);
  }
  return filler.take_plan();
}

std::vector<option_spec> hare_options() {
  return {
      bool_option("relaxed",
                  "1: a job's tasks may share GPUs and mix types (relaxed synchronisation); 0: one "
                  "task per GPU",
                  true),
  };
}

namespace {

/// Orders the active jobs by a key (ascending; ties: arrival, then id) and fills task by task.
class hare_ordered_policy final : public policy {
 public:
  hare_ordered_policy(std::string name, std::function<double(const job_view&)> key,
                      hare_fill_params p)
      : name_(std::move(name)), key_(std::move(key)), p_(p) {}
  std::string name() const override { return name_; }
  bool stacks_tasks() const override { return p_.relaxed; }

  result<round_plan> plan(const snapshot& s) override {
    if (!s.cl) return error{error_kind::internal, name_ + ": snapshot without a cluster"};
    std::vector<double> key(s.jobs.size());
    for (std::size_t i = 0; i < s.jobs.size(); ++i) key[i] = key_(s.jobs[i]);
    std::vector<std::size_t> order(s.jobs.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (key[a] != key[b]) return key[a] < key[b];
      const job& ja = *s.jobs[a].spec;
      const job& jb = *s.jobs[b].spec;
      if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
      return ja.id < jb.id;
    });
    return hare_fill(s, order, p_, times_);
  }

 private:
  std::string name_;
  std::function<double(const job_view&)> key_;
  hare_fill_params p_;
  hare_task_times times_;
};

}  // namespace

std::unique_ptr<policy> make_hare_ordered(std::string name,
                                          std::function<double(const job_view&)> key,
                                          hare_fill_params p) {
  return std::make_unique<hare_ordered_policy>(std::move(name), std::move(key), p);
}

std::unique_ptr<policy> make_hare(const std::string& name, const options& o) {
  hare_fill_params p;
  p.relaxed = o.flag("relaxed");
  return make_hare_ordered(name, hare_service, p);
}

}  // namespace tessera
