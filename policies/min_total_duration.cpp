#include "policies/min_total_duration.hpp"

#include <string>

#include "policies/gavel_family.hpp"

namespace tessera {

min_total_duration::min_total_duration(bool efficiency_stage) {
  settings_.efficiency_stage = efficiency_stage;
}

result<allocation> min_total_duration::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  const matrix t = policy_throughputs(s);
  allocation_lp_input in = lp_input_for(s, lp_.rows());
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const double rem = s.jobs[m].remaining_steps;
    if (!(rem > 0)) continue;  // nothing left to run
    for (std::size_t j = 0; j < in.capacity.size(); ++j) in.rows[m][j] = t[m][j] / rem;
  }
  auto r = lp_.solve(in, allocation_objective::max_min, settings_);
  lp_.rows().give(std::move(in.rows));
  if (!r) return r.err();
  allocation out{std::move(r->x)};  // the rows move on; last_ keeps the solve's figures
  last_ = std::move(r.value());
  makespan_ = last_.value > 0 ? 1.0 / last_.value : 0.0;
  return out;
}

std::vector<option_spec> min_total_duration_options() {
  return {bool_option("efficiency_stage",
                      "1: with the makespan fixed, maximise the rate at which the other jobs "
                      "shrink; 0: stop at the makespan optimum",
                      true)};
}

std::unique_ptr<allocation_policy> make_min_total_duration(const options& o) {
  return std::make_unique<min_total_duration>(o.flag("efficiency_stage"));
}

}  // namespace tessera
