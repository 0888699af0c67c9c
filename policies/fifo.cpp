#include "policies/fifo.hpp"

#include <string>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"

namespace tessera {

result<allocation> fifo::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s, aware_ ? "fifo_perf" : "fifo"); !st) return st.err();
  const int n = static_cast<int>(s.jobs.size());
  const int k = static_cast<int>(s.cl->types.size());
  const matrix t = policy_throughputs(s, aware_);
  allocation a{std::vector<std::vector<double>>(n, std::vector<double>(k, 0.0))};
  std::vector<int> free(k);
  for (int j = 0; j < k; ++j) free[j] = s.cl->types[j].gpus;
  for (int m = 0; m < n; ++m) {
    const int scale = s.jobs[m].spec->scale_factor;
    bool can_ever = false;
    int pick = -1;
    for (int j = 0; j < k; ++j) {
      if (!(t[m][j] > 0) || s.cl->types[j].gpus < scale) continue;
      can_ever = true;
      if (free[j] < scale) continue;
      const bool better = pick < 0 || (aware_ ? t[m][j] > t[m][pick] : free[j] > free[pick]);
      if (better) pick = j;
    }
    if (!can_ever) continue;  // would block the queue forever
    if (pick < 0) break;      // head of the queue waits; so does everyone behind it
    a.x[m][pick] = 1.0;
    free[pick] -= scale;
  }
  return a;
}

std::vector<option_spec> fifo_options() { return {}; }

std::unique_ptr<allocation_policy> make_fifo(const options&, bool aware) {
  return std::make_unique<fifo>(aware);
}

}  // namespace tessera
