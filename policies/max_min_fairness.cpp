#include "policies/max_min_fairness.hpp"

#include <algorithm>
#include <string>

#include "policies/gavel_family.hpp"

namespace tessera {

max_min_fairness::max_min_fairness(bool efficiency_stage, bool scale_weighted)
    : scale_weighted_(scale_weighted) {
  settings_.efficiency_stage = efficiency_stage;
}

result<allocation> max_min_fairness::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  // The rows start as the throughputs and are normalised in place.
  allocation_lp_input in = lp_input_for(s, lp_.rows());
  policy_throughputs_into(s, in.rows);
  const std::vector<double> eq = equal_share_throughputs(s, in.rows);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const double w = s.jobs[m].spec->priority_weight;
    if (!(w > 0))
      return error{error_kind::invalid_input, "job " + std::to_string(s.jobs[m].spec->id) +
                                                  ": priority weight must be positive"};
    auto& row = in.rows[m];
    if (eq[m] <= 0) {  // runs nowhere: row 0
      std::fill(row.begin(), row.end(), 0.0);
      continue;
    }
    const double gpu_time = scale_weighted_ ? s.jobs[m].spec->scale_factor : 1.0;
    for (std::size_t j = 0; j < in.capacity.size(); ++j) row[j] = gpu_time * row[j] / (w * eq[m]);
  }
  auto r = lp_.solve(in, allocation_objective::max_min, settings_);
  lp_.rows().give(std::move(in.rows));
  if (!r) return r.err();
  allocation out{std::move(r->x)};  // the rows move on; last_ keeps the solve's figures
  last_ = std::move(r.value());
  return out;
}

std::vector<option_spec> max_min_fairness_options() {
  return {
      bool_option(
          "efficiency_stage",
          "1: after the max-min optimum, maximise the sum of normalised throughputs keeping every "
          "job at that optimum; 0: stop at the max-min optimum (Gavel's single LP)",
          true),
      bool_option("scale_weighted",
                  "1: multiply each job's normalised throughput by its scale factor, so "
                  "jobs are equalised in GPU-time (Gavel's code); 0: equalise time share",
                  true)};
}

std::unique_ptr<allocation_policy> make_max_min_fairness(const options& o) {
  return std::make_unique<max_min_fairness>(o.flag("efficiency_stage"), o.flag("scale_weighted"));
}

}  // namespace tessera
