#include "runtime/mechanism.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>
#include <numeric>

namespace tessera {

namespace {
constexpr double eps = 1e-9;
constexpr double pin_tolerance = 1e-6;
}  // namespace

void gavel_mechanism::reset(double now) {
  reset_time_ = now;
  for (auto& [id, st] : stats_) std::fill(st.received.begin(), st.received.end(), 0.0);
  for (auto& [ids, st] : pair_stats_) std::fill(st.received.begin(), st.received.end(), 0.0);
}

namespace {

/// Key of a pair's statistics: its two job ids, lower first.
std::pair<job_id, job_id> pair_key(job_id a, job_id b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

/// Adds one round to a unit's statistics: `got` seconds on type `ran` (-1 = none) against
/// `x` of the allocation.
void add_round(std::vector<double>& received, std::vector<double>& deficit,
               const std::vector<double>& x, int ran, double len, bool counts) {
  for (std::size_t j = 0; j < received.size(); ++j) {
    const double got = ran == static_cast<int>(j) ? len : 0.0;
    if (counts) received[j] += got;
    deficit[j] += x[j] * len - got;
  }
}

}  // namespace

void gavel_mechanism::account(const snapshot& s, const allocation& a) {
  const std::size_t k = s.cl->types.size();
  // Forget jobs (and pairs) that left.
  std::unordered_map<job_id, bool> active;
  for (const auto& jv : s.jobs) active[jv.spec->id] = true;
  if (stats_.size() > s.jobs.size())
    for (auto it = stats_.begin(); it != stats_.end();)
      it = active.count(it->first) ? std::next(it) : stats_.erase(it);
  for (auto it = pair_stats_.begin(); it != pair_stats_.end();)
    it = active.count(it->first.first) && active.count(it->first.second)
             ? std::next(it)
             : pair_stats_.erase(it);
  auto sized = [k](job_stats& st) -> job_stats& {
    st.received.resize(k, 0.0);
    st.deficit.resize(k, 0.0);
    return st;
  };
  for (const auto& jv : s.jobs) sized(stats_[jv.spec->id]);
  for (const auto& pa : a.pairs)
    sized(pair_stats_[pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id)]);
  const round_plan* last = s.last_plan;
  if (!last || last->start <= accounted_until_) return;
  accounted_until_ = last->start;
  const double len = last->length;
  const bool counts = last->start >= reset_time_;
  std::unordered_map<job_id, int> ran_alone;
  std::map<std::pair<job_id, job_id>, int> ran_paired;
  for (const auto& as : last->assignments) {
    if (as.type < 0) continue;
    if (as.partner < 0)
      ran_alone[as.job] = as.type;
    else
      ran_paired[pair_key(as.job, as.partner)] = as.type;
  }
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    auto& st = stats_[s.jobs[m].spec->id];
    auto it = ran_alone.find(s.jobs[m].spec->id);
    add_round(st.received, st.deficit, a.x[m], it == ran_alone.end() ? -1 : it->second, len,
              counts);
  }
  for (const auto& pa : a.pairs) {
    const auto key = pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id);
    auto& st = pair_stats_[key];
    auto it = ran_paired.find(key);
    add_round(st.received, st.deficit, pa.x, it == ran_paired.end() ? -1 : it->second, len,
              counts);
  }
}

std::vector<gavel_mechanism::candidate> gavel_mechanism::candidates(const snapshot& s,
                                                                    const allocation& a) {
  const std::size_t k = s.cl->types.size();
  const double elapsed = s.now - reset_time_;
  // Each job's whole allocation: alone plus in pairs.
  std::vector<double> row(s.jobs.size(), 0.0);
  for (std::size_t m = 0; m < s.jobs.size(); ++m)
    for (std::size_t j = 0; j < k; ++j) row[m] += a.x[m][j];
  for (const auto& pa : a.pairs)
    for (std::size_t j = 0; j < k; ++j) {
      row[pa.a] += pa.x[j];
      row[pa.b] += pa.x[j];
    }
  std::vector<candidate> cand;
  cand.reserve(s.jobs.size() * k);
  auto add = [&](const job_stats& st, const std::vector<double>& x, std::size_t m,
                 std::size_t m2, bool runs_on_j, std::size_t j) {
    if (x[j] <= eps || !runs_on_j) return;
    const double share = elapsed > 0 ? st.received[j] / elapsed : 0.0;
    const double prio = share > eps ? x[j] / share : std::numeric_limits<double>::infinity();
    const bool full = row[m] >= 1 - pin_tolerance && (m2 == npos || row[m2] >= 1 - pin_tolerance);
    const job_id id2 = m2 == npos ? -1 : s.jobs[m2].spec->id;
    cand.push_back({full, prio, st.deficit[j], x[j], s.jobs[m].spec->id, id2, m, m2, j});
  };
  for (std::size_t m = 0; m < s.jobs.size(); ++m)
    for (std::size_t j = 0; j < k; ++j)
      add(stats_[s.jobs[m].spec->id], a.x[m], m, npos, s.jobs[m].throughput[j] > 0, j);
  for (const auto& pa : a.pairs)
    for (std::size_t j = 0; j < k; ++j)
      add(pair_stats_[pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id)], pa.x, pa.a, pa.b,
          s.jobs[pa.a].spec->scale_factor == s.jobs[pa.b].spec->scale_factor, j);
  std::sort(cand.begin(), cand.end(), [](const candidate& l, const candidate& r) {
    if (l.full != r.full) return l.full;
    if (l.priority != r.priority) return l.priority > r.priority;
    if (l.deficit != r.deficit) return l.deficit > r.deficit;
    if (l.x != r.x) return l.x > r.x;
    if (l.id != r.id) return l.id < r.id;
    return l.id2 < r.id2;
  });
  return cand;
}

round_plan gavel_mechanism::plan(const snapshot& s, const allocation& a) {
  account(s, a);
  const std::size_t k = s.cl->types.size();
  std::vector<int> free_gpus(k);
  for (std::size_t j = 0; j < k; ++j) free_gpus[j] = s.cl->types[j].gpus;
  std::vector<int> chosen(s.jobs.size(), -1);
  struct unit {
    std::size_t m, m2;  ///< the job, and its partner (npos when alone)
  };
  std::vector<unit> order;  // scheduled units in priority order
  for (const auto& c : candidates(s, a)) {
    if (chosen[c.m] >= 0 || (c.m2 != npos && chosen[c.m2] >= 0)) continue;
    const int need = s.jobs[c.m].spec->scale_factor;
    if (free_gpus[c.j] < need) continue;
    free_gpus[c.j] -= need;
    chosen[c.m] = static_cast<int>(c.j);
    if (c.m2 != npos) chosen[c.m2] = static_cast<int>(c.j);
    order.push_back({c.m, c.m2});
  }
  if (!a.pairs.empty()) {
    // Space sharing leaves GPUs idle when every pair of a waiting job holds an already
    // scheduled one; as Gavel's queue (which holds every combination, those with no share
    // last), give them to waiting jobs alone, in arrival order, on their fastest free type.
    for (std::size_t m = 0; m < s.jobs.size(); ++m) {
      if (chosen[m] >= 0) continue;
      const int need = s.jobs[m].spec->scale_factor;
      int best = -1;
      for (std::size_t j = 0; j < k; ++j)
        if (free_gpus[j] >= need && s.jobs[m].throughput[j] > 0 &&
            (best < 0 || s.jobs[m].throughput[j] > s.jobs[m].throughput[best]))
          best = static_cast<int>(j);
      if (best < 0) continue;
      free_gpus[best] -= need;
      chosen[m] = best;
      order.push_back({m, npos});
    }
  }

  std::unordered_map<job_id, const assignment*> previous;
  if (s.last_plan)
    for (const auto& as : s.last_plan->assignments) previous[as.job] = &as;
  std::vector<int> scale, types;
  std::vector<std::vector<server_share>> prev_shares;
  for (const auto& u : order) {
    scale.push_back(s.jobs[u.m].spec->scale_factor);
    types.push_back(chosen[u.m]);
    auto it = previous.find(s.jobs[u.m].spec->id);
    prev_shares.push_back(it != previous.end() && it->second->type == chosen[u.m]
                              ? it->second->shares
                              : std::vector<server_share>{});
  }
  auto shares = place_on_servers(*s.cl, scale, types, prev_shares);

  round_plan p;
  p.start = s.now;
  p.length = s.round_length;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (shares[i].empty()) continue;
    const job_id id = s.jobs[order[i].m].spec->id;
    const job_id id2 = order[i].m2 == npos ? -1 : s.jobs[order[i].m2].spec->id;
    assignment as;
    as.job = id;
    as.type = types[i];
    as.shares = std::move(shares[i]);
    as.partner = id2;
    p.assignments.push_back(as);
    if (id2 < 0) continue;
    as.job = id2;  // the partner: the same GPUs
    as.partner = id;
    p.assignments.push_back(std::move(as));
  }
  return p;
}

std::vector<std::vector<server_share>> place_on_servers(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<std::vector<server_share>>& previous) {
  const std::size_t n = scale.size();
  std::vector<int> free_gpus(cl.servers.size());
  for (const auto& sv : cl.servers) free_gpus[sv.id] = sv.gpus;
  std::vector<std::vector<server_share>> out(n);

  // Largest jobs first, so they find whole servers before smaller jobs split them.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t l, std::size_t r) { return scale[l] > scale[r]; });
  for (std::size_t i : order) {
    // Lease extension: keep the previous servers when they still have room.
    const auto& prev = i < previous.size() ? previous[i] : std::vector<server_share>{};
    if (!prev.empty()) {
      int total = 0;
      bool fits = true;
      for (const auto& sh : prev) {
        total += sh.gpus;
        if (sh.server < 0 || sh.server >= static_cast<int>(cl.servers.size()) ||
            cl.servers[sh.server].type_index != types[i] || free_gpus[sh.server] < sh.gpus)
          fits = false;
      }
      if (fits && total == scale[i]) {
        for (const auto& sh : prev) free_gpus[sh.server] -= sh.gpus;
        out[i] = prev;
        continue;
      }
    }
    // Best fit on one server.
    int best = -1;
    for (const auto& sv : cl.servers) {
      if (sv.type_index != types[i] || free_gpus[sv.id] < scale[i]) continue;
      if (best < 0 || free_gpus[sv.id] < free_gpus[best]) best = sv.id;
    }
    if (best >= 0) {
      free_gpus[best] -= scale[i];
      out[i] = {{best, scale[i]}};
      continue;
    }
    // Else the fewest servers: those with the most free GPUs first.
    std::vector<int> servers;
    for (const auto& sv : cl.servers)
      if (sv.type_index == types[i] && free_gpus[sv.id] > 0) servers.push_back(sv.id);
    std::stable_sort(servers.begin(), servers.end(),
                     [&](int l, int r) { return free_gpus[l] > free_gpus[r]; });
    int need = scale[i];
    std::vector<server_share> shares;
    for (int sv : servers) {
      if (need == 0) break;
      const int take = std::min(need, free_gpus[sv]);
      shares.push_back({sv, take});
      need -= take;
    }
    if (need > 0) continue;  // does not fit: leave unplaced
    for (const auto& sh : shares) free_gpus[sh.server] -= sh.gpus;
    out[i] = std::move(shares);
  }
  return out;
}

}  // namespace tessera
