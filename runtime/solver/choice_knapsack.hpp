#pragma once
/// @file choice_knapsack.hpp
/// Exact solver for a multiple-choice knapsack over a few resources, by dynamic programming
/// over the resources' remaining capacities.
///
/// Each item picks at most one of its options (exactly one when it is `forced`); an option
/// uses `weight` units of one resource and costs `cost`; the units picked from resource r sum
/// to at most capacity[r]; the total cost is minimised. Sia's per-round program is this
/// problem (items: jobs; resources: GPU types; weight: the job's GPU count), which CBC solves
/// by branch and bound and, with many jobs of equal cost, slowly (policies/sia.hpp).
///
/// Method: f_i(c) = the least cost of items i..n-1 with capacities c left, over the product of
/// {0..capacity[r]} (S states); f_n = 0, f_i(c) = min(f_{i+1}(c) [none, unless forced],
/// min over options o with weight_o <= c[r_o] of cost_o + f_{i+1}(c - weight_o e_{r_o})).
/// The choice is read forwards from full capacity. Costs are integers, so sums are exact and
/// ties are decided by a rule, not by rounding: an earlier item takes an option before a
/// later one, an item prefers its options in the order given and leaves "none" last.
/// Time O(n x S x options), memory (n + 1) x S costs; `max_cells` bounds (n + 1) x S and the
/// solver declines larger instances (the caller falls back to a MILP solver).

#include <cstdint>
#include <vector>

#include "runtime/solver/milp.hpp"

namespace tessera {

/// One way to place an item: `weight` units of resource `resource` at `cost`.
struct choice_option {
  int resource = 0;
  int weight = 0;
  std::int64_t cost = 0;
};

/// An item: its options (in order of preference on ties) and whether it must take one.
struct choice_item {
  std::vector<choice_option> options;
  bool forced = false;
};

/// How a solve ended.
enum class choice_outcome {
  optimal,     ///< `pick` is an optimum
  infeasible,  ///< the forced items do not fit
  too_large,   ///< (items + 1) x states is above max_cells: not attempted
};

/// The result: per item the index of its option taken, -1 for none.
struct choice_solution {
  choice_outcome outcome = choice_outcome::optimal;
  std::vector<int> pick;
  std::int64_t cost = 0;  ///< total cost of `pick`
};

/// Capacity states of `capacity` (the product of capacity[r] + 1), saturating at
/// INT64_MAX; negative capacities count as 0.
std::int64_t choice_states(const std::vector<int>& capacity);

/// Solves the instance exactly (see the file comment). Options naming a resource out of range
/// or with a negative weight are ignored; costs must stay within +/-2^60 in total.
choice_solution solve_choice_knapsack(const std::vector<int>& capacity,
                                      const std::vector<choice_item>& items,
                                      std::int64_t max_cells = std::int64_t{1} << 22);

/// The same instance as a MILP for CBC (to compare the two): a binary per usable option
/// (cost x `unit`), per item a row "at most one" ("exactly one" when forced), per resource
/// its capacity row.
milp_model choice_knapsack_milp(const std::vector<int>& capacity,
                                const std::vector<choice_item>& items, double unit = 1);

}  // namespace tessera
