#include "runtime/mechanism.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tessera {

namespace {
constexpr double eps = 1e-9;
constexpr double pin_tolerance = 1e-6;
}  // namespace

void gavel_mechanism::reset(double now) {
  reset_time_ = now;
  for (auto& [id, st] : stats_) std::fill(st.received.begin(), st.received.end(), 0.0);
}

void gavel_mechanism::account(const snapshot& s, const allocation& a) {
  const std::size_t k = s.cl->types.size();
  // Forget jobs that left.
  if (stats_.size() > s.jobs.size()) {
    std::unordered_map<job_id, bool> active;
    for (const auto& jv : s.jobs) active[jv.spec->id] = true;
    for (auto it = stats_.begin(); it != stats_.end();)
      it = active.count(it->first) ? std::next(it) : stats_.erase(it);
  }
  for (const auto& jv : s.jobs) {
    auto& st = stats_[jv.spec->id];
    st.received.resize(k, 0.0);
    st.deficit.resize(k, 0.0);
  }
  const round_plan* last = s.last_plan;
  if (!last || last->start <= accounted_until_) return;
  accounted_until_ = last->start;
  const double len = last->length;
  std::unordered_map<job_id, int> ran_on;
  for (const auto& as : last->assignments)
    if (as.type >= 0) ran_on[as.job] = as.type;
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    auto& st = stats_[s.jobs[m].spec->id];
    auto it = ran_on.find(s.jobs[m].spec->id);
    for (std::size_t j = 0; j < k; ++j) {
      const double got = (it != ran_on.end() && it->second == static_cast<int>(j)) ? len : 0.0;
      if (last->start >= reset_time_) st.received[j] += got;
      st.deficit[j] += a.x[m][j] * len - got;
    }
  }
}

round_plan gavel_mechanism::plan(const snapshot& s, const allocation& a) {
  account(s, a);
  const std::size_t k = s.cl->types.size();
  const double elapsed = s.now - reset_time_;
  struct candidate {
    bool full;  ///< the job's allocation sums to 1: it must run every round
    double priority, deficit, x;
    job_id id;
    std::size_t m, j;
  };
  std::vector<candidate> cand;
  cand.reserve(s.jobs.size() * k);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const auto& st = stats_[s.jobs[m].spec->id];
    double row = 0;
    for (std::size_t j = 0; j < k; ++j) row += a.x[m][j];
    const bool full = row >= 1 - pin_tolerance;
    for (std::size_t j = 0; j < k; ++j) {
      const double x = a.x[m][j];
      if (x <= eps || s.jobs[m].throughput[j] <= 0) continue;
      const double share = elapsed > 0 ? st.received[j] / elapsed : 0.0;
      const double prio = share > eps ? x / share : std::numeric_limits<double>::infinity();
      cand.push_back({full, prio, st.deficit[j], x, s.jobs[m].spec->id, m, j});
    }
  }
  std::sort(cand.begin(), cand.end(), [](const candidate& l, const candidate& r) {
    if (l.full != r.full) return l.full;
    if (l.priority != r.priority) return l.priority > r.priority;
    if (l.deficit != r.deficit) return l.deficit > r.deficit;
    if (l.x != r.x) return l.x > r.x;
    return l.id < r.id;
  });

  std::vector<int> free_gpus(k);
  for (std::size_t j = 0; j < k; ++j) free_gpus[j] = s.cl->types[j].gpus;
  std::vector<int> chosen(s.jobs.size(), -1);
  std::vector<std::size_t> order;  // scheduled jobs in priority order
  for (const auto& c : cand) {
    if (chosen[c.m] >= 0) continue;
    const int need = s.jobs[c.m].spec->scale_factor;
    if (free_gpus[c.j] < need) continue;
    free_gpus[c.j] -= need;
    chosen[c.m] = static_cast<int>(c.j);
    order.push_back(c.m);
  }

  std::unordered_map<job_id, const assignment*> previous;
  if (s.last_plan)
    for (const auto& as : s.last_plan->assignments) previous[as.job] = &as;
  std::vector<int> scale, types;
  std::vector<std::vector<server_share>> prev_shares;
  for (std::size_t m : order) {
    scale.push_back(s.jobs[m].spec->scale_factor);
    types.push_back(chosen[m]);
    auto it = previous.find(s.jobs[m].spec->id);
    prev_shares.push_back(it != previous.end() && it->second->type == chosen[m]
                              ? it->second->shares
                              : std::vector<server_share>{});
  }
  auto shares = place_on_servers(*s.cl, scale, types, prev_shares);

  round_plan p;
  p.start = s.now;
  p.length = s.round_length;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (shares[i].empty()) continue;
    assignment as;
    as.job = s.jobs[order[i]].spec->id;
    as.type = types[i];
    as.shares = std::move(shares[i]);
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
