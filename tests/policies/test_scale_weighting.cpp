// Weighting by scale factor in Gavel's fairness policies: max-min fairness and
// finish-time fairness equalise GPU-time by default, time share with the option off.
#include <catch2/catch.hpp>

#include <memory>
#include <random>

#include "gavel_fixtures.hpp"
#include "policies/finish_time_fairness.hpp"
#include "policies/gavel_family.hpp"
#include "policies/max_min_fairness.hpp"
#include "policies/type_blind.hpp"

using namespace tessera;
using tessera::test::gavel_fixture;

namespace {

/// One type of 4 GPUs; four 1-GPU jobs (0-3) and one 4-GPU job (4), all at 1 step/s, fresh.
/// Weighted (GPU-time): each 1-GPU job gets t, the 4-GPU job t/4, and 4 t + 4 (t/4) = 4 GPUs
/// gives t = 0.8: x = 0.8 and 0.2. Unweighted (time share): all equal, 4 t + 4 t = 4 gives
/// 0.5. The capacity row is tight at either optimum, so the efficiency stage cannot move it.
/// Gavel's own MaxMinFairnessPolicyWithPerf (cvxpy, ECOS) gives 0.8 and 0.2 on this case
/// (run from scripts/peer_gavel.sh's venv; docs/benchmarks/gavel-fidelity.md, "LAS weighted
/// by scale factor").
void four_small_one_wide(gavel_fixture& fx, double steps = 1000) {
  fx.add_type("a", 4);
  for (int i = 0; i < 4; ++i) fx.add_job({1.0}, 1, steps);
  fx.add_job({1.0}, 4, steps);
  fx.finish();
}

}  // namespace

TEST_CASE("max_min_fairness: weighted by scale factor, golden", "[policies][scale_weight]") {
  gavel_fixture fx;
  four_small_one_wide(fx);
  for (bool efficiency : {false, true}) {
    INFO("efficiency stage " << efficiency);
    max_min_fairness weighted(efficiency, true);
    auto a = weighted.allocate(fx.snap);
    REQUIRE(a.ok());
    for (int m = 0; m < 4; ++m) CHECK(a->x[m][0] == Approx(0.8));
    CHECK(a->x[4][0] == Approx(0.2));
    max_min_fairness plain(efficiency, false);
    auto b = plain.allocate(fx.snap);
    REQUIRE(b.ok());
    for (int m = 0; m < 5; ++m) CHECK(b->x[m][0] == Approx(0.5));
  }
}

TEST_CASE("max_min_fairness: the option reaches the policy", "[policies][scale_weight]") {
  gavel_fixture fx;
  four_small_one_wide(fx);
  for (bool on : {false, true}) {
    auto o =
        validate_options(max_min_fairness_options(), {{"scale_weighted", on ? 1.0 : 0.0}}, "test");
    REQUIRE(o.ok());
    auto p = make_type_blind(make_max_min_fairness(o.value()));
    auto a = p->allocate(fx.snap);
    REQUIRE(a.ok());
    CHECK(a->x[0][0] == Approx(on ? 0.8 : 0.5));
    CHECK(a->x[4][0] == Approx(on ? 0.2 : 0.5));
  }
  auto d = validate_options(max_min_fairness_options(), {}, "test");
  REQUIRE(d.ok());
  CHECK(d->flag("scale_weighted"));  // Gavel's weighting is the default
}

TEST_CASE("max_min_fairness: weighted time share ratio is the scale ratio",
          "[policies][scale_weight]") {
  // Property: on one type with more demand than GPUs, a 1-GPU and an s-GPU job with equal
  // throughputs, both below a full row, get time shares in the ratio s weighted and 1
  // unweighted; random cluster sizes, throughputs and scales.
  std::mt19937 rng(15);
  const int scales[] = {2, 4, 8};
  for (int trial = 0; trial < 40; ++trial) {
    const int s = scales[rng() % 3];
    const int gpus = s + static_cast<int>(rng() % 8);
    const double tput = 0.5 + (rng() % 100) / 10.0;
    gavel_fixture fx;
    fx.add_type("a", gpus);
    const int small = gpus + 1;  // enough 1-GPU jobs that none gets a full row
    for (int i = 0; i < small; ++i) fx.add_job({tput}, 1);
    fx.add_job({tput}, s);
    fx.finish();
    INFO("trial " << trial << " scale " << s << " gpus " << gpus);
    for (bool weighted : {false, true}) {
      max_min_fairness p(true, weighted);
      auto a = p.allocate(fx.snap);
      REQUIRE(a.ok());
      const double x_small = a->x[0][0], x_wide = a->x[small][0];
      REQUIRE(x_wide > 0);
      CHECK(x_small / x_wide == Approx(weighted ? s : 1.0).epsilon(1e-5));  // slack 1e-6
    }
  }
}

TEST_CASE("finish_time_fairness: isolated share of 1/M of the GPUs, golden",
          "[policies][scale_weight]") {
  // Same jobs, fresh (elapsed 0, rem = total), so rho_m = f_m / x_m. gpu_share on: G/M = 0.8
  // GPUs each, f = 0.8 for the 1-GPU jobs and 0.2 for the 4-GPU job (Gavel's IsolatedPolicy);
  // equal rho and a full GPU row give x = 0.8 and 0.2, rho = 1. Off: f = G / sum s = 0.5 for
  // all, x = 0.5 each, rho = 1. Gavel's FinishTimeFairnessPolicyWithPerf (cvxpy, ECOS) gives
  // 0.8 and 0.2 on this case.
  gavel_fixture fx;
  four_small_one_wide(fx);
  for (bool on : {false, true}) {
    INFO("gpu_share " << on);
    finish_time_fairness p(true, 1e-6, 60, on);
    auto a = p.allocate(fx.snap);
    REQUIRE(a.ok());
    CHECK(a->x[0][0] == Approx(on ? 0.8 : 0.5).epsilon(1e-4));
    CHECK(a->x[4][0] == Approx(on ? 0.2 : 0.5).epsilon(1e-4));
    CHECK(p.last_rho() == Approx(1.0).epsilon(1e-4));
  }
}

TEST_CASE("gavel equal share: fractions by GPUs fit the cluster", "[policies][scale_weight]") {
  // Property: sum_m s_m f_m <= G with the share by GPUs, and each f_m in (0, 1].
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    auto fx = test::random_fixture(rng);
    const auto& s = fx->snap;
    double gpus = 0, used = 0;
    for (const auto& ty : s.cl->types) gpus += ty.gpus;
    const auto f = equal_share_fractions(s, true);
    REQUIRE(f.size() == s.jobs.size());
    for (std::size_t m = 0; m < f.size(); ++m) {
      CHECK(f[m] > 0);
      CHECK(f[m] <= 1.0);
      used += s.jobs[m].spec->scale_factor * f[m];
      CHECK(f[m] == Approx(std::min(1.0, gpus / f.size() / s.jobs[m].spec->scale_factor)));
    }
    CHECK(used <= gpus + 1e-9);
  }
}
