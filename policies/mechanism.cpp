#include "policies/mechanism.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>
#include <numeric>
#include <set>

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
  index_.assign(s.jobs.size(), [&s](std::size_t i) { return s.jobs[i].spec->id; });
  // Forget jobs (and pairs) that left.
  if (stats_.size() > s.jobs.size())
    for (auto it = stats_.begin(); it != stats_.end();)
      it = index_.contains(it->first) ? std::next(it) : stats_.erase(it);
  for (auto it = pair_stats_.begin(); it != pair_stats_.end();)
    it = index_.contains(it->first.first) && index_.contains(it->first.second)
             ? std::next(it)
             : pair_stats_.erase(it);
  auto sized = [k](job_stats& st) -> job_stats& {
    st.received.resize(k, 0.0);
    st.deficit.resize(k, 0.0);
    return st;
  };
  // Each job's statistics, looked up once a round (the map's elements do not move).
  row_stats_.resize(s.jobs.size());
  for (std::size_t m = 0; m < s.jobs.size(); ++m)
    row_stats_[m] = &sized(stats_[s.jobs[m].spec->id]);
  for (const auto& pa : a.pairs)
    sized(pair_stats_[pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id)]);
  const round_plan* last = s.last_plan;
  if (!last || last->start <= accounted_until_) return;
  accounted_until_ = last->start;
  const double len = last->length;
  const bool counts = last->start >= reset_time_;
  std::vector<int>& ran_alone = ran_scratch_;  // per job: the type it ran on alone, or -1
  ran_alone.assign(s.jobs.size(), -1);
  std::map<std::pair<job_id, job_id>, int> ran_paired;
  for (const auto& as : last->assignments) {
    if (as.type < 0) continue;
    if (as.partner >= 0) {
      ran_paired[pair_key(as.job, as.partner)] = as.type;
      continue;
    }
    if (const std::size_t m = index_.find(as.job); m != job_index::npos) ran_alone[m] = as.type;
  }
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    auto& st = *row_stats_[m];
    add_round(st.received, st.deficit, a.x[m], ran_alone[m], len, counts);
  }
  for (const auto& pa : a.pairs) {
    const auto key = pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id);
    auto& st = pair_stats_[key];
    auto it = ran_paired.find(key);
    add_round(st.received, st.deficit, pa.x, it == ran_paired.end() ? -1 : it->second, len, counts);
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
  auto add = [&](const job_stats& st, const std::vector<double>& x, std::size_t m, std::size_t m2,
                 bool runs_on_j, std::size_t j) {
    if (x[j] <= eps || !runs_on_j) return;
    const double share = elapsed > 0 ? st.received[j] / elapsed : 0.0;
    const double prio = share > eps ? x[j] / share : std::numeric_limits<double>::infinity();
    const bool full = row[m] >= 1 - pin_tolerance && (m2 == npos || row[m2] >= 1 - pin_tolerance);
    const job_id id2 = m2 == npos ? -1 : s.jobs[m2].spec->id;
    cand.push_back({full, prio, st.deficit[j], x[j], s.jobs[m].spec->id, id2, m, m2, j});
  };
  for (std::size_t m = 0; m < s.jobs.size(); ++m)
    for (std::size_t j = 0; j < k; ++j)
      add(*row_stats_[m], a.x[m], m, npos, s.jobs[m].throughput[j] > 0, j);
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

  // Each job's assignment in the previous round (its last one there), for lease extension.
  std::vector<const assignment*> previous(s.jobs.size(), nullptr);
  if (s.last_plan)
    for (const auto& as : s.last_plan->assignments)
      if (const std::size_t m = index_.find(as.job); m != job_index::npos) previous[m] = &as;
  std::vector<int> scale, types;
  std::vector<std::vector<server_share>> prev_shares;
  for (const auto& u : order) {
    scale.push_back(s.jobs[u.m].spec->scale_factor);
    types.push_back(chosen[u.m]);
    const assignment* prev = previous[u.m];
    prev_shares.push_back(prev && prev->type == chosen[u.m] ? prev->shares
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

namespace {

/// Free GPUs per server, with each GPU type's servers that have any free kept ordered by
/// (most free first, then lowest id), so a placement costs O(log servers) rather than a scan
/// of every server.
class free_index {
 public:
  explicit free_index(const cluster& cl)
      : cl_(cl), free_(cl.servers.size()), by_type_(cl.types.size()), total_(cl.types.size()) {
    for (const auto& sv : cl.servers) {
      free_[sv.id] = sv.gpus;
      if (sv.type_index < 0 || sv.type_index >= static_cast<int>(by_type_.size()) || sv.gpus <= 0)
        continue;
      by_type_[sv.type_index].insert({-sv.gpus, sv.id});
      total_[sv.type_index] += sv.gpus;
    }
  }
  int free(int server) const { return free_[server]; }
  void take(int server, int gpus) {
    const int t = cl_.servers[server].type_index;
    if (t >= 0 && t < static_cast<int>(by_type_.size())) {
      by_type_[t].erase({-free_[server], server});
      if (free_[server] - gpus > 0) by_type_[t].insert({-(free_[server] - gpus), server});
      total_[t] -= gpus;
    }
    free_[server] -= gpus;
  }
  /// The server of `type` with the fewest free GPUs that still hold `need`, lowest id among
  /// equals; -1 when none.
  int best_fit(int type, int need) const {
    if (!known(type)) return -1;
    const auto& set = by_type_[type];
    // Entries are (-free, id): the last entry with -free <= -need has the least such free.
    auto it = set.upper_bound({-need, std::numeric_limits<int>::max()});
    if (it == set.begin()) return -1;
    const int least = -std::prev(it)->first;
    return set.lower_bound({-least, std::numeric_limits<int>::min()})->second;
  }
  /// Shares of `need` GPUs of `type` over the fewest servers (most free first, lowest id among
  /// equals); empty when the type's free GPUs do not hold it.
  std::vector<server_share> spread(int type, int need) const {
    std::vector<server_share> shares;
    if (!known(type) || total_[type] < need) return shares;
    for (const auto& [neg_free, id] : by_type_[type]) {
      if (need == 0) break;
      const int take = std::min(need, -neg_free);
      shares.push_back({id, take});
      need -= take;
    }
    return shares;
  }

 private:
  bool known(int type) const { return type >= 0 && type < static_cast<int>(by_type_.size()); }
  const cluster& cl_;
  std::vector<int> free_;
  std::vector<std::set<std::pair<int, int>>> by_type_;
  std::vector<long long> total_;
};

/// Whether job i's previous shares are all on type `type` and still free, summing to `scale`.
bool previous_fits(const cluster& cl, const free_index& fi, const std::vector<server_share>& prev,
                   int type, int scale) {
  int total = 0;
  bool fits = true;
  for (const auto& sh : prev) {
    total += sh.gpus;
    if (sh.server < 0 || sh.server >= static_cast<int>(cl.servers.size()) ||
        cl.servers[sh.server].type_index != type || fi.free(sh.server) < sh.gpus)
      fits = false;
  }
  return fits && total == scale;
}

}  // namespace

std::vector<std::vector<server_share>> place_on_servers(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<std::vector<server_share>>& previous) {
  const std::size_t n = scale.size();
  free_index fi(cl);
  std::vector<std::vector<server_share>> out(n);

  // Largest jobs first, so they find whole servers before smaller jobs split them.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t l, std::size_t r) { return scale[l] > scale[r]; });
  for (std::size_t i : order) {
    // Lease extension: keep the previous servers when they still have room.
    if (i < previous.size() && !previous[i].empty() &&
        previous_fits(cl, fi, previous[i], types[i], scale[i])) {
      for (const auto& sh : previous[i]) fi.take(sh.server, sh.gpus);
      out[i] = previous[i];
      continue;
    }
    // Best fit on one server, else the fewest servers (those with the most free GPUs first);
    // a job that fits neither stays unplaced.
    if (const int best = fi.best_fit(types[i], scale[i]); best >= 0) {
      fi.take(best, scale[i]);
      out[i] = {{best, scale[i]}};
      continue;
    }
    out[i] = fi.spread(types[i], scale[i]);
    for (const auto& sh : out[i]) fi.take(sh.server, sh.gpus);
  }
  return out;
}

}  // namespace tessera
