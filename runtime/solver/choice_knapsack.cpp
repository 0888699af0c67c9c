#include "runtime/solver/choice_knapsack.hpp"

#include <algorithm>
#include <limits>

namespace tessera {

namespace {

/// Cost of a state no choice reaches (forced items that do not fit).
constexpr std::int64_t unreachable = std::int64_t{1} << 62;

/// The capacity states in mixed radix: resource r is digit r, of base capacity[r] + 1.
struct state_space {
  std::vector<int> cap;              ///< capacity per resource (>= 0)
  std::vector<std::int64_t> stride;  ///< index step of one unit of resource r
  std::int64_t size = 1;             ///< states, saturating at INT64_MAX
};

state_space make_space(const std::vector<int>& capacity) {
  state_space sp;
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  for (const int c : capacity) {
    sp.cap.push_back(std::max(0, c));
    sp.stride.push_back(sp.size);
    const std::int64_t base = sp.cap.back() + 1;
    sp.size = sp.size > most / base ? most : sp.size * base;
  }
  return sp;
}

/// Whether option `o` names one of the `resources` resources and a weight of at least 0.
bool usable(const choice_option& o, std::size_t resources) {
  return o.resource >= 0 && static_cast<std::size_t>(o.resource) < resources && o.weight >= 0;
}

/// One stage of the recursion: row[s] = f_i(s) from next = f_{i+1}.
void stage(const state_space& sp, const std::vector<std::vector<int>>& digit, const choice_item& it,
           const std::int64_t* next, std::int64_t* row) {
  const std::int64_t n = sp.size;
  for (std::int64_t s = 0; s < n; ++s) row[s] = it.forced ? unreachable : next[s];
  for (const auto& o : it.options) {
    if (!usable(o, sp.cap.size()) || o.weight > sp.cap[static_cast<std::size_t>(o.resource)])
      continue;
    const std::vector<int>& d = digit[static_cast<std::size_t>(o.resource)];
    const std::int64_t off = o.weight * sp.stride[static_cast<std::size_t>(o.resource)];
    for (std::int64_t s = off; s < n; ++s) {
      if (d[static_cast<std::size_t>(s)] < o.weight || next[s - off] >= unreachable) continue;
      row[s] = std::min(row[s], o.cost + next[s - off]);
    }
  }
}

}  // namespace

milp_model choice_knapsack_milp(const std::vector<int>& capacity,
                                const std::vector<choice_item>& items, double unit) {
  milp_model m;
  std::vector<std::vector<std::pair<int, double>>> rows(capacity.size());
  for (const auto& it : items) {
    std::vector<std::pair<int, double>> one;
    for (const auto& o : it.options) {
      if (!usable(o, capacity.size())) continue;
      const int col = m.add_binary(static_cast<double>(o.cost) * unit);
      one.emplace_back(col, 1.0);
      rows[static_cast<std::size_t>(o.resource)].emplace_back(col, o.weight);
    }
    if (!one.empty() || it.forced) m.add_row(it.forced ? 1 : 0, 1, one);
  }
  for (std::size_t r = 0; r < capacity.size(); ++r)
    if (!rows[r].empty()) m.add_row(-lp_inf, std::max(0, capacity[r]), rows[r]);
  return m;
}

std::int64_t choice_states(const std::vector<int>& capacity) { return make_space(capacity).size; }

choice_solution solve_choice_knapsack(const std::vector<int>& capacity,
                                      const std::vector<choice_item>& items,
                                      std::int64_t max_cells) {
  choice_solution out;
  const state_space sp = make_space(capacity);
  const auto n = static_cast<std::int64_t>(items.size());
  if (sp.size > max_cells / (n + 1)) {
    out.outcome = choice_outcome::too_large;
    return out;
  }
  // digit[r][s]: units of resource r left in state s (only for resources some option uses).
  std::vector<std::vector<int>> digit(sp.cap.size());
  for (const auto& it : items)
    for (const auto& o : it.options) {
      if (!usable(o, sp.cap.size())) continue;
      auto& d = digit[static_cast<std::size_t>(o.resource)];
      if (!d.empty()) continue;
      d.resize(static_cast<std::size_t>(sp.size));
      const std::int64_t stride = sp.stride[static_cast<std::size_t>(o.resource)];
      const std::int64_t base = sp.cap[static_cast<std::size_t>(o.resource)] + 1;
      for (std::int64_t s = 0; s < sp.size; ++s)
        d[static_cast<std::size_t>(s)] = static_cast<int>((s / stride) % base);
    }
  std::vector<std::int64_t> f(static_cast<std::size_t>((n + 1) * sp.size), 0);
  for (std::int64_t i = n - 1; i >= 0; --i)
    stage(sp, digit, items[static_cast<std::size_t>(i)], f.data() + (i + 1) * sp.size,
          f.data() + i * sp.size);
  std::int64_t s = sp.size - 1;  // every unit left
  if (f[static_cast<std::size_t>(s)] >= unreachable) {
    out.outcome = choice_outcome::infeasible;
    return out;
  }
  out.cost = f[static_cast<std::size_t>(s)];
  out.pick.assign(items.size(), -1);
  for (std::int64_t i = 0; i < n; ++i) {  // forwards: the first option that attains f_i
    const choice_item& it = items[static_cast<std::size_t>(i)];
    const std::int64_t target = f[static_cast<std::size_t>(i * sp.size + s)];
    const std::int64_t* next = f.data() + (i + 1) * sp.size;
    for (std::size_t k = 0; k < it.options.size(); ++k) {
      const choice_option& o = it.options[k];
      if (!usable(o, sp.cap.size())) continue;
      const auto r = static_cast<std::size_t>(o.resource);
      if (o.weight > sp.cap[r] || digit[r][static_cast<std::size_t>(s)] < o.weight) continue;
      const std::int64_t after = s - o.weight * sp.stride[r];
      if (next[after] < unreachable && o.cost + next[after] == target) {
        out.pick[static_cast<std::size_t>(i)] = static_cast<int>(k);
        s = after;
        break;
      }
    }
  }
  return out;
}

}  // namespace tessera
