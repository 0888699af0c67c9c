// Hops' placement on servers (steps 5 and 6 of policies/hops.hpp): the ILP's packing
// (hops_packing.hpp), the greedy pass and fragment filling (hops_internal.hpp).
#include "policies/hops_packing.hpp"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <utility>

#include "policies/hops_internal.hpp"

namespace tessera {

namespace {

/// The shares of job i in the last round (none when `previous` does not reach i).
const std::vector<server_share>& previous_of(const std::vector<std::vector<server_share>>& previous,
                                             std::size_t i) {
  static const std::vector<server_share> none;
  return i < previous.size() ? previous[i] : none;
}

/// One class's servers during packing, by position in the class.
struct class_packing {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  const hops_class& cls;
  std::size_t n = 0;                    ///< servers in the class
  std::vector<std::size_t> pos_of;      ///< server id -> position (`none`: another class)
  std::vector<std::size_t> members;     ///< jobs whose chosen configuration is here
  std::vector<int> used;                ///< GPUs taken per position
  std::vector<bool> whole;              ///< given whole to one job
  std::vector<std::vector<int>> slots;  ///< free slots of the position's pattern
  std::vector<bool> has_pattern;        ///< a pattern was assigned to the position
  /// Per share size d: no position before first_slot[d] has a free slot of size d (slots
  /// are only taken, except by give_back, which moves it back), so the first position with
  /// one is found from there instead of from the class's first server.
  std::vector<std::size_t> first_slot;

  class_packing(const hops_class& c, std::size_t k, const hops_ilp_input& in,
                const hops_ilp_result& r)
      : cls(c),
        n(c.servers.size()),
        used(n, 0),
        whole(n, false),
        slots(n),
        has_pattern(n),
        first_slot(static_cast<std::size_t>(c.capacity) + 1, 0) {
    int top = -1;
    for (int sv : cls.servers) top = std::max(top, sv);
    pos_of.assign(static_cast<std::size_t>(top + 1), none);
    for (std::size_t q = 0; q < n; ++q) pos_of[cls.servers[q]] = q;
    for (std::size_t i = 0; i < in.configs.size() && i < r.choice.size(); ++i)
      if (r.choice[i] >= 0 && in.configs[i][r.choice[i]].cls == static_cast<int>(k))
        members.push_back(i);
  }

  /// The position of server `sv` in the class, `none` when it is not in it.
  std::size_t position(int sv) const {
    return sv >= 0 && static_cast<std::size_t>(sv) < pos_of.size() ? pos_of[sv] : none;
  }

  bool picked(const std::vector<std::size_t>& picks, std::size_t q) const {
    return std::find(picks.begin(), picks.end(), q) != picks.end();
  }

  /// Takes a slot of size d on position q, if its pattern has one left.
  bool take_slot(std::size_t q, int d) {
    auto it = std::find(slots[q].begin(), slots[q].end(), d);
    if (it == slots[q].end()) return false;
    slots[q].erase(it);
    used[q] += d;
    return true;
  }

  /// Takes a slot of size d on the first position (not given whole) that has one; `none`
  /// when none has.
  std::size_t take_first_slot(int d) {
    std::size_t& q = first_slot[static_cast<std::size_t>(d)];
    for (; q < n; ++q)
      if (!whole[q] && take_slot(q, d)) return q;
    return none;
  }

  /// Gives back a slot of size d on position q.
  void return_slot(std::size_t q, int d) {
    slots[q].push_back(d);
    used[q] -= d;
    first_slot[static_cast<std::size_t>(d)] = std::min(first_slot[static_cast<std::size_t>(d)], q);
  }
};

/// A share a running job keeps: its previous server still offers a slot of that size.
struct kept_piece {
  std::size_t job;
  std::size_t q;
  int size;
};

/// `need` whole servers for job i: its previous ones first, then a run of consecutive free
/// ones, then any free ones.
std::vector<std::size_t> pick_whole_servers(const class_packing& cp,
                                            const std::vector<server_share>& prev, int need) {
  std::vector<std::size_t> picks;
  for (const auto& sh : prev) {
    const std::size_t q = cp.position(sh.server);
    if (need > 0 && q != class_packing::none && !cp.whole[q] && !cp.picked(picks, q)) {
      picks.push_back(q);
      --need;
    }
  }
  for (std::size_t start = 0; need > 0 && start < cp.n; ++start) {
    std::size_t len = 0;
    while (start + len < cp.n && !cp.whole[start + len] && !cp.picked(picks, start + len) &&
           static_cast<int>(len) < need)
      ++len;
    if (static_cast<int>(len) == need)
      for (std::size_t q = start; q < start + len; ++q) {
        picks.push_back(q);
        --need;
      }
  }
  for (std::size_t q = 0; need > 0 && q < cp.n; ++q)
    if (!cp.whole[q] && !cp.picked(picks, q)) {
      picks.push_back(q);
      --need;
    }
  return picks;
}

/// Packing step 1: the whole-server shares of every member.
void place_whole_servers(const hops_ilp_input& in, const hops_ilp_result& r,
                         const std::vector<std::vector<server_share>>& previous, class_packing& cp,
                         std::vector<std::vector<server_share>>& out) {
  for (std::size_t i : cp.members) {
    const int need = in.configs[i][r.choice[i]].whole_servers;
    if (need == 0) continue;
    for (std::size_t q : pick_whole_servers(cp, previous_of(previous, i), need)) {
      cp.whole[q] = true;
      cp.used[q] = cp.cls.capacity;
      out[i].push_back({cp.cls.servers[q], cp.cls.capacity});
    }
  }
}

/// The members' previous partial shares that match a share of their new configuration, and
/// the sizes kept per position.
std::vector<kept_piece> keep_pieces(const hops_ilp_input& in, const hops_ilp_result& r,
                                    const std::vector<std::vector<server_share>>& previous,
                                    const class_packing& cp,
                                    std::vector<std::vector<int>>& kept_sizes) {
  std::vector<kept_piece> kept;
  kept_sizes.assign(cp.n, {});
  for (std::size_t i : cp.members) {
    std::vector<int> pieces = in.configs[i][r.choice[i]].pieces.to_vector();
    for (const auto& sh : previous_of(previous, i)) {
      const std::size_t q = cp.position(sh.server);
      if (q == class_packing::none || cp.whole[q]) continue;
      auto pc = std::find(pieces.begin(), pieces.end(), sh.gpus);
      if (pc == pieces.end()) continue;
      kept.push_back({i, q, sh.gpus});
      kept_sizes[q].push_back(sh.gpus);
      pieces.erase(pc);
    }
  }
  return kept;
}

/// Slots of `kept` that `pattern` covers (each slot covers one kept share of its size).
int kept_cover(std::vector<int> pattern, const std::vector<int>& kept) {
  int cover = 0;
  for (int d : kept) {
    auto it = std::find(pattern.begin(), pattern.end(), d);
    if (it != pattern.end()) {
      cover += d;
      pattern.erase(it);
    }
  }
  return cover;
}

/// The ILP's pattern copies grouped by content: the copies of a group are interchangeable, so
/// a position need only weigh each group's first free copy.
struct pattern_groups {
  std::vector<const std::vector<int>*> content;  ///< per group
  std::vector<std::vector<std::size_t>> copies;  ///< per group: copy indices, ascending
  std::vector<std::size_t> next;                 ///< per group: its first free copy

  explicit pattern_groups(const std::vector<std::vector<int>>& patterns) {
    for (std::size_t p = 0; p < patterns.size(); ++p) {
      std::size_t g = 0;
      while (g < content.size() && *content[g] != patterns[p]) ++g;
      if (g == content.size()) {
        content.push_back(&patterns[p]);
        copies.emplace_back();
        next.push_back(0);
      }
      copies[g].push_back(p);
    }
  }
};

/// Packing step 2: patterns to the positions not given whole, those keeping the most GPUs
/// first, each taking the free pattern copy that covers most of its kept sizes (the lowest
/// copy index among equals). Per position it weighs the distinct patterns only, not every
/// copy (those are up to one per server of the class).
void assign_patterns(const std::vector<std::vector<int>>& patterns,
                     const std::vector<std::vector<int>>& kept_sizes, class_packing& cp) {
  pattern_groups groups(patterns);
  std::vector<std::size_t> order;
  for (std::size_t q = 0; q < cp.n; ++q)
    if (!cp.whole[q]) order.push_back(q);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    int sa = 0, sb = 0;
    for (int d : kept_sizes[a]) sa += d;
    for (int d : kept_sizes[b]) sb += d;
    return sa > sb;
  });
  for (std::size_t q : order) {
    int best = -1, best_cover = -1;
    std::size_t best_copy = 0;
    for (std::size_t g = 0; g < groups.content.size(); ++g) {
      if (groups.next[g] == groups.copies[g].size()) continue;
      const std::size_t copy = groups.copies[g][groups.next[g]];
      const int cover = kept_cover(*groups.content[g], kept_sizes[q]);
      if (cover > best_cover || (cover == best_cover && copy < best_copy)) {
        best_cover = cover;
        best = static_cast<int>(g);
        best_copy = copy;
      }
    }
    if (best < 0) break;
    ++groups.next[best];
    cp.slots[q] = *groups.content[best];
    cp.has_pattern[q] = true;
  }
}

/// Gives back everything job i took in this class (its shares in `out`, and `taken`:
/// (position, +d) for a slot, (position, -d) for room outside the patterns) and drops it.
void give_back(class_packing& cp, const std::vector<std::pair<std::size_t, int>>& taken,
               std::vector<server_share>& shares) {
  for (auto [q, d] : taken) {
    if (d > 0)
      cp.return_slot(q, d);
    else
      cp.used[q] += d;
  }
  for (const auto& sh : shares) {
    const std::size_t q = cp.position(sh.server);
    if (q == class_packing::none) continue;
    if (cp.whole[q] && sh.gpus == cp.cls.capacity) {
      cp.whole[q] = false;
      cp.used[q] = 0;
    } else {
      cp.return_slot(q, sh.gpus);
    }
  }
  shares.clear();
}

/// Places job i's remaining partial shares (largest first) into pattern slots in server
/// order; a share no slot takes goes to a server without a pattern that has room. A job
/// that cannot be completed gives back what it took.
void place_job_pieces(class_packing& cp, std::vector<int> pieces,
                      std::vector<server_share>& shares) {
  std::vector<server_share> got;
  std::vector<std::pair<std::size_t, int>> taken;
  std::sort(pieces.begin(), pieces.end(), std::greater<int>());
  for (int d : pieces) {
    bool placed = false;
    if (const std::size_t q = cp.take_first_slot(d); q != class_packing::none) {
      got.push_back({cp.cls.servers[q], d});
      taken.emplace_back(q, d);
      placed = true;
    }
    // Not reachable when the pattern counts come from the ILP; kept for safety: any server
    // with room.
    for (std::size_t q = 0; q < cp.n && !placed; ++q)
      if (!cp.whole[q] && !cp.has_pattern[q] && cp.cls.capacity - cp.used[q] >= d) {
        cp.used[q] += d;
        got.push_back({cp.cls.servers[q], d});
        taken.emplace_back(q, -d);
        placed = true;
      }
    if (!placed) {
      give_back(cp, taken, shares);
      return;
    }
  }
  for (const auto& sh : got) shares.push_back(sh);
}

/// Packing step 3: kept shares into their servers' slots first, then every member's other
/// shares.
void place_pieces(const hops_ilp_input& in, const hops_ilp_result& r,
                  const std::vector<kept_piece>& kept, class_packing& cp,
                  std::vector<std::vector<server_share>>& out) {
  std::vector<std::vector<int>> left(in.configs.size());
  for (std::size_t i : cp.members) left[i] = in.configs[i][r.choice[i]].pieces.to_vector();
  for (const auto& kp : kept) {
    auto it = std::find(left[kp.job].begin(), left[kp.job].end(), kp.size);
    if (it == left[kp.job].end()) continue;
    if (cp.take_slot(kp.q, kp.size)) {
      out[kp.job].push_back({cp.cls.servers[kp.q], kp.size});
      left[kp.job].erase(it);
    }
  }
  for (std::size_t i : cp.members) place_job_pieces(cp, left[i], out[i]);
}

}  // namespace

std::vector<std::vector<server_share>> pack_hops_solution(
    const hops_ilp_input& in, const hops_ilp_result& r,
    const std::vector<std::vector<server_share>>& previous) {
  std::vector<std::vector<server_share>> out(in.configs.size());
  static const std::vector<std::vector<int>> no_patterns;
  for (std::size_t k = 0; k < in.classes.size(); ++k) {
    class_packing cp(in.classes[k], k, in, r);
    if (cp.members.empty()) continue;
    place_whole_servers(in, r, previous, cp, out);
    std::vector<std::vector<int>> kept_sizes;
    const auto kept = keep_pieces(in, r, previous, cp, kept_sizes);
    assign_patterns(k < r.patterns.size() ? r.patterns[k] : no_patterns, kept_sizes, cp);
    place_pieces(in, r, kept, cp, out);
  }
  for (auto& v : out) v = detail::normalised_shares(std::move(v));
  return out;
}

namespace detail {

std::vector<server_share> normalised_shares(std::vector<server_share> v) {
  std::sort(v.begin(), v.end(),
            [](const server_share& a, const server_share& b) { return a.server < b.server; });
  std::size_t n = 0;  // merged in place: v[0, n) holds the shares so far
  for (const auto& sh : v) {
    if (n > 0 && v[n - 1].server == sh.server)
      v[n - 1].gpus += sh.gpus;
    else
      v[n++] = sh;
  }
  v.resize(n);
  return v;
}

bool hops_round_state::on_previous(std::size_t i, int server) const {
  for (const auto& sh : previous[i])
    if (sh.server == server) return true;
  return false;
}

namespace {

/// Tries queue job i on configuration `cf` of class `cls` against the free GPUs in `trial`:
/// whole servers (its previous ones first, then ascending), then each partial share on its
/// previous server, else the best fit. On success `got` holds the shares and `trial` the GPUs
/// left.
bool fit_config(const hops_config& cf, const hops_class& cls, const hops_round_state& st,
                std::size_t i, std::vector<int>& trial, std::vector<server_share>& got) {
  int need = cf.whole_servers;
  for (int pass = 0; pass < 2 && need > 0; ++pass)
    for (int sv : cls.servers)
      if (need > 0 && trial[sv] == cls.capacity && (pass == 1 || st.on_previous(i, sv))) {
        got.push_back({sv, cls.capacity});
        trial[sv] = 0;
        --need;
      }
  if (need > 0) return false;
  for (int d : cf.pieces) {
    int best = -1;
    for (int sv : cls.servers) {
      if (trial[sv] < d) continue;
      if (best < 0 || (st.on_previous(i, sv) && !st.on_previous(i, best)) ||
          (st.on_previous(i, sv) == st.on_previous(i, best) && trial[sv] < trial[best]))
        best = sv;
    }
    if (best < 0) return false;
    got.push_back({best, d});
    trial[best] -= d;
  }
  return true;
}

/// The one server that takes `g` GPUs of queue job i best: the job's previous server, then
/// the fastest one-server rate, then the least free room; -1 when none has room.
int best_single_server(const cluster& cl, const job_view& jv, const hops_server_classes& classes,
                       const hops_class_rates& cr, int g, const hops_round_state& st,
                       std::size_t i) {
  int best = -1;
  for (const auto& sv : cl.servers) {
    const int k = classes.class_of(sv.id);
    if (st.free_gpus[sv.id] < g || cr.single[k] <= 0 || !hops_may_run_on(cl, jv, sv.id)) continue;
    if (best < 0) {
      best = sv.id;
      continue;
    }
    const int kb = classes.class_of(best);
    const bool pa = st.on_previous(i, sv.id), pb = st.on_previous(i, best);
    if (pa != pb) {
      if (pa) best = sv.id;
    } else if (cr.single[k] != cr.single[kb]) {
      if (cr.single[k] > cr.single[kb]) best = sv.id;
    } else if (st.free_gpus[sv.id] < st.free_gpus[best]) {
      best = sv.id;
    }
  }
  return best;
}

/// `g` GPUs of the job over several servers, fastest spanning rate first, then most free
/// room; empty when the free GPUs it may use are too few.
std::vector<server_share> spread_over_servers(const cluster& cl, const job_view& jv,
                                              const hops_server_classes& classes,
                                              const hops_class_rates& cr, int g,
                                              const std::vector<int>& free_gpus) {
  std::vector<int> servers;
  for (const auto& sv : cl.servers)
    if (free_gpus[sv.id] > 0 && cr.multi[classes.class_of(sv.id)] > 0 &&
        hops_may_run_on(cl, jv, sv.id))
      servers.push_back(sv.id);
  std::stable_sort(servers.begin(), servers.end(), [&](int a, int b) {
    const double ra = cr.multi[classes.class_of(a)], rb = cr.multi[classes.class_of(b)];
    if (ra != rb) return ra > rb;
    return free_gpus[a] > free_gpus[b];
  });
  int need = g;
  std::vector<server_share> got;
  for (int sv : servers) {
    if (need == 0) break;
    const int take = std::min(need, free_gpus[sv]);
    got.push_back({sv, take});
    need -= take;
  }
  if (need > 0) got.clear();
  return got;
}

/// Places unplaced queue job i on the free GPUs, largest acceptable GPU count first: one
/// server when one has room, else spread (low-sensitivity jobs, and jobs no server can hold).
/// `max_free` is the most free GPUs on one server: no server takes more, so no scan is needed
/// then (jobs left unplaced by a fragmented cluster would otherwise cost a scan each).
void fill_one(const snapshot& s, hops_server_classes& classes, double threshold,
              hops_round_state& st, std::size_t i, int& free_total, int max_free) {
  const cluster& cl = *s.cl;
  const auto& c = st.queue[i];
  const job_view& jv = s.jobs[c.m];
  for (auto g = c.counts().rbegin(); g != c.counts().rend(); ++g) {
    if (*g > free_total) continue;
    const hops_class_rates& cr = classes.rates_for(jv.spec->job_type, *g);
    const int best = *g > max_free ? -1 : best_single_server(cl, jv, classes, cr, *g, st, i);
    if (best >= 0) {
      st.placed[i] = {{best, *g}};
      st.free_gpus[best] -= *g;
      free_total -= *g;
      return;
    }
    if (*g < 2 || (!(cr.sensitivity < threshold) && cr.fits_one_server)) continue;
    auto got = spread_over_servers(cl, jv, classes, cr, *g, st.free_gpus);
    if (got.empty()) continue;
    for (const auto& sh : got) st.free_gpus[sh.server] -= sh.gpus;
    free_total -= *g;
    st.placed[i] = normalised_shares(std::move(got));
    return;
  }
}

}  // namespace

void hops_greedy_place(const std::vector<hops_class>& classes, std::size_t window,
                       const std::vector<std::vector<double>>& value, hops_round_state& st) {
  for (std::size_t i = 0; i < window; ++i) {
    const auto& c = st.queue[i];
    std::vector<std::size_t> order(c.configs().size());
    for (std::size_t q = 0; q < order.size(); ++q) order[q] = q;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return value[i][a] > value[i][b]; });
    for (std::size_t q : order) {
      const auto& cf = c.configs()[q];
      std::vector<server_share> got;
      std::vector<int> trial = st.free_gpus;
      if (!fit_config(cf, classes[cf.cls], st, i, trial, got)) continue;
      st.free_gpus = std::move(trial);
      st.placed[i] = normalised_shares(std::move(got));
      break;
    }
  }
}

int hops_fill_fragments(const snapshot& s, hops_server_classes& classes, double threshold,
                        hops_round_state& st) {
  int free_total = 0;
  for (int f : st.free_gpus) free_total += f;
  int placed = 0;
  int max_free = *std::max_element(st.free_gpus.begin(), st.free_gpus.end());
  for (std::size_t i = 0; i < st.queue.size() && free_total > 0; ++i) {
    if (!st.placed[i].empty()) continue;
    fill_one(s, classes, threshold, st, i, free_total, max_free);
    if (st.placed[i].empty()) continue;
    ++placed;
    max_free = *std::max_element(st.free_gpus.begin(), st.free_gpus.end());
  }
  return placed;
}

}  // namespace detail

}  // namespace tessera
