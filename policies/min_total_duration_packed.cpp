#include "policies/min_total_duration_packed.hpp"

#include "policies/allocation_lp.hpp"
#include "policies/gavel_family.hpp"

namespace tessera {

result<allocation> min_total_duration_packed::allocate(const snapshot& s) {
  if (auto st = check_snapshot(s); !st) return st.err();
  if (shares_no_gpu(s)) return allocate_as_twin(alone_, s, last_);
  const matrix t = policy_throughputs(s);
  packed_lp_input in;
  in.efficiency_stage = efficiency_stage_;
  in.alone.assign(s.jobs.size(), std::vector<double>(s.cl->types.size(), 0.0));
  in.weight.assign(s.jobs.size(), 0.0);
  for (std::size_t m = 0; m < s.jobs.size(); ++m) {
    const double rem = s.jobs[m].remaining_steps;
    if (!(rem > 0)) continue;  // nothing left to run
    in.weight[m] = 1.0 / rem;
    for (std::size_t k = 0; k < t[m].size(); ++k) in.alone[m][k] = t[m][k] / rem;
  }
  auto r = solve_packed_lp(s, in);
  if (!r) return r.err();
  last_ = std::move(r.value());
  return last_.alloc;
}

std::vector<option_spec> min_total_duration_packed_options() {
  return {bool_option("efficiency_stage",
                      "1: with the makespan fixed, maximise the rate at which the other jobs "
                      "shrink; 0: stop at the makespan optimum (Gavel's single LP)",
                      false)};
}

std::unique_ptr<allocation_policy> make_min_total_duration_packed(const options& o) {
  return std::make_unique<min_total_duration_packed>(o.flag("efficiency_stage"));
}

}  // namespace tessera
