#include "policies/hops.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace tessera {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

/// Weight multiplier of makespan-critical jobs in the ILP objective.
constexpr double critical_weight = 10.0;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Merges shares on the same server and sorts them by server id, so that an unchanged
/// placement compares equal to the previous round's.
std::vector<server_share> normalised(std::vector<server_share> v) {
  std::sort(v.begin(), v.end(),
            [](const server_share& a, const server_share& b) { return a.server < b.server; });
  std::vector<server_share> out;
  for (const auto& sh : v) {
    if (!out.empty() && out.back().server == sh.server)
      out.back().gpus += sh.gpus;
    else
      out.push_back(sh);
  }
  return out;
}

/// The snapshot's contract: a GPU type where the job's throughput is 0 is one it cannot run on
/// (no table entry, or fewer GPUs of the type than the job needs).
bool may_run_on(const cluster& cl, const job_view& jv, int server) {
  const int t = cl.servers[server].type_index;
  return jv.throughput.empty() ||
         (t >= 0 && t < static_cast<int>(jv.throughput.size()) && jv.throughput[t] > 0);
}

void fill_patterns_rec(const std::vector<int>& sizes, std::size_t idx, int left,
                       std::vector<int>& cur, std::vector<std::vector<int>>& out,
                       std::size_t limit, bool& overflow) {
  if (overflow) return;
  if (idx == sizes.size()) {
    if (left < sizes.back()) {  // maximal: no size fits any more
      if (out.size() >= limit) {
        overflow = true;
        return;
      }
      out.push_back(cur);
    }
    return;
  }
  const int d = sizes[idx];
  for (int n = left / d; n >= 0; --n) {
    for (int k = 0; k < n; ++k) cur.push_back(d);
    fill_patterns_rec(sizes, idx + 1, left - n * d, cur, out, limit, overflow);
    cur.resize(cur.size() - n);
    if (overflow) return;
  }
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

std::vector<std::vector<int>> fill_patterns(const std::vector<int>& sizes_in, int capacity,
                                            std::size_t limit) {
  std::vector<int> sizes;
  for (int d : sizes_in)
    if (d > 0 && d <= capacity) sizes.push_back(d);
  std::sort(sizes.begin(), sizes.end(), std::greater<int>());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<std::vector<int>> out;
  if (sizes.empty()) return out;
  std::vector<int> cur;
  bool overflow = false;
  fill_patterns_rec(sizes, 0, capacity, cur, out, limit, overflow);
  if (overflow) out.clear();
  return out;
}

result<hops_ilp_result> solve_hops_ilp(const hops_ilp_input& in, const milp_settings& s) {
  const std::size_t n_jobs = in.configs.size(), n_classes = in.classes.size();
  if (in.value.size() != n_jobs)
    return error{error_kind::invalid_input, "hops ILP: one value row per job expected"};
  milp_model m;
  m.set_sense(lp_sense::maximize);
  std::vector<std::vector<int>> col(n_jobs);
  std::vector<std::set<int>> sizes(n_classes);
  std::vector<bool> used_class(n_classes, false);
  for (std::size_t i = 0; i < n_jobs; ++i) {
    if (in.value[i].size() != in.configs[i].size())
      return error{error_kind::invalid_input, "hops ILP: one value per configuration expected"};
    for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
      const auto& cf = in.configs[i][c];
      if (cf.cls < 0 || cf.cls >= static_cast<int>(n_classes))
        return error{error_kind::invalid_input, "hops ILP: configuration names no class"};
      const auto& k = in.classes[cf.cls];
      int gpus = cf.whole_servers * k.capacity;
      for (int d : cf.pieces) {
        if (d <= 0 || d > k.capacity)
          return error{error_kind::invalid_input, "hops ILP: share size outside the server"};
        sizes[cf.cls].insert(d);
        gpus += d;
      }
      if (gpus != cf.gpus || cf.whole_servers < 0)
        return error{error_kind::invalid_input, "hops ILP: configuration GPUs do not add up"};
      used_class[cf.cls] = true;
      col[i].push_back(m.add_binary(std::max(0.0, in.value[i][c])));
    }
  }
  // One configuration per job.
  for (std::size_t i = 0; i < n_jobs; ++i) {
    if (col[i].empty()) continue;
    std::vector<std::pair<int, double>> row;
    for (int c : col[i]) row.emplace_back(c, 1.0);
    m.add_row(-lp_inf, 1.0, row);
  }
  // Per-server capacity through fill patterns.
  hops_ilp_result res;
  res.patterns.resize(n_classes);
  std::vector<std::vector<std::vector<int>>> pats(n_classes);
  std::vector<std::vector<int>> pat_col(n_classes);
  for (std::size_t k = 0; k < n_classes; ++k) {
    if (!used_class[k]) continue;
    const auto& cls = in.classes[k];
    const double n_servers = static_cast<double>(cls.servers.size());
    if (!sizes[k].empty()) {
      pats[k] = fill_patterns(std::vector<int>(sizes[k].begin(), sizes[k].end()), cls.capacity);
      if (pats[k].empty())
        return error{error_kind::solver_failed,
                     "hops ILP: too many fill patterns for servers of " +
                         std::to_string(cls.capacity) + " GPUs"};
    }
    std::vector<std::pair<int, double>> server_row;
    for (std::size_t p = 0; p < pats[k].size(); ++p) {
      const int c = m.add_column(0, n_servers, 0, true);
      pat_col[k].push_back(c);
      server_row.emplace_back(c, 1.0);
    }
    for (std::size_t i = 0; i < n_jobs; ++i)
      for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
        const auto& cf = in.configs[i][c];
        if (cf.cls == static_cast<int>(k) && cf.whole_servers > 0)
          server_row.emplace_back(col[i][c], cf.whole_servers);
      }
    m.add_row(-lp_inf, n_servers, server_row);
    for (int d : sizes[k]) {
      std::vector<std::pair<int, double>> row;
      for (std::size_t i = 0; i < n_jobs; ++i)
        for (std::size_t c = 0; c < in.configs[i].size(); ++c) {
          const auto& cf = in.configs[i][c];
          if (cf.cls != static_cast<int>(k)) continue;
          const auto n = std::count(cf.pieces.begin(), cf.pieces.end(), d);
          if (n > 0) row.emplace_back(col[i][c], static_cast<double>(n));
        }
      for (std::size_t p = 0; p < pats[k].size(); ++p) {
        const auto n = std::count(pats[k][p].begin(), pats[k][p].end(), d);
        if (n > 0) row.emplace_back(pat_col[k][p], -static_cast<double>(n));
      }
      m.add_row(-lp_inf, 0.0, row);
    }
  }
  res.columns = m.num_columns();
  res.rows = m.num_rows();
  res.integers = m.num_integers();
  auto sol = solve_milp(m, s);
  if (!sol) return sol.err();
  res.solution = std::move(sol.value());
  res.choice.assign(n_jobs, -1);
  if (!res.solution.has_solution) return res;
  const auto& x = res.solution.x;
  for (std::size_t i = 0; i < n_jobs; ++i)
    for (std::size_t c = 0; c < col[i].size(); ++c)
      if (x[col[i][c]] > 0.5) {
        res.choice[i] = static_cast<int>(c);
        break;
      }
  for (std::size_t k = 0; k < n_classes; ++k)
    for (std::size_t p = 0; p < pat_col[k].size(); ++p) {
      const int copies = static_cast<int>(std::lround(x[pat_col[k][p]]));
      for (int n = 0; n < copies; ++n) res.patterns[k].push_back(pats[k][p]);
    }
  return res;
}

std::vector<std::vector<server_share>> pack_hops_solution(
    const hops_ilp_input& in, const hops_ilp_result& r,
    const std::vector<std::vector<server_share>>& previous) {
  const std::size_t n_jobs = in.configs.size();
  std::vector<std::vector<server_share>> out(n_jobs);
  auto prev_of = [&](std::size_t i) -> const std::vector<server_share>& {
    static const std::vector<server_share> none;
    return i < previous.size() ? previous[i] : none;
  };
  for (std::size_t k = 0; k < in.classes.size(); ++k) {
    const auto& cls = in.classes[k];
    const std::size_t n = cls.servers.size();
    std::unordered_map<int, std::size_t> pos;
    for (std::size_t q = 0; q < n; ++q) pos[cls.servers[q]] = q;
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < n_jobs && i < r.choice.size(); ++i)
      if (r.choice[i] >= 0 && in.configs[i][r.choice[i]].cls == static_cast<int>(k))
        members.push_back(i);
    if (members.empty()) continue;
    std::vector<int> used(n, 0);  // GPUs taken per server (position in the class)
    std::vector<bool> whole(n, false);

    // 1. Whole servers: the job's previous ones first, then a run of consecutive ones.
    for (std::size_t i : members) {
      const auto& cf = in.configs[i][r.choice[i]];
      int need = cf.whole_servers;
      if (need == 0) continue;
      std::vector<std::size_t> picks;
      for (const auto& sh : prev_of(i)) {
        auto it = pos.find(sh.server);
        if (need > 0 && it != pos.end() && !whole[it->second] &&
            std::find(picks.begin(), picks.end(), it->second) == picks.end()) {
          picks.push_back(it->second);
          --need;
        }
      }
      for (std::size_t start = 0; need > 0 && start < n; ++start) {
        std::size_t len = 0;
        while (start + len < n && !whole[start + len] &&
               std::find(picks.begin(), picks.end(), start + len) == picks.end() &&
               static_cast<int>(len) < need)
          ++len;
        if (static_cast<int>(len) == need)
          for (std::size_t q = start; q < start + len; ++q) {
            picks.push_back(q);
            --need;
          }
      }
      for (std::size_t q = 0; need > 0 && q < n; ++q)
        if (!whole[q] && std::find(picks.begin(), picks.end(), q) == picks.end()) {
          picks.push_back(q);
          --need;
        }
      for (std::size_t q : picks) {
        whole[q] = true;
        used[q] = cls.capacity;
        out[i].push_back({cls.servers[q], cls.capacity});
      }
    }

    // 2. Patterns to the other servers; a server holding a running job's share gets a pattern
    //    with a slot of that size when there is one.
    struct kept_piece {
      std::size_t job;
      std::size_t q;
      int size;
    };
    std::vector<kept_piece> kept;
    std::vector<std::vector<int>> kept_sizes(n);
    for (std::size_t i : members) {
      const auto& cf = in.configs[i][r.choice[i]];
      std::vector<int> pieces = cf.pieces;
      for (const auto& sh : prev_of(i)) {
        auto it = pos.find(sh.server);
        if (it == pos.end() || whole[it->second]) continue;
        auto pc = std::find(pieces.begin(), pieces.end(), sh.gpus);
        if (pc == pieces.end()) continue;
        kept.push_back({i, it->second, sh.gpus});
        kept_sizes[it->second].push_back(sh.gpus);
        pieces.erase(pc);
      }
    }
    std::vector<std::vector<int>> slots(n);
    std::vector<bool> has_pattern(n, false);
    std::vector<bool> pattern_taken(k < r.patterns.size() ? r.patterns[k].size() : 0, false);
    std::vector<std::size_t> order;
    for (std::size_t q = 0; q < n; ++q)
      if (!whole[q]) order.push_back(q);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      int sa = 0, sb = 0;
      for (int d : kept_sizes[a]) sa += d;
      for (int d : kept_sizes[b]) sb += d;
      return sa > sb;
    });
    for (std::size_t q : order) {
      int best = -1, best_cover = -1;
      for (std::size_t p = 0; p < pattern_taken.size(); ++p) {
        if (pattern_taken[p]) continue;
        std::vector<int> pat = r.patterns[k][p];
        int cover = 0;
        for (int d : kept_sizes[q]) {
          auto it = std::find(pat.begin(), pat.end(), d);
          if (it != pat.end()) {
            cover += d;
            pat.erase(it);
          }
        }
        if (cover > best_cover) {
          best_cover = cover;
          best = static_cast<int>(p);
        }
      }
      if (best < 0) break;
      pattern_taken[best] = true;
      slots[q] = r.patterns[k][best];
      has_pattern[q] = true;
    }

    // 3. Shares into slots: kept ones first, then the rest in server order.
    auto take_slot = [&](std::size_t q, int d) {
      auto it = std::find(slots[q].begin(), slots[q].end(), d);
      if (it == slots[q].end()) return false;
      slots[q].erase(it);
      used[q] += d;
      return true;
    };
    std::vector<std::vector<int>> left(n_jobs);
    for (std::size_t i : members) left[i] = in.configs[i][r.choice[i]].pieces;
    for (const auto& kp : kept) {
      auto it = std::find(left[kp.job].begin(), left[kp.job].end(), kp.size);
      if (it == left[kp.job].end()) continue;
      if (take_slot(kp.q, kp.size)) {
        out[kp.job].push_back({cls.servers[kp.q], kp.size});
        left[kp.job].erase(it);
      }
    }
    for (std::size_t i : members) {
      std::vector<server_share> got;
      std::vector<std::pair<std::size_t, int>> taken;
      bool ok = true;
      std::vector<int> pieces = left[i];
      std::sort(pieces.begin(), pieces.end(), std::greater<int>());
      for (int d : pieces) {
        bool placed = false;
        for (std::size_t q = 0; q < n && !placed; ++q)
          if (!whole[q] && take_slot(q, d)) {
            got.push_back({cls.servers[q], d});
            taken.emplace_back(q, d);
            placed = true;
          }
        // Not reachable when the pattern counts come from the ILP; kept for safety: any
        // server with room.
        for (std::size_t q = 0; q < n && !placed; ++q)
          if (!whole[q] && !has_pattern[q] && cls.capacity - used[q] >= d) {
            used[q] += d;
            got.push_back({cls.servers[q], d});
            taken.emplace_back(q, -d);
            placed = true;
          }
        if (!placed) {
          ok = false;
          break;
        }
      }
      if (!ok) {  // give back what this job took and drop it
        for (auto [q, d] : taken) {
          if (d > 0) {
            slots[q].push_back(d);
            used[q] -= d;
          } else {
            used[q] += d;
          }
        }
        for (const auto& sh : out[i]) {
          auto it = pos.find(sh.server);
          if (it != pos.end()) {
            if (whole[it->second] && sh.gpus == cls.capacity) {
              whole[it->second] = false;
              used[it->second] = 0;
            } else {
              used[it->second] -= sh.gpus;
              slots[it->second].push_back(sh.gpus);
            }
          }
        }
        out[i].clear();
        continue;
      }
      for (const auto& sh : got) out[i].push_back(sh);
    }
  }
  for (auto& v : out) v = normalised(std::move(v));
  return out;
}

// ---- the policy ------------------------------------------------------------------------------

/// Rates of one (job type, GPU count) on every class.
struct hops::class_rates {
  std::vector<double> single;  ///< one-server configuration, 0 where a server is too small
  std::vector<double> multi;   ///< configuration spanning servers (0 for one GPU)
  double sensitivity = 1.0;    ///< on the class with the best one-server rate
  bool fits_one_server = false;
};

hops::hops(std::string name, hops_params p) : name_(std::move(name)), p_(p) {}

hops::~hops() = default;

void hops::refresh_classes(const snapshot& s, const server_throughput& rt) {
  if (&rt == rt_ && rt.version() == rt_version_ && s.cl == classes_for_ && !classes_.empty())
    return;
  rt_ = &rt;
  rt_version_ = rt.version();
  classes_for_ = s.cl;
  cache_.clear();
  classes_.clear();
  class_of_.assign(s.cl->servers.size(), -1);
  std::map<std::tuple<int, double, int, int>, int> index;
  for (const auto& sv : s.cl->servers) {
    const auto key = std::make_tuple(sv.type_index, sv.speed, sv.gpus,
                                     rt.has_measurements(sv.id) ? sv.id : -1);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, static_cast<int>(classes_.size())).first;
      classes_.push_back(hops_class{{}, sv.gpus});
    }
    classes_[it->second].servers.push_back(sv.id);
    class_of_[sv.id] = it->second;
  }
}

const hops::class_rates& hops::rates_for(const std::string& job_type, int gpus) {
  std::string key = job_type;
  key += '\x1f';
  key += std::to_string(gpus);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto cr = std::make_unique<class_rates>();
  cr->single.assign(classes_.size(), 0.0);
  cr->multi.assign(classes_.size(), 0.0);
  double best_single = 0;
  int best_k = -1;
  for (std::size_t k = 0; k < classes_.size(); ++k) {
    const int rep = classes_[k].servers.front();
    if (gpus <= classes_[k].capacity) {
      cr->single[k] = rt_->rate_at(rep, job_type, gpus, false).steps_per_s;
      if (cr->single[k] > 0) cr->fits_one_server = true;
    }
    if (gpus >= 2) cr->multi[k] = rt_->rate_at(rep, job_type, gpus, true).steps_per_s;
    if (cr->single[k] > best_single) {
      best_single = cr->single[k];
      best_k = static_cast<int>(k);
    }
  }
  if (best_k >= 0) {
    cr->sensitivity = placement_sensitivity(gpus, cr->single[best_k], cr->multi[best_k]);
  } else if (gpus >= 2) {
    // No server holds the job: judge it on the type table's one-server entry anyway.
    const int rep = classes_.empty() ? -1 : classes_.front().servers.front();
    const double one = rep < 0 ? 0 : rt_->rate_at(rep, job_type, gpus, false).steps_per_s;
    cr->sensitivity = placement_sensitivity(gpus, one, cr->multi.empty() ? 0 : cr->multi[0]);
  }
  return *cache_.emplace(std::move(key), std::move(cr)).first->second;
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

  // 1. Throughputs: the executor's model, else one built from the snapshot's per-type rows.
  const server_throughput* rt = s.rates;
  if (!rt) {
    throughput_table t;
    for (const auto& jv : s.jobs)
      for (std::size_t k = 0; k < cl.types.size() && k < jv.throughput.size(); ++k)
        if (jv.throughput[k] > 0)
          t.set_isolated(cl.types[k].name, {jv.spec->job_type, jv.spec->scale_factor},
                         jv.throughput[k] / cl.types[k].mean_speed);
    fallback_ = std::make_unique<server_throughput>(cl, std::move(t));
    rt = fallback_.get();
    classes_.clear();  // force a rebuild: the fallback may sit where an old one did
  }
  refresh_classes(s, *rt);
  const int total = cl.total_gpus();
  const double thr = p_.sensitivity_threshold;

  std::unordered_map<job_id, const assignment*> prev;
  if (s.last_plan)
    for (const auto& as : s.last_plan->assignments)
      if (as.copy == 0) prev[as.job] = &as;

  // 2. Configurations, expected run time and latency ratio of every job.
  struct candidate {
    std::size_t m = 0;
    double lr = 0;
    double prio = 0;            ///< queue key: lr, plus the margin for a running job
    double remaining = 0;       ///< remaining steps / best configuration throughput (s)
    bool critical = false;
    std::vector<hops_config> configs;
    std::vector<int> counts;
    int min_need = 0;
  };
  std::vector<candidate> cands;
  cands.reserve(s.jobs.size());
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const job_view& jv = s.jobs[m];
    const job& j = *jv.spec;
    candidate c;
    c.m = m;
    const assignment* was = nullptr;
    int was_class = -1;
    if (auto it = prev.find(j.id); it != prev.end()) {
      was = it->second;
      for (const auto& sh : was->shares) {
        const int k = sh.server >= 0 && sh.server < static_cast<int>(class_of_.size())
                          ? class_of_[sh.server]
                          : -1;
        if (was_class == -1 || was_class == k)
          was_class = k;
        else
          was_class = -2;  // spanned classes
      }
    }
    auto allowed = [&](int server) { return may_run_on(cl, jv, server); };
    for (int g : gpu_options(j)) {
      if (g > total) continue;
      const class_rates& cr = rates_for(j.job_type, g);
      const bool sensitive = cr.sensitivity >= thr;
      bool any = false;
      for (std::size_t k = 0; k < classes_.size(); ++k) {
        const int cap = classes_[k].capacity;
        const int n = static_cast<int>(classes_[k].servers.size());
        if (!allowed(classes_[k].servers.front())) continue;
        const bool stays = was && was->gpus() == g && was_class == static_cast<int>(k);
        if (g <= cap) {
          if (cr.single[k] > 0) {
            c.configs.push_back(
                {static_cast<int>(k), g, 0, {g}, cr.single[k], stays && was->shares.size() == 1});
            any = true;
          }
        } else if (!(sensitive && cr.fits_one_server)) {
          const int whole = g / cap, rem = g % cap;
          if (whole + (rem > 0 ? 1 : 0) <= n && cr.multi[k] > 0) {
            hops_config cf{static_cast<int>(k), g, whole, {}, cr.multi[k],
                           stays && was->shares.size() > 1};
            if (rem > 0) cf.pieces.push_back(rem);
            c.configs.push_back(cf);
            any = true;
          }
        }
        if (!sensitive && p_.split_configs && g >= 2 && g <= cap && n >= 2 && cr.multi[k] > 0) {
          c.configs.push_back({static_cast<int>(k), g, 0, {g - g / 2, g / 2}, cr.multi[k],
                               stays && was->shares.size() == 2});
          any = true;
        }
      }
      if (any) c.counts.push_back(g);
    }
    if (c.configs.empty()) continue;  // cannot run anywhere (no estimate or too big)
    double best = 0;
    for (const auto& cf : c.configs) best = std::max(best, cf.throughput);
    c.lr = latency_ratio(s.now, jv, j.total_steps / best);
    c.prio = c.lr + (was ? p_.preempt_margin : 0.0);
    c.remaining = jv.remaining_steps / best;
    c.min_need = c.counts.front();
    stats_.max_latency_ratio = std::max(stats_.max_latency_ratio, c.lr);
    cands.push_back(std::move(c));
  }
  // Critical jobs (an addition to Hops; option critical_slack): the makespan from now is at
  // least L = max(drain time of the queue's remaining work over the cluster's GPUs, longest
  // remaining run time). A job whose own remaining run time is within the slack of L extends
  // the makespan one for one when it waits, so it goes first.
  if (p_.critical_slack > 0) {
    double work = 0, longest = 0;
    for (const auto& c : cands) {
      work += c.min_need * c.remaining;
      longest = std::max(longest, c.remaining);
    }
    const double bound = std::max(work / std::max(1, total), longest);
    for (auto& c : cands)
      c.critical = bound > 0 && c.remaining >= (1.0 - p_.critical_slack) * bound;
  }
  std::sort(cands.begin(), cands.end(), [&](const candidate& a, const candidate& b) {
    if (a.critical != b.critical) return a.critical;
    if (a.critical && a.remaining != b.remaining) return a.remaining > b.remaining;
    if (a.prio != b.prio) return a.prio > b.prio;
    const job& ja = *s.jobs[a.m].spec;
    const job& jb = *s.jobs[b.m].spec;
    if (ja.arrival != jb.arrival) return ja.arrival < jb.arrival;
    return ja.id < jb.id;
  });

  // 3. Service window.
  std::size_t window = 0;
  {
    const double limit = p_.window > 0 ? p_.window * total : inf;
    double need = 0;
    while (window < cands.size() && need + cands[window].min_need <= limit)
      need += cands[window++].min_need;
    if (window == 0 && !cands.empty()) window = 1;
  }
  stats_.window_jobs = static_cast<int>(window);

  std::vector<std::vector<server_share>> placed(cands.size());
  std::vector<std::vector<server_share>> previous(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (auto it = prev.find(s.jobs[cands[i].m].spec->id); it != prev.end())
      previous[i] = it->second->shares;

  // Objective values of the window's configurations.
  // Critical jobs are valued as the window's highest latency ratio.
  double top_lr = 0;
  for (std::size_t i = 0; i < window; ++i) top_lr = std::max(top_lr, cands[i].lr);
  std::vector<std::vector<double>> value(window);
  for (std::size_t i = 0; i < window; ++i) {
    const auto& c = cands[i];
    double slowest = inf;
    for (const auto& cf : c.configs) slowest = std::min(slowest, cf.throughput);
    const double lr = c.critical ? top_lr : c.lr;
    // A critical job's speed is the makespan's: weigh it so that its fastest configuration
    // outbids the jobs it displaces there (they still run elsewhere).
    const double boost = c.critical ? critical_weight : 1.0;
    const double w = boost * std::max(1e-6, std::pow(lr + p_.bias, p_.lambda));
    for (const auto& cf : c.configs)
      value[i].push_back(w * (cf.throughput / slowest + p_.size_value * cf.gpus) *
                         (cf.stay ? 1.0 + p_.stay_bonus : 1.0));
  }

  // 4-5. ILP and packing.
  bool done = false;
  if (p_.use_ilp && window > 0) {
    hops_ilp_input in;
    in.classes = classes_;
    for (std::size_t i = 0; i < window; ++i) in.configs.push_back(cands[i].configs);
    in.value = value;
    milp_settings ms;
    ms.time_limit_s = p_.ilp_time_limit;
    ms.relative_gap = p_.ilp_gap;
    auto r = solve_hops_ilp(in, ms);
    last_ilp_ = in;
    stats_.ilp_ran = true;
    if (r) {
      stats_.outcome = r->solution.outcome;
      stats_.ilp_seconds = r->solution.seconds;
      stats_.columns = r->columns;
      stats_.rows = r->rows;
      stats_.integers = r->integers;
    }
    if (r && r->solution.has_solution) {
      std::vector<std::vector<server_share>> prev_w(previous.begin(), previous.begin() + window);
      auto packed = pack_hops_solution(in, r.value(), prev_w);
      for (std::size_t i = 0; i < window; ++i) placed[i] = std::move(packed[i]);
      done = true;
    } else {
      stats_.ilp_fallback = true;
    }
  }

  std::vector<int> free_gpus(cl.servers.size());
  for (const auto& sv : cl.servers) free_gpus[sv.id] = sv.gpus;
  for (const auto& v : placed)
    for (const auto& sh : v) free_gpus[sh.server] -= sh.gpus;
  auto on_prev = [&](std::size_t i, int server) {
    for (const auto& sh : previous[i])
      if (sh.server == server) return true;
    return false;
  };

  if (!done) {
    // Greedy: window jobs in queue order, each on its best-valued configuration that fits.
    for (std::size_t i = 0; i < window; ++i) {
      const auto& c = cands[i];
      std::vector<std::size_t> order(c.configs.size());
      for (std::size_t q = 0; q < order.size(); ++q) order[q] = q;
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return value[i][a] > value[i][b]; });
      for (std::size_t q : order) {
        const auto& cf = c.configs[q];
        const auto& cls = classes_[cf.cls];
        std::vector<server_share> got;
        std::vector<int> trial = free_gpus;
        bool ok = true;
        // whole servers: previous ones first, then ascending
        int need = cf.whole_servers;
        for (int pass = 0; pass < 2 && need > 0; ++pass)
          for (int sv : cls.servers)
            if (need > 0 && trial[sv] == cls.capacity && (pass == 1 || on_prev(i, sv))) {
              got.push_back({sv, cls.capacity});
              trial[sv] = 0;
              --need;
            }
        if (need > 0) ok = false;
        for (int d : cf.pieces) {
          if (!ok) break;
          int best = -1;
          for (int sv : cls.servers) {
            if (trial[sv] < d) continue;
            if (best < 0 || (on_prev(i, sv) && !on_prev(i, best)) ||
                (on_prev(i, sv) == on_prev(i, best) && trial[sv] < trial[best]))
              best = sv;
          }
          if (best < 0) {
            ok = false;
            break;
          }
          got.push_back({best, d});
          trial[best] -= d;
        }
        if (!ok) continue;
        free_gpus = std::move(trial);
        placed[i] = normalised(std::move(got));
        break;
      }
    }
  }
  for (const auto& v : placed)
    if (!v.empty()) ++stats_.placed_by_ilp;

  // 6. Fragment filling.
  int free_total = 0;
  for (int f : free_gpus) free_total += f;
  if (p_.fill_fragments) {
    for (std::size_t i = 0; i < cands.size() && free_total > 0; ++i) {
      if (!placed[i].empty()) continue;
      const auto& c = cands[i];
      const job_view& jv = s.jobs[c.m];
      const std::string& type = jv.spec->job_type;
      auto allowed = [&](int server) { return may_run_on(cl, jv, server); };
      for (auto g = c.counts.rbegin(); g != c.counts.rend(); ++g) {
        if (*g > free_total) continue;
        const class_rates& cr = rates_for(type, *g);
        int best = -1;
        for (const auto& sv : cl.servers) {
          const int k = class_of_[sv.id];
          if (free_gpus[sv.id] < *g || cr.single[k] <= 0 || !allowed(sv.id)) continue;
          if (best < 0) {
            best = sv.id;
            continue;
          }
          const int kb = class_of_[best];
          const bool pa = on_prev(i, sv.id), pb = on_prev(i, best);
          if (pa != pb) {
            if (pa) best = sv.id;
          } else if (cr.single[k] != cr.single[kb]) {
            if (cr.single[k] > cr.single[kb]) best = sv.id;
          } else if (free_gpus[sv.id] < free_gpus[best]) {
            best = sv.id;
          }
        }
        if (best >= 0) {
          placed[i] = {{best, *g}};
          free_gpus[best] -= *g;
          free_total -= *g;
          break;
        }
        // Spread over servers: low-sensitivity jobs, and jobs no server can hold.
        if (*g < 2 || (!(cr.sensitivity < thr) && cr.fits_one_server)) continue;
        std::vector<int> servers;
        for (const auto& sv : cl.servers)
          if (free_gpus[sv.id] > 0 && cr.multi[class_of_[sv.id]] > 0 && allowed(sv.id))
            servers.push_back(sv.id);
        std::stable_sort(servers.begin(), servers.end(), [&](int a, int b) {
          const double ra = cr.multi[class_of_[a]], rb = cr.multi[class_of_[b]];
          if (ra != rb) return ra > rb;
          return free_gpus[a] > free_gpus[b];
        });
        int need = *g;
        std::vector<server_share> got;
        for (int sv : servers) {
          if (need == 0) break;
          const int take = std::min(need, free_gpus[sv]);
          got.push_back({sv, take});
          need -= take;
        }
        if (need > 0) continue;
        for (const auto& sh : got) free_gpus[sh.server] -= sh.gpus;
        free_total -= *g;
        placed[i] = normalised(std::move(got));
        break;
      }
      if (!placed[i].empty()) ++stats_.placed_by_filling;
    }
  }

  // The plan.
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (placed[i].empty()) continue;
    assignment as;
    as.job = s.jobs[cands[i].m].spec->id;
    as.shares = std::move(placed[i]);
    int type = cl.servers[as.shares.front().server].type_index;
    for (const auto& sh : as.shares)
      if (cl.servers[sh.server].type_index != type) type = -1;
    as.type = type;
    out.assignments.push_back(std::move(as));
  }
  stats_.idle_gpus = free_total;
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
       "placement-sensitive when one-server / two-server per-GPU throughput is at least this",
       1.4, 1.0, 1000.0},
      {"ilp_time_limit", "seconds CBC may spend on one round's ILP", 2.0, 0.01, 3600.0},
      {"ilp_gap", "relative optimality gap at which CBC stops", 1e-4, 0.0, 0.5},
      {"stay_bonus",
       "objective bonus (fraction) for keeping a running job on its server class and GPU count",
       0.05, 0.0, 10.0},
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
  p.stay_bonus = o.get("stay_bonus");
  p.fill_fragments = o.flag("fill_fragments");
  p.use_ilp = o.flag("use_ilp");
  p.split_configs = o.flag("split_configs");
  p.preempt_margin = o.get("preempt_margin");
  p.critical_slack = o.get("critical_slack");
  p.size_value = o.get("size_value");
  return std::make_unique<hops>(name, p);
}

}  // namespace tessera
