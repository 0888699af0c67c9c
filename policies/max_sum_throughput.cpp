#include "policies/max_sum_throughput.hpp"

#include <algorithm>
#include <string>

#include "policies/gavel_family.hpp"

namespace tessera {

result<allocation> max_sum_throughput::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  const matrix t = policy_throughputs(s);
  allocation_lp_input in = lp_input_for(s, lp_.rows());
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const double best = t[m].empty() ? 0.0 : *std::max_element(t[m].begin(), t[m].end());
    if (best <= 0) continue;
    const double scale = normalise_ ? 1.0 / best : 1.0;
    for (std::size_t j = 0; j < in.capacity.size(); ++j) in.rows[m][j] = t[m][j] * scale;
  }
  auto r = lp_.solve(in, allocation_objective::max_sum);
  lp_.rows().give(std::move(in.rows));
  if (!r) return r.err();
  allocation out{std::move(r->x)};  // the rows move on; last_ keeps the solve's figures
  last_ = std::move(r.value());
  return out;
}

std::vector<option_spec> max_sum_throughput_options() {
  return {bool_option("normalise",
                      "1: each job's throughputs over its best (steps of different models are not "
                      "comparable); 0: raw steps/s, as Gavel's code and Sia's port sum them",
                      true)};
}

std::unique_ptr<allocation_policy> make_max_sum_throughput(const options& o) {
  return std::make_unique<max_sum_throughput>(o.flag("normalise"));
}

}  // namespace tessera
