#include "policies/mechanism.hpp"

#include <algorithm>
#include <cstring>
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
  // Every row of the pool, free ones too (they are zeroed again when taken).
  if (k_ > 0)
    for (std::size_t r = 0; r + 2 * k_ <= pool_.size(); r += 2 * k_)
      std::fill_n(pool_.begin() + static_cast<std::ptrdiff_t>(r), k_, 0.0);
  for (auto& [ids, st] : pair_stats_) std::fill(st.received.begin(), st.received.end(), 0.0);
}

namespace {

/// Bits of `v` whose unsigned order is the reverse of the values' order (larger values
/// first), equal exactly when the values compare equal (-0 and +0 alike; no NaN expected).
std::uint64_t descending_bits(double v) {
  v += 0.0;  // -0 -> +0
  std::uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  const std::uint64_t ascending = (u >> 63) ? ~u : (u | (std::uint64_t{1} << 63));
  return ~ascending;
}

/// Key of a pair's statistics: its two job ids, lower first.
std::pair<job_id, job_id> pair_key(job_id a, job_id b) {
  return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
}

/// Adds one round to a unit's statistics (x.size() types): `got` seconds on type `ran` (-1 =
/// none) against `x` of the allocation.
void add_round(double* received, double* deficit, const std::vector<double>& x, int ran, double len,
               bool counts) {
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double got = ran == static_cast<int>(j) ? len : 0.0;
    if (counts) received[j] += got;
    deficit[j] += x[j] * len - got;
  }
}

}  // namespace

std::uint32_t gavel_mechanism::stats_row(job_id id) {
  if (const std::uint32_t* known = row_of_.find(id)) return *known;
  std::uint32_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
    std::fill_n(pool_.begin() + static_cast<std::ptrdiff_t>(row * 2 * k_), 2 * k_, 0.0);
  } else {
    row = static_cast<std::uint32_t>(k_ == 0 ? row_of_.size() : pool_.size() / (2 * k_));
    pool_.resize(pool_.size() + 2 * k_, 0.0);
  }
  row_of_[id] = row;
  return row;
}

void gavel_mechanism::account(const snapshot& s, const allocation& a) {
  const std::size_t k = s.cl->types.size();
  index_.assign(s.jobs.size(), [&s](std::size_t i) { return s.jobs[i].spec->id; });
  if (k != k_) {  // another cluster: statistics start over
    row_of_ = id_table<std::uint32_t>();
    pool_.clear();
    free_rows_.clear();
    k_ = k;
  }
  // Forget jobs (and pairs) that left; their rows are taken again by new jobs.
  if (row_of_.size() > s.jobs.size())
    row_of_.erase_if([this](job_id id, std::uint32_t row) {
      if (index_.contains(id)) return false;
      free_rows_.push_back(row);
      return true;
    });
  for (auto it = pair_stats_.begin(); it != pair_stats_.end();)
    it = index_.contains(it->first.first) && index_.contains(it->first.second)
             ? std::next(it)
             : pair_stats_.erase(it);
  auto sized = [k](job_stats& st) -> job_stats& {
    st.received.resize(k, 0.0);
    st.deficit.resize(k, 0.0);
    return st;
  };
  // Each job's statistics, looked up once a round; every job's row made first, as making
  // one may move the pool.
  row_stats_.resize(s.jobs.size());
  row_index_.resize(s.jobs.size());
  for (std::size_t m = 0; m < s.jobs.size(); ++m) row_index_[m] = stats_row(s.jobs[m].spec->id);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    double* row = pool_.data() + static_cast<std::size_t>(row_index_[m]) * 2 * k;
    row_stats_[m] = {row, row + k};
  }
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
    add_round(row_stats_[m].received, row_stats_[m].deficit, a.x[m], ran_alone[m], len, counts);
  }
  for (const auto& pa : a.pairs) {
    const auto key = pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id);
    auto& st = pair_stats_[key];
    auto it = ran_paired.find(key);
    add_round(st.received.data(), st.deficit.data(), pa.x, it == ran_paired.end() ? -1 : it->second,
              len, counts);
  }
}

void gavel_mechanism::candidates(const snapshot& s, const allocation& a) {
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
  std::vector<candidate>& cand = cand_;
  cand.clear();
  cand.reserve(s.jobs.size() * k);
  auto add = [&](const stats_ref& st, const std::vector<double>& x, std::size_t m, std::size_t m2,
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
      add(row_stats_[m], a.x[m], m, npos, s.jobs[m].throughput[j] > 0, j);
  for (const auto& pa : a.pairs) {
    auto& st = pair_stats_[pair_key(s.jobs[pa.a].spec->id, s.jobs[pa.b].spec->id)];
    const stats_ref ref{st.received.data(), st.deficit.data()};
    for (std::size_t j = 0; j < k; ++j)
      add(ref, pa.x, pa.a, pa.b, s.jobs[pa.a].spec->scale_factor == s.jobs[pa.b].spec->scale_factor,
          j);
  }
  // Order: full units first, then priority, deficit and x descending, then ids ascending.
  // Sorted as compact keys (the first three criteria packed beside the position, so most
  // comparisons read no candidate): the comparisons' outcomes are those of comparing the
  // candidates themselves, so std::sort makes the same permutation (its steps depend only on
  // the outcomes).
  keys_.resize(cand.size());
  for (std::size_t i = 0; i < cand.size(); ++i)
    keys_[i] = {descending_bits(cand[i].priority), descending_bits(cand[i].deficit),
                static_cast<std::uint32_t>(i), cand[i].full};
  std::sort(keys_.begin(), keys_.end(), [&cand](const sort_key& lk, const sort_key& rk) {
    if (lk.full != rk.full) return lk.full;
    if (lk.priority != rk.priority) return lk.priority < rk.priority;
    if (lk.deficit != rk.deficit) return lk.deficit < rk.deficit;
    const candidate& l = cand[lk.pos];
    const candidate& r = cand[rk.pos];
    if (l.x != r.x) return l.x > r.x;
    if (l.id != r.id) return l.id < r.id;
    return l.id2 < r.id2;
  });
  order_.resize(cand.size());
  for (std::size_t i = 0; i < cand.size(); ++i) order_[i] = keys_[i].pos;
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
  candidates(s, a);
  for (const std::uint32_t i : order_) {
    const candidate& c = cand_[i];
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
  std::vector<const std::vector<server_share>*> prev_shares;  // null: none to keep
  scale.reserve(order.size());
  types.reserve(order.size());
  prev_shares.reserve(order.size());
  for (const auto& u : order) {
    scale.push_back(s.jobs[u.m].spec->scale_factor);
    types.push_back(chosen[u.m]);
    const assignment* prev = previous[u.m];
    prev_shares.push_back(prev && prev->type == chosen[u.m] ? &prev->shares : nullptr);
  }
  auto shares = place_on_servers_view(*s.cl, scale, types, prev_shares);

  round_plan p;
  p.start = s.now;
  p.length = s.round_length;
  p.assignments.reserve(order.size() + a.pairs.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (shares[i].empty()) continue;
    const job_id id = s.jobs[order[i].m].spec->id;
    const job_id id2 = order[i].m2 == npos ? -1 : s.jobs[order[i].m2].spec->id;
    assignment as;
    as.job = id;
    as.type = types[i];
    as.shares = std::move(shares[i]);
    as.partner = id2;
    if (id2 < 0) {
      p.assignments.push_back(std::move(as));
      continue;
    }
    p.assignments.push_back(as);
    as.job = id2;  // the partner: the same GPUs
    as.partner = id;
    p.assignments.push_back(std::move(as));
  }
  return p;
}

namespace {

/// Free GPUs per server, indexed per GPU type by free count: bucket f of a type is a bitset
/// over that type's servers (in id order) holding exactly f free GPUs. Best fit is the first
/// set bit of the lowest bucket >= need; a spread walks the buckets from the fullest down,
/// each in id order; taking GPUs moves one bit. No allocation once built, where an ordered
/// set of (free, id) allocated a node for every change (a fifth of a 10,000-GPU round).
class free_index {
 public:
  explicit free_index(const cluster& cl)
      : cl_(cl), free_(cl.servers.size()), pos_(cl.servers.size(), 0), types_(cl.types.size()) {
    for (const auto& sv : cl.servers) {
      free_[sv.id] = sv.gpus;
      if (!known(sv.type_index) || sv.gpus <= 0) continue;
      auto& t = types_[sv.type_index];
      pos_[sv.id] = static_cast<int>(t.ids.size());
      t.ids.push_back(sv.id);
      t.max_free = std::max(t.max_free, sv.gpus);
      t.total += sv.gpus;
    }
    for (auto& t : types_) {
      const std::size_t words = (t.ids.size() + 63) / 64;
      t.buckets.assign(static_cast<std::size_t>(t.max_free) + 1, std::vector<std::uint64_t>(words));
      t.first_word.assign(t.buckets.size(), 0);
    }
    for (const auto& sv : cl.servers)
      if (known(sv.type_index) && sv.gpus > 0) set(types_[sv.type_index], sv.gpus, pos_[sv.id]);
  }
  int free(int server) const { return free_[server]; }
  void take(int server, int gpus) {
    const int ti = cl_.servers[server].type_index;
    if (known(ti) && free_[server] > 0) {
      auto& t = types_[ti];
      const int p = pos_[server];
      t.buckets[free_[server]][p / 64] &= ~(std::uint64_t{1} << (p % 64));
      if (free_[server] - gpus > 0) set(t, free_[server] - gpus, p);
      t.total -= gpus;
    }
    free_[server] -= gpus;
  }
  /// The server of `type` with the fewest free GPUs that still hold `need`, lowest id among
  /// equals; -1 when none.
  int best_fit(int type, int need) {
    if (!known(type) || need <= 0) return -1;
    auto& t = types_[type];
    for (int f = need; f <= t.max_free; ++f)
      if (const int p = first(t, f); p >= 0) return t.ids[p];
    return -1;
  }
  /// Shares of `need` GPUs of `type` over the fewest servers (most free first, lowest id among
  /// equals); empty when the type's free GPUs do not hold it.
  std::vector<server_share> spread(int type, int need) {
    std::vector<server_share> shares;
    if (!known(type) || types_[type].total < need) return shares;
    auto& t = types_[type];
    for (int f = t.max_free; f >= 1 && need > 0; --f) {
      const auto& bits = t.buckets[f];
      for (std::size_t w = t.first_word[f]; w < bits.size() && need > 0; ++w)
        for (std::uint64_t word = bits[w]; word != 0 && need > 0; word &= word - 1) {
          const std::size_t p = w * 64 + static_cast<std::size_t>(__builtin_ctzll(word));
          const int take = std::min(need, f);
          shares.push_back({t.ids[p], take});
          need -= take;
        }
    }
    return shares;
  }

 private:
  struct type_index {
    std::vector<int> ids;                             ///< the type's servers, by id
    std::vector<std::vector<std::uint64_t>> buckets;  ///< [free count] bitset over ids
    std::vector<std::size_t> first_word;  ///< [free count]: every word before it is zero
    int max_free = 0;
    long long total = 0;
  };
  bool known(int type) const { return type >= 0 && type < static_cast<int>(types_.size()); }
  static void set(type_index& t, int f, int p) {
    const std::size_t w = static_cast<std::size_t>(p) / 64;
    t.buckets[f][w] |= std::uint64_t{1} << (p % 64);
    t.first_word[f] = std::min(t.first_word[f], w);
  }
  /// The lowest position in bucket f, or -1; advances the bucket's first non-zero word.
  static int first(type_index& t, int f) {
    auto& bits = t.buckets[f];
    std::size_t& w = t.first_word[f];
    while (w < bits.size() && bits[w] == 0) ++w;
    if (w == bits.size()) return -1;
    return static_cast<int>(w * 64 + static_cast<std::size_t>(__builtin_ctzll(bits[w])));
  }
  const cluster& cl_;
  std::vector<int> free_;
  std::vector<int> pos_;  ///< each server's position in its type's ids
  std::vector<type_index> types_;
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
  std::vector<const std::vector<server_share>*> prev(previous.size());
  for (std::size_t i = 0; i < previous.size(); ++i) prev[i] = &previous[i];
  return place_on_servers_view(cl, scale, types, prev);
}

std::vector<std::vector<server_share>> place_on_servers_view(
    const cluster& cl, const std::vector<int>& scale, const std::vector<int>& types,
    const std::vector<const std::vector<server_share>*>& previous) {
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
    if (i < previous.size() && previous[i] && !previous[i]->empty() &&
        previous_fits(cl, fi, *previous[i], types[i], scale[i])) {
      for (const auto& sh : *previous[i]) fi.take(sh.server, sh.gpus);
      out[i] = *previous[i];
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
