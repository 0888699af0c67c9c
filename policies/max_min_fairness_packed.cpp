#include "policies/max_min_fairness_packed.hpp"

#include <string>

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"

namespace tessera {

result<allocation> max_min_fairness_packed::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  if (shares_no_gpu(s)) return allocate_as_twin(alone_, s, last_);
  const matrix t = policy_throughputs(s);
  const std::vector<double> eq = equal_share_throughputs(s, t);
  packed_lp_input in;
  in.efficiency_stage = efficiency_stage_;
  in.alone.assign(s.jobs.size(), std::vector<double>(s.cl->types.size(), 0.0));
  in.weight.assign(s.jobs.size(), 0.0);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const job& j = *s.jobs[m].spec;
    if (!(j.priority_weight > 0))
      return error{error_kind::invalid_input,
                   "job " + std::to_string(j.id) + ": priority weight must be positive"};
    if (eq[m] <= 0) continue;  // runs nowhere: takes no part
    in.weight[m] = j.scale_factor / (j.priority_weight * eq[m]);
    for (std::size_t k = 0; k < t[m].size(); ++k) in.alone[m][k] = t[m][k] * in.weight[m];
  }
  auto r = solve_packed_lp(s, in);
  if (!r) return r.err();
  last_ = std::move(r.value());
  return last_.alloc;
}

std::vector<option_spec> max_min_fairness_packed_options() {
  return {bool_option("efficiency_stage",
                      "1: after the max-min optimum, maximise the sum of normalised "
                      "throughputs keeping every job at that optimum; 0: stop at the optimum",
                      true)};
}

std::unique_ptr<allocation_policy> make_max_min_fairness_packed(const options& o) {
  return std::make_unique<max_min_fairness_packed>(o.flag("efficiency_stage"));
}

}  // namespace tessera
