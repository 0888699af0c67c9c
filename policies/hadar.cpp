#include "policies/hadar.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "policies/server_index.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

double hadar_price(double price_low, double price_high, double used, double capacity) {
  if (capacity <= 0) return price_high;
  const double f = std::clamp(used / capacity, 0.0, 1.0);
  return price_low * std::pow(price_high / price_low, f);
}

double hadar_cost(double price_low, double price_high, int used, int capacity, int g) {
  double c = 0;
  for (int i = 0; i < g; ++i) c += hadar_price(price_low, price_high, used + i, capacity);
  return c;
}

std::vector<option_spec> hadar_options() {
  return {
      {"price_low", "L: per-GPU price of an empty pool (least utility per GPU worth a GPU)", 0.3,
       1e-6, 1e3},
      {"price_high",
       "U: per-GPU price of a full pool (utility per GPU of a fresh job on its fastest type)", 1.0,
       1e-6, 1e3},
      bool_option("mixed_types",
                  "1: one copy's GPUs may span GPU types (task-level heterogeneity); 0: one type",
                  true),
      bool_option(
          "value_prices",
          "1: scale a pool's prices by its value (mean rate/best of the active jobs there); 0: off",
          true),
      {"critical_share",
       "jobs whose remaining time is at least this x the cluster's drain time go first (0: off)",
       2.0, 0, 100},
  };
}

std::vector<option_spec> hadare_options() {
  auto o = hadar_options();
  o.push_back(
      int_option("max_copies", "most copies a job is forked into, on distinct servers", 3, 1, 16));
  return o;
}

namespace {

/// Servers of one GPU type and speed factor: one priced resource per round.
struct gpu_pool {
  int capacity = 0;
  int used = 0;
  double value = 1;  ///< mean over active jobs of (per-GPU rate here / the job's best)
  double value_sum = 0;
  int value_jobs = 0;
};

/// Per-server throughputs of one (job type, GPUs) pair: whole-configuration steps/s at each
/// server's per-GPU rate, for a one-server and a multi-server configuration.
struct server_rates {
  std::vector<double> single;
  std::vector<double> multi;
  double best = 0;                ///< the best rate_on over the servers (0: none)
  std::vector<double> pool_rate;  ///< per pool, the best rate_on among its servers
};

/// What the round's planning knows of one job.
struct job_info {
  std::size_t index = 0;  ///< into snapshot::jobs
  int k = 1;              ///< GPUs per copy
  double best = 0;        ///< steps/s on its best whole single-type placement
  double rem = 0;         ///< remaining seconds at `best`
  double weight = 1;      ///< ageing weight w
  bool critical = false;
  const server_rates* rates = nullptr;
};

/// A candidate placement of a job and its value (payoff) at the current prices.
struct priced_placement {
  std::vector<server_share> shares;
  double rate = 0;
  double payoff = -std::numeric_limits<double>::infinity();
};

/// One round's planning: the pools and their prices, the free GPUs, the jobs in order, and
/// the plan with each job's copies so far.
struct hadar_round {
  std::vector<int> pool_of;  ///< per server
  std::vector<gpu_pool> pools;
  std::vector<int> free;  ///< per server
  int free_total = 0;
  free_buckets buckets;  ///< `free` by (server class, free count)
  std::vector<job_info> info;
  std::unordered_map<job_id, int> previous_server;  ///< single-server placements, last round
  round_plan plan;
  std::vector<std::vector<int>> copy_servers;  ///< per job: servers of its copies
  std::vector<double> copy_rate;               ///< per job: sum of its copies' rates
  std::vector<int> copies;                     ///< per job: copies placed
};

/// A server the job may use: its GPU type has a throughput for the job.
bool usable(const job_view& jv, const server& sv) {
  return sv.type_index >= 0 && sv.type_index < static_cast<int>(jv.throughput.size()) &&
         jv.throughput[sv.type_index] > 0;
}

/// The job's rate on server u: one-server when a server of u's size holds its k GPUs, else
/// spanning.
double rate_on(const cluster& cl, const job_info& in, int u) {
  const bool fits = cl.servers[u].gpus >= in.k;
  return fits ? in.rates->single[u] : in.rates->multi[u];
}

/// Each server's pool: servers of one GPU type and speed factor, numbered by first server.
std::vector<int> pool_numbers(const cluster& cl) {
  std::vector<int> pool_of(cl.servers.size(), 0);
  std::map<std::pair<int, double>, int> index;
  for (const auto& sv : cl.servers)
    pool_of[sv.id] =
        index.emplace(std::make_pair(sv.type_index, sv.speed), static_cast<int>(index.size()))
            .first->second;
  return pool_of;
}

/// Pools with their capacities and every GPU free.
void make_pools(const cluster& cl, const std::vector<int>& pool_of, hadar_round& rd) {
  rd.pool_of = pool_of;
  for (const int c : pool_of)
    if (c >= static_cast<int>(rd.pools.size())) rd.pools.resize(static_cast<std::size_t>(c) + 1);
  rd.free.assign(cl.servers.size(), 0);
  for (const auto& sv : cl.servers) {
    rd.pools[pool_of[sv.id]].capacity += sv.gpus;
    rd.free[sv.id] = sv.gpus;
    rd.free_total += sv.gpus;
  }
}

/// Adds the job's value to each pool it can use: its best rate there over its best rate.
void add_pool_values(const job_info& in, hadar_round& rd) {
  for (std::size_t c = 0; c < rd.pools.size() && c < in.rates->pool_rate.size(); ++c)
    if (in.rates->pool_rate[c] > 0) {
      rd.pools[c].value_sum += in.rates->pool_rate[c] / in.best;
      ++rd.pools[c].value_jobs;
    }
}

/// Critical jobs first, then the weight descending, then remaining time, arrival, id.
void order_jobs(const snapshot& s, double critical_share, double work, hadar_round& rd) {
  const double drain = work / std::max(1, s.cl->total_gpus());
  for (auto& in : rd.info) in.critical = critical_share > 0 && in.rem >= critical_share * drain;
  std::sort(rd.info.begin(), rd.info.end(), [&](const job_info& a, const job_info& b) {
    if (a.critical != b.critical) return a.critical;
    if (a.weight != b.weight) return a.weight > b.weight;
    if (a.rem != b.rem) return a.rem < b.rem;
    const job& ja = *s.jobs[a.index].spec;
    const job& jb = *s.jobs[b.index].spec;
    if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
    return ja.id < jb.id;
  });
}

/// Adds a copy's placement to the plan and takes its GPUs.
void admit(const snapshot& s, const server_classes& classes, std::size_t o,
           const priced_placement& c, hadar_round& rd) {
  const cluster& cl = *s.cl;
  assignment as;
  as.job = s.jobs[rd.info[o].index].spec->id;
  as.copy = rd.copies[o];
  as.shares = c.shares;
  as.type = cl.servers[c.shares.front().server].type_index;
  for (const auto& sh : c.shares) {
    rd.buckets.update(sh.server, classes.of(sh.server), rd.free[sh.server],
                      rd.free[sh.server] - sh.gpus);
    rd.free[sh.server] -= sh.gpus;
    rd.free_total -= sh.gpus;
    rd.pools[rd.pool_of[sh.server]].used += sh.gpus;
    rd.copy_servers[o].push_back(sh.server);
    if (cl.servers[sh.server].type_index != as.type) as.type = -1;
  }
  rd.plan.assignments.push_back(std::move(as));
  rd.copy_rate[o] += c.rate;
  ++rd.copies[o];
}

/// True when u is among `servers` (a job's copies' servers: a handful).
bool listed(const std::vector<int>& servers, int u) {
  return std::find(servers.begin(), servers.end(), u) != servers.end();
}

class hadar_policy final : public policy {
 public:
  hadar_policy(std::string name, hadar_params p) : name_(std::move(name)), p_(p) {
    if (p_.price_high < p_.price_low) p_.price_high = p_.price_low;
    p_.max_copies = std::max(1, p_.max_copies);
  }

  std::string name() const override { return name_; }

  result<round_plan> plan(const snapshot& s) override {
    if (!s.cl) return error{error_kind::internal, name_ + ": snapshot without a cluster"};
    refresh_cache(s);
    hadar_round rd;
    make_pools(*s.cl, pool_of_, rd);
    order_jobs(s, p_.critical_share, job_infos(s, rd), rd);
    rd.buckets = free_buckets(classes_, rd.free);  // after job_infos: its look-ups refine
    if (s.last_plan)
      for (const auto& as : s.last_plan->assignments)
        if (as.copy == 0 && as.shares.size() == 1) rd.previous_server[as.job] = as.shares[0].server;
    rd.plan.start = s.now;
    rd.plan.length = s.round_length;
    rd.copy_servers.assign(rd.info.size(), {});
    rd.copy_rate.assign(rd.info.size(), 0.0);
    rd.copies.assign(rd.info.size(), 0);

    for (std::size_t o = 0; o < rd.info.size() && rd.free_total > 0; ++o) {
      const priced_placement c = dual(s, rd.info[o], {}, rd);
      if (c.payoff > 0) admit(s, classes_, o, c, rd);
    }
    fork_copies(s, rd);
    return std::move(rd.plan);
  }

 private:
  /// The job infos of every job with an estimate somewhere (pool values added when prices
  /// are valued); returns the remaining work, in GPU-seconds at every job's best rate.
  double job_infos(const snapshot& s, hadar_round& rd) {
    double work = 0;
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      const job_view& jv = s.jobs[i];
      job_info in;
      in.index = i;
      in.k = jv.spec->scale_factor;
      in.rates = &rates_for(s, jv);
      in.best = in.rates->best;
      if (in.best <= 0) continue;  // no estimate anywhere: cannot be placed
      if (p_.value_prices) add_pool_values(in, rd);
      in.rem = std::max(0.0, jv.remaining_steps) / in.best;
      const double wait = std::max(0.0, s.now - jv.spec->arrival - jv.run_time);
      in.weight = jv.spec->priority_weight * (1.0 + wait / std::max(in.rem, s.round_length));
      work += in.k * in.rem;
      rd.info.push_back(in);
    }
    for (auto& pl : rd.pools)
      if (pl.value_jobs > 0) pl.value = pl.value_sum / pl.value_jobs;
    return work;
  }

  /// The placement `shares` of one copy of the job, valued: its rate (the slowest server's,
  /// spanning entries when it spans servers) and its payoff, utility minus the pools' prices
  /// for the GPUs it takes. Payoff -infinity when it would not run.
  priced_placement priced(const job_info& in, std::vector<server_share> shares,
                          const hadar_round& rd) const {
    const bool multi = shares.size() > 1;
    double r = std::numeric_limits<double>::infinity();
    std::map<int, int> take;  // pool -> GPUs
    for (const auto& sh : shares) {
      r = std::min(r, multi ? in.rates->multi[sh.server] : in.rates->single[sh.server]);
      take[rd.pool_of[sh.server]] += sh.gpus;
    }
    if (!(r > 0)) return {};
    double cost = 0;
    for (const auto& [pl, g] : take)
      cost += rd.pools[pl].value *
              hadar_cost(p_.price_low, p_.price_high, rd.pools[pl].used, rd.pools[pl].capacity, g);
    const double payoff = in.weight * in.k * r / in.best - cost;
    return priced_placement{std::move(shares), r, payoff};
  }

  /// The dual subroutine: the best-payoff placement of one copy of the job on the free GPUs
  /// of servers it may use and are not `banned`, given the prices.
  priced_placement dual(const snapshot& s, const job_info& in, const std::vector<int>& banned,
                        const hadar_round& rd) const {
    const job_view& jv = s.jobs[in.index];
    std::vector<int> cls;  // the server classes the job may use
    for (int c = 0; c < classes_.count(); ++c)
      if (usable(jv, s.cl->servers[classes_.first(c)])) cls.push_back(c);
    priced_placement best;
    auto consider = [&](std::vector<server_share> shares) {
      priced_placement c = priced(in, std::move(shares), rd);
      if (c.payoff > best.payoff + 1e-12) best = std::move(c);
    };
    for (const int u : single_server_picks(s, in, cls, banned, rd))
      if (u >= 0) consider({server_share{u, in.k}});
    for (auto& shares : spanning_placements(s, in, cls, banned, rd)) consider(std::move(shares));
    return best;
  }

  /// Candidates (a): one server per pool with room for the copy, the best fit (lowest id
  /// among equals), or the job's previous server when it has room; -1 for a pool without one.
  std::vector<int> single_server_picks(const snapshot& s, const job_info& in,
                                       const std::vector<int>& cls, const std::vector<int>& banned,
                                       const hadar_round& rd) const {
    const int k = in.k;
    std::vector<int> pick(rd.pools.size(), -1);
    const auto is_banned = [&](int u) { return listed(banned, u); };
    for (const int c : cls)
      for (int f = std::max(1, k); f <= rd.buckets.max_free(); ++f)
        if (const int u = rd.buckets.first(c, f, is_banned); u >= 0) {
          int& cur = pick[rd.pool_of[u]];
          if (cur < 0 || f < rd.free[cur] || (f == rd.free[cur] && u < cur)) cur = u;
          break;
        }
    const job_view& jv = s.jobs[in.index];
    if (const auto prev = rd.previous_server.find(jv.spec->id); prev != rd.previous_server.end()) {
      const int u = prev->second;
      if (u >= 0 && u < static_cast<int>(s.cl->servers.size()) && !is_banned(u) &&
          rd.free[u] >= k && usable(jv, s.cl->servers[u]))
        pick[rd.pool_of[u]] = u;
    }
    return pick;
  }

  /// Candidates (b): for each speed threshold, k GPUs from the open servers at least that
  /// fast (spanning rates), fastest first, then most free GPUs, then lowest id; only those
  /// spanning servers. The servers are walked class by class (a class's servers share a
  /// rate), so a threshold costs O(k) bucket steps, not a sort of every server.
  std::vector<std::vector<server_share>> spanning_placements(const snapshot& s, const job_info& in,
                                                             const std::vector<int>& cls,
                                                             const std::vector<int>& banned,
                                                             const hadar_round& rd) const {
    const cluster& cl = *s.cl;
    const int k = in.k;
    std::map<double, std::vector<int>, std::greater<double>> by_rate;  // positive rates only
    for (const int c : cls)
      if (in.rates->multi[classes_.first(c)] > 0)
        by_rate[in.rates->multi[classes_.first(c)]].push_back(c);
    std::vector<std::vector<int>> groups;
    for (auto& [rate, g] : by_rate) groups.push_back(std::move(g));
    const auto is_banned = [&](int u) { return listed(banned, u); };
    std::vector<std::vector<server_share>> out;
    for (std::size_t i = 0; i < groups.size(); ++i) {
      int head = -1;  // the group's first open server, fastest-then-most-free order
      for (int f = rd.buckets.max_free(); f >= 1 && head < 0; --f)
        rd.buckets.walk(groups[i], f, is_banned, [&](int u) {
          head = u;
          return true;
        });
      if (head < 0) continue;  // no open server at this rate: not a threshold
      std::vector<server_share> shares;
      int got = 0;
      for (std::size_t j = 0; j <= i && got < k; ++j) {
        std::vector<int> g;
        for (const int c : groups[j])
          if (p_.mixed_types ||
              cl.servers[classes_.first(c)].type_index == cl.servers[head].type_index)
            g.push_back(c);
        for (int f = rd.buckets.max_free(); f >= 1 && got < k; --f)
          rd.buckets.walk(g, f, is_banned, [&](int u) {
            const int take = std::min(f, k - got);
            shares.push_back(server_share{u, take});
            got += take;
            return got == k;
          });
      }
      if (got == k && shares.size() > 1) out.push_back(std::move(shares));
    }
    return out;
  }

  /// HadarE: further copies, round robin, on servers the job's other copies do not use, while
  /// its copies so far could not finish it within the round.
  void fork_copies(const snapshot& s, hadar_round& rd) const {
    const int copy_cap = s.copy_limit > 0 ? std::min(p_.max_copies, s.copy_limit) : p_.max_copies;
    for (int copy = 1; copy < copy_cap; ++copy) {
      for (std::size_t o = 0; o < rd.info.size() && rd.free_total > 0; ++o) {
        if (rd.copies[o] != copy) continue;
        const job_view& jv = s.jobs[rd.info[o].index];
        if (copy >= fork_limit(s, *jv.spec, p_.max_copies)) continue;          // its own limit
        if (rd.copy_rate[o] * s.round_length >= jv.remaining_steps) continue;  // ends this round
        const priced_placement c = dual(s, rd.info[o], rd.copy_servers[o], rd);
        if (c.payoff > 0) admit(s, classes_, o, c, rd);
      }
    }
  }

  /// Drops cached rates when the throughput model changed.
  void refresh_cache(const snapshot& s) {
    const std::uint64_t version = s.rates ? s.rates->version() : 0;
    // Without a per-server model the rates come from each job's own per-type view, so the
    // cache is per job and per round.
    if (!s.rates || s.cl != cached_cluster_ || s.rates != cached_rates_ ||
        version != cached_version_) {
      cache_.clear();
      pool_of_ = pool_numbers(*s.cl);
      classes_ = server_classes(pool_of_);
      cached_cluster_ = s.cl;
      cached_rates_ = s.rates;
      cached_version_ = version;
    }
  }

  /// Per-server rates of the job's (type, scale factor), from the snapshot's throughput model
  /// (the executor's) or, without one, from the job's per-type view scaled by speed factors.
  /// Jobs of one (type, scale factor) share the entry, including where they may run.
  const server_rates& rates_for(const snapshot& s, const job_view& jv) {
    const int k = jv.spec->scale_factor;
    const std::string key = s.rates ? jv.spec->job_type + '\x1f' + std::to_string(k)
                                    : "#" + std::to_string(jv.spec->id);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const cluster& cl = *s.cl;
    server_rates r;
    r.single.assign(cl.servers.size(), 0.0);
    r.multi.assign(cl.servers.size(), 0.0);
    for (const auto& sv : cl.servers) {
      if (!usable(jv, sv)) continue;
      if (s.rates) {
        r.single[sv.id] =
            sv.gpus >= k ? s.rates->rate_at(sv.id, jv.spec->job_type, k, false).steps_per_s : 0;
        r.multi[sv.id] =
            k > 1 ? s.rates->rate_at(sv.id, jv.spec->job_type, k, true).steps_per_s : 0;
      } else {
        const auto& t = cl.types[sv.type_index];
        const double v =
            t.mean_speed > 0 ? jv.throughput[sv.type_index] * sv.speed / t.mean_speed : 0;
        r.single[sv.id] = sv.gpus >= k ? v : 0;
        r.multi[sv.id] = k > 1 ? v : 0;
      }
    }
    job_info in;
    in.k = k;
    in.rates = &r;
    for (const int c : pool_of_)
      if (c >= static_cast<int>(r.pool_rate.size())) r.pool_rate.resize(c + 1, 0.0);
    for (const auto& sv : cl.servers) {
      if (!usable(jv, sv)) continue;
      const double v = rate_on(cl, in, sv.id);
      r.best = std::max(r.best, v);
      r.pool_rate[pool_of_[sv.id]] = std::max(r.pool_rate[pool_of_[sv.id]], v);
    }
    classes_.refine(r.single, r.multi);
    return cache_.emplace(key, std::move(r)).first->second;
  }

  std::string name_;
  hadar_params p_;
  std::unordered_map<std::string, server_rates> cache_;
  std::vector<int> pool_of_;  ///< per server: its pool
  server_classes classes_;    ///< pools split until every cached rate is equal within a class
  const cluster* cached_cluster_ = nullptr;
  const server_throughput* cached_rates_ = nullptr;
  std::uint64_t cached_version_ = 0;
};

hadar_params params_from(const options& o, int max_copies) {
  hadar_params p;
  p.price_low = o.get("price_low");
  p.price_high = o.get("price_high");
  p.critical_share = o.get("critical_share");
  p.mixed_types = o.flag("mixed_types");
  p.value_prices = o.flag("value_prices");
  p.max_copies = max_copies;
  return p;
}

}  // namespace

std::unique_ptr<policy> make_hadar_policy(const std::string& name, hadar_params p) {
  return std::make_unique<hadar_policy>(name, p);
}

std::unique_ptr<policy> make_hadar(const std::string& name, const options& o) {
  return make_hadar_policy(name, params_from(o, 1));
}

std::unique_ptr<policy> make_hadare(const std::string& name, const options& o) {
  return make_hadar_policy(name, params_from(o, o.integer("max_copies")));
}

}  // namespace tessera
