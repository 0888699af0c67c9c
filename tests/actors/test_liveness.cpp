// The loss detector's arithmetic (actors/liveness.hpp): properties over random heartbeat
// histories, and the normal quantile against a table value.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "actors/liveness.hpp"

using namespace tessera::actors;

TEST_CASE("liveness: the quantile of phi matches the normal table", "[liveness]") {
  // P(Z > 5.6120) = 1.0e-8 and P(Z > 3.0902) = 1.0e-3 (standard normal tables).
  CHECK(upper_quantile_of_phi(8) == Approx(5.6120).margin(1e-3));
  CHECK(upper_quantile_of_phi(3) == Approx(3.0902).margin(1e-3));
  CHECK(upper_quantile_of_phi(1) == Approx(1.2816).margin(1e-3));
}

TEST_CASE(
    "liveness: a bound always lies within [floor, ceiling] and the floor rules until two "
    "gaps are known",
    "[liveness]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const auto s = liveness_for(std::uniform_real_distribution<double>(0.5, 10)(rng));
    heartbeat_gaps g;
    CHECK(g.bound(s) == s.floor);
    double t = 0;
    g.arrived(t);
    t += 0.3;
    g.arrived(t);
    CHECK(g.bound(s) == s.floor);  // one gap
    std::exponential_distribution<double> gap(std::uniform_real_distribution<double>(0.05, 5)(rng));
    for (int i = 0; i < 150; ++i) {
      t += gap(rng);
      g.arrived(t);
      const double b = g.bound(s);
      REQUIRE(b >= s.floor);
      REQUIRE(b <= s.ceiling);
    }
    CHECK(g.count() == heartbeat_gaps::window);
  }
}

TEST_CASE("liveness: steady heartbeats give the floor, uneven ones a longer bound", "[liveness]") {
  const auto s = liveness_for(3);
  CHECK(s.ceiling == 30);
  heartbeat_gaps steady, uneven;
  double t = 0;
  for (int i = 0; i < 60; ++i) steady.arrived(t += 0.25);
  CHECK(steady.mean() == Approx(0.25));
  CHECK(steady.sd() == Approx(0).margin(1e-9));
  CHECK(steady.bound(s) == 3);  // 0.25 + 5.6 x 0.1 (the sd floor) is under the floor
  t = 0;
  const double pattern[] = {0.1, 0.1, 2.5};
  for (int i = 0; i < 60; ++i) uneven.arrived(t += pattern[i % 3]);
  const double b = uneven.bound(s);
  CHECK(b == Approx(uneven.mean() + upper_quantile_of_phi(8) * uneven.sd()));
  CHECK(b > 7);
  CHECK(b < 30);
}

TEST_CASE("liveness: suspicion grows with silence and crosses phi at the bound", "[liveness]") {
  const liveness_settings s{0.01, 1000, 8, 0.1};
  heartbeat_gaps g;
  std::mt19937 rng(3);
  std::normal_distribution<double> gap(1.0, 0.3);
  double t = 0;
  for (int i = 0; i < 100; ++i) g.arrived(t += std::max(0.05, gap(rng)));
  double last = -1;
  for (double silence = 0; silence < 10; silence += 0.1) {
    const double phi = g.suspicion(silence, s);
    REQUIRE(phi >= last);
    last = phi;
  }
  const double b = g.bound(s);
  CHECK(g.suspicion(b - 0.01, s) < 8);
  CHECK(g.suspicion(b + 0.01, s) > 8);
}

TEST_CASE("liveness: a credit moves the last arrival, so time the receiver lost is no gap",
          "[liveness]") {
  heartbeat_gaps g;
  g.arrived(0);
  g.arrived(1);
  g.credit(5);  // the receiver could not run for 5 s
  g.arrived(6.5);
  CHECK(g.count() == 2);
  CHECK(g.mean() == Approx(0.75));  // gaps 1 and 0.5, not 1 and 5.5
  heartbeat_gaps none;
  none.credit(3);  // nothing heard yet: nothing to move
  none.arrived(10);
  CHECK(none.count() == 0);
}
