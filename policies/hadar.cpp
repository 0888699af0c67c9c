#include "policies/hadar.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/server_throughput.hpp"

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
       "U: per-GPU price of a full pool (utility per GPU of a fresh job on its fastest type)",
       1.0, 1e-6, 1e3},
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
  double value = 1;   ///< mean over active jobs of (per-GPU rate here / the job's best)
  double value_sum = 0;
  int value_jobs = 0;
};

/// Per-server throughputs of one (job type, GPUs) pair: whole-configuration steps/s at each
/// server's per-GPU rate, for a one-server and a multi-server configuration.
struct server_rates {
  std::vector<double> single;
  std::vector<double> multi;
};

/// What the round's planning knows of one job.
struct job_info {
  std::size_t index = 0;       ///< into snapshot::jobs
  int k = 1;                   ///< GPUs per copy
  double best = 0;             ///< steps/s on its best whole single-type placement
  double rem = 0;              ///< remaining seconds at `best`
  double weight = 1;           ///< ageing weight w
  bool critical = false;
  const server_rates* rates = nullptr;
};

/// A candidate placement and its value.
struct candidate {
  std::vector<server_share> shares;
  double rate = 0;
  double payoff = -std::numeric_limits<double>::infinity();
};

class hadar_policy final : public policy {
 public:
  hadar_policy(std::string name, hadar_params p) : name_(std::move(name)), p_(p) {
    if (p_.price_high < p_.price_low) p_.price_high = p_.price_low;
    p_.max_copies = std::max(1, p_.max_copies);
  }

  std::string name() const override { return name_; }

  result<round_plan> plan(const snapshot& s) override {
    if (!s.cl) return error{error_kind::internal, name_ + ": snapshot without a cluster"};
    const cluster& cl = *s.cl;
    const int n_servers = static_cast<int>(cl.servers.size());
    refresh_cache(s);

    // Pools: servers of one type and speed factor.
    std::vector<int> pool_of(n_servers, 0);
    std::vector<gpu_pool> pools;
    {
      std::map<std::pair<int, double>, int> index;
      for (const auto& sv : cl.servers) {
        auto [it, fresh] = index.emplace(std::make_pair(sv.type_index, sv.speed),
                                         static_cast<int>(pools.size()));
        if (fresh) pools.emplace_back();
        pool_of[sv.id] = it->second;
        pools[it->second].capacity += sv.gpus;
      }
    }
    std::vector<int> free(n_servers, 0);
    for (const auto& sv : cl.servers) free[sv.id] = sv.gpus;

    // Job weights, remaining times and the order.
    std::vector<job_info> info;
    info.reserve(s.jobs.size());
    double work = 0;  // GPU-seconds of remaining work at every job's best rate
    for (std::size_t i = 0; i < s.jobs.size(); ++i) {
      const job_view& jv = s.jobs[i];
      job_info in;
      in.index = i;
      in.k = jv.spec->scale_factor;
      in.rates = &rates_for(s, jv);
      for (int u = 0; u < n_servers; ++u) {
        if (!usable(jv, cl.servers[u])) continue;
        const bool fits = cl.servers[u].gpus >= in.k;
        in.best = std::max(in.best, fits ? in.rates->single[u] : in.rates->multi[u]);
      }
      if (in.best <= 0) continue;  // no estimate anywhere: cannot be placed
      if (p_.value_prices) {
        std::vector<double> pool_rate(pools.size(), 0.0);
        for (int u = 0; u < n_servers; ++u) {
          if (!usable(jv, cl.servers[u])) continue;
          const bool fits = cl.servers[u].gpus >= in.k;
          const double r = fits ? in.rates->single[u] : in.rates->multi[u];
          pool_rate[pool_of[u]] = std::max(pool_rate[pool_of[u]], r);
        }
        for (std::size_t c = 0; c < pools.size(); ++c)
          if (pool_rate[c] > 0) {
            pools[c].value_sum += pool_rate[c] / in.best;
            ++pools[c].value_jobs;
          }
      }
      in.rem = std::max(0.0, jv.remaining_steps) / in.best;
      const double wait = std::max(0.0, s.now - jv.spec->arrival - jv.run_time);
      in.weight = jv.spec->priority_weight * (1.0 + wait / std::max(in.rem, s.round_length));
      work += in.k * in.rem;
      info.push_back(in);
    }
    for (auto& pl : pools)
      if (pl.value_jobs > 0) pl.value = pl.value_sum / pl.value_jobs;
    const double drain = work / std::max(1, cl.total_gpus());
    for (auto& in : info)
      in.critical = p_.critical_share > 0 && in.rem >= p_.critical_share * drain;
    std::sort(info.begin(), info.end(), [&](const job_info& a, const job_info& b) {
      if (a.critical != b.critical) return a.critical;
      if (a.weight != b.weight) return a.weight > b.weight;
      if (a.rem != b.rem) return a.rem < b.rem;
      const job& ja = *s.jobs[a.index].spec;
      const job& jb = *s.jobs[b.index].spec;
      if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
      return ja.id < jb.id;
    });

    // Previous single-server placements, for lease extension among equal-cost servers.
    std::unordered_map<job_id, int> previous_server;
    if (s.last_plan)
      for (const auto& as : s.last_plan->assignments)
        if (as.copy == 0 && as.shares.size() == 1) previous_server[as.job] = as.shares[0].server;

    // The dual subroutine: the best-payoff placement of one copy given free GPUs and prices.
    auto dual = [&](const job_info& in, const std::vector<char>& banned) {
      const job_view& jv = s.jobs[in.index];
      const int k = in.k;
      candidate best;
      auto consider = [&](std::vector<server_share> shares) {
        const bool multi = shares.size() > 1;
        double r = std::numeric_limits<double>::infinity();
        std::map<int, int> take;  // pool -> GPUs
        for (const auto& sh : shares) {
          r = std::min(r, multi ? in.rates->multi[sh.server] : in.rates->single[sh.server]);
          take[pool_of[sh.server]] += sh.gpus;
        }
        if (!(r > 0)) return;
        double cost = 0;
        for (const auto& [pl, g] : take)
          cost += pools[pl].value *
                  hadar_cost(p_.price_low, p_.price_high, pools[pl].used, pools[pl].capacity, g);
        const double payoff = in.weight * k * r / in.best - cost;
        if (payoff > best.payoff + 1e-12) best = candidate{std::move(shares), r, payoff};
      };
      std::vector<int> open;  // servers this copy may use
      for (int u = 0; u < n_servers; ++u)
        if (!banned[u] && free[u] > 0 && usable(jv, cl.servers[u])) open.push_back(u);
      // (a) one server per pool: the previous server when it has room, else best fit.
      std::vector<int> pick(pools.size(), -1);
      for (const int u : open) {
        if (free[u] < k) continue;
        int& cur = pick[pool_of[u]];
        if (cur < 0 || free[u] < free[cur]) cur = u;
      }
      if (const auto prev = previous_server.find(jv.spec->id); prev != previous_server.end()) {
        const int u = prev->second;
        if (u >= 0 && u < n_servers && !banned[u] && free[u] >= k && usable(jv, cl.servers[u]))
          pick[pool_of[u]] = u;
      }
      for (const int u : pick)
        if (u >= 0) consider({server_share{u, k}});
      // (b) spanning servers, fastest first then most free; one candidate per speed threshold.
      std::vector<int> by_speed = open;
      std::sort(by_speed.begin(), by_speed.end(), [&](int a, int b) {
        const double ra = in.rates->multi[a], rb = in.rates->multi[b];
        if (ra != rb) return ra > rb;
        if (free[a] != free[b]) return free[a] > free[b];
        return a < b;
      });
      double last_threshold = -1;
      for (const int t : by_speed) {
        const double threshold = in.rates->multi[t];
        if (threshold <= 0 || threshold == last_threshold) continue;
        last_threshold = threshold;
        std::vector<server_share> shares;
        int got = 0;
        for (const int u : by_speed) {
          if (got == k) break;
          if (in.rates->multi[u] < threshold) break;
          if (!p_.mixed_types && cl.servers[u].type_index != cl.servers[t].type_index) continue;
          const int g = std::min(free[u], k - got);
          shares.push_back(server_share{u, g});
          got += g;
        }
        if (got == k && shares.size() > 1) consider(std::move(shares));
      }
      return best;
    };

    round_plan plan;
    plan.start = s.now;
    plan.length = s.round_length;
    std::vector<std::vector<int>> copy_servers(info.size());  // servers of each job's copies
    std::vector<double> copy_rate(info.size(), 0.0);          // sum of its copies' rates
    std::vector<int> copies(info.size(), 0);
    auto admit = [&](std::size_t o, const candidate& c) {
      const job_info& in = info[o];
      assignment as;
      as.job = s.jobs[in.index].spec->id;
      as.copy = copies[o];
      as.shares = c.shares;
      as.type = cl.servers[c.shares.front().server].type_index;
      for (const auto& sh : c.shares) {
        free[sh.server] -= sh.gpus;
        pools[pool_of[sh.server]].used += sh.gpus;
        copy_servers[o].push_back(sh.server);
        if (cl.servers[sh.server].type_index != as.type) as.type = -1;
      }
      plan.assignments.push_back(std::move(as));
      copy_rate[o] += c.rate;
      ++copies[o];
    };

    std::vector<char> none(n_servers, 0);
    for (std::size_t o = 0; o < info.size(); ++o) {
      const candidate c = dual(info[o], none);
      if (c.payoff > 0) admit(o, c);
    }
    // HadarE: further copies, round robin, on servers the job's other copies do not use.
    const int copy_cap = s.copy_limit > 0 ? std::min(p_.max_copies, s.copy_limit) : p_.max_copies;
    for (int copy = 1; copy < copy_cap; ++copy) {
      for (std::size_t o = 0; o < info.size(); ++o) {
        if (copies[o] != copy) continue;
        const job_view& jv = s.jobs[info[o].index];
        if (copy_rate[o] * s.round_length >= jv.remaining_steps) continue;  // ends this round
        std::vector<char> banned(n_servers, 0);
        for (const int u : copy_servers[o]) banned[u] = 1;
        const candidate c = dual(info[o], banned);
        if (c.payoff > 0) admit(o, c);
      }
    }
    return plan;
  }

 private:
  /// A server the job may use: its GPU type has a throughput for the job.
  static bool usable(const job_view& jv, const server& sv) {
    return sv.type_index >= 0 && sv.type_index < static_cast<int>(jv.throughput.size()) &&
           jv.throughput[sv.type_index] > 0;
  }

  /// Drops cached rates when the throughput model changed.
  void refresh_cache(const snapshot& s) {
    const std::uint64_t version = s.rates ? s.rates->version() : 0;
    // Without a per-server model the rates come from each job's own per-type view, so the
    // cache is per job and per round.
    if (!s.rates || s.cl != cached_cluster_ || s.rates != cached_rates_ ||
        version != cached_version_) {
      cache_.clear();
      cached_cluster_ = s.cl;
      cached_rates_ = s.rates;
      cached_version_ = version;
    }
  }

  /// Per-server rates of the job's (type, scale factor), from the snapshot's throughput model
  /// (the executor's) or, without one, from the job's per-type view scaled by speed factors.
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
        r.multi[sv.id] = k > 1 ? s.rates->rate_at(sv.id, jv.spec->job_type, k, true).steps_per_s
                               : 0;
      } else {
        const auto& t = cl.types[sv.type_index];
        const double v = t.mean_speed > 0 ? jv.throughput[sv.type_index] * sv.speed / t.mean_speed
                                           : 0;
        r.single[sv.id] = sv.gpus >= k ? v : 0;
        r.multi[sv.id] = k > 1 ? v : 0;
      }
    }
    return cache_.emplace(key, std::move(r)).first->second;
  }

  std::string name_;
  hadar_params p_;
  std::unordered_map<std::string, server_rates> cache_;
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
