#include "policies/fifo.hpp"

#include <string>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"

namespace tessera {

namespace {

/// True when type j is a better pick than type `pick` for a job with throughputs `t_m`, with
/// `free` GPUs still unallocated per type; a tie keeps `pick` (the lower index).
bool prefer(fifo_choice choice, const std::vector<double>& t_m, const std::vector<int>& free, int j,
            int pick) {
  switch (choice) {
    case fifo_choice::fastest:
      return t_m[j] > t_m[pick];
    case fifo_choice::most_free:
      break;
  }
  return free[j] > free[pick];
}

}  // namespace

result<allocation> fifo::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  const int n = static_cast<int>(s.jobs.size());
  const int k = static_cast<int>(s.cl->types.size());
  const matrix t = policy_throughputs(s);
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
      if (pick < 0 || prefer(choice_, t[m], free, j, pick)) pick = j;
    }
    if (!can_ever) continue;  // would block the queue forever
    if (pick < 0) break;      // head of the queue waits; so does everyone behind it
    a.x[m][pick] = 1.0;
    free[pick] -= scale;
  }
  return a;
}

std::vector<option_spec> fifo_options() { return {}; }

std::unique_ptr<allocation_policy> make_fifo(const options&, fifo_choice choice) {
  return std::make_unique<fifo>(choice);
}

}  // namespace tessera
