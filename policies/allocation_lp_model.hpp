#pragma once
/// @file allocation_lp_model.hpp
/// The class LP of allocation_lp (policies/allocation_lp.hpp): grouping jobs into classes,
/// building the LP over them, mapping an optimal basis of one such LP onto another (warm
/// starts), the efficiency stage's objective, and the crash from an LP over buckets of
/// classes. Internal to policies/allocation_lp*.cpp: not part of the public API.

#include <vector>

#include "policies/allocation_lp.hpp"
#include "runtime/solver/lp.hpp"

namespace tessera::detail {

/// One class of identical jobs.
struct job_class {
  std::vector<double> a;  ///< coefficients over types (0 = no column)
  int scale = 1;
  int count = 0;
};

/// Where one class sits in a built model.
struct class_layout {
  std::vector<int> col;  ///< column per type, -1 when absent
  int sum_row = -1;      ///< sum_j y <= 1
  int min_row = -1;      ///< sum_j a y - t >= 0 (max_min only)
};

/// A class LP and where its pieces are.
struct built_model {
  lp_model model;
  std::vector<class_layout> layout;
  int t_col = -1;            ///< t (max_min only)
  std::vector<int> cap_row;  ///< capacity row per type
};

/// Starting bases from a crash: for the first stage and, when asked, the efficiency stage.
struct crash_bases {
  lp_basis first;
  lp_basis second;
};

/// The classes of one call's jobs: jobs with identical rows over usable types (a type with
/// fewer GPUs than the job's scale is not usable) and equal scale share one when
/// `aggregate`; `class_of` gives each job's class, -1 for a job with no usable coefficient.
std::vector<job_class> build_classes(const allocation_lp_input& in, bool aggregate,
                                     std::vector<int>& class_of);

/// max_min is invariant to scaling every row by one constant; scales so that the tightest
/// class's best coefficient is 1, which keeps t* of order 1 for CLP's tolerances. Returns the
/// factor divided out.
double normalise_rows(std::vector<job_class>& classes);

/// Builds the class LP: per class its columns (one per usable type), its row-sum row and, for
/// max_min, its objective row; then the t column and one capacity row per type.
built_model build_model(const std::vector<job_class>& classes, const std::vector<double>& capacity,
                        bool maxmin);

/// Maps basis `fb` of model `from` onto model `to`: class c of `to` takes the statuses of
/// class src[c] of `from` (src[c] < 0: columns at zero, rows basic); t and the capacity rows
/// keep theirs. When several classes share a source (a crash from buckets), the first takes
/// the source's statuses as they are and the others a regular version of them, with exactly
/// as many basic variables as the class has rows (dropping the basic columns of least value
/// `fx` first, or making row slacks basic), so that the count of basic variables stays right.
/// A final pass repairs the count anyway (CLP repairs a singular basis by itself, but wants
/// the count right).
lp_basis map_basis(const lp_basis& fb, const std::vector<double>& fx, const built_model& from,
                   const built_model& to, const std::vector<int>& src, int to_columns, int to_rows);

/// Turns a solved max_min model into the efficiency stage: t >= t* (1 - slack), objective
/// sum_c count_c a_c . y_c.
bool set_efficiency_stage(lp_solver& solver, const built_model& b,
                          const std::vector<job_class>& classes, double t_star, double slack);

/// Starting bases for `to` (built from `classes`) from a coarser LP over buckets of classes
/// with nearly equal rows; empty when there are too few classes or they do not bucket well.
crash_bases crash_basis(const std::vector<job_class>& classes, const built_model& to,
                        int to_columns, int to_rows, const std::vector<double>& capacity,
                        bool maxmin, int min_classes, bool efficiency, double slack);

}  // namespace tessera::detail
