#pragma once
/// @file liveness.hpp
/// When a silent node is lost: a phi-accrual failure detector (Hayashibara et al., "The phi
/// accrual failure detector", SRDS 2004) over the gaps between a node's heartbeats as the
/// scheduler received them, between a floor and a ceiling. A node whose heartbeats have been
/// regular is lost soon after they stop (the floor); one on a busy host, whose heartbeats
/// come late and unevenly, gets a bound that grows with that spread, so a slow node is not
/// mistaken for a dead one. Plain functions of plain numbers: tested without actors.

#include <cstddef>
#include <deque>

namespace tessera::actors {

/// How silence becomes loss; the launcher derives it from `--heartbeat-timeout`.
struct liveness_settings {
  double floor = 3;     ///< seconds of silence never enough (the user's heartbeat time-out)
  double ceiling = 30;  ///< seconds of silence always enough (also CAF's connection time-out)
  /// Suspicion threshold: a node is lost once a live node with its history of gaps would stay
  /// this silent with probability under 10^-phi (8: about 5.6 standard deviations).
  double phi = 8;
  double min_sd = 0.1;  ///< seconds: the gaps' spread is taken as at least this
};

/// The liveness settings of a run whose heartbeat time-out is `timeout` seconds: that is the
/// floor; the ceiling is `ceiling` (raised to the floor), or when 0 ten times the floor and at
/// least 20 s.
liveness_settings liveness_for(double timeout, double ceiling = 0);

/// The standard normal quantile z with P(Z > z) = 10^-phi (bisection on erfc).
double upper_quantile_of_phi(double phi);

/// The gaps between one node's last heartbeats (a window of the latest 100).
class heartbeat_gaps {
 public:
  static constexpr std::size_t window = 100;

  /// A heartbeat received at `t` seconds (any monotonic clock).
  void arrived(double t);
  /// Moves the last arrival `by` seconds later: time the receiver itself could not run
  /// (a starved scheduler) is not the node's silence.
  void credit(double by);
  std::size_t count() const { return gaps_.size(); }
  double mean() const;  ///< mean gap, seconds (0 without gaps)
  double sd() const;    ///< standard deviation of the gaps, seconds (0 with fewer than two)

  /// The silence (seconds since the last heartbeat) after which the node is lost: the mean
  /// gap plus z standard deviations for the threshold phi, within [floor, ceiling]. Before
  /// two gaps are known: the floor.
  double bound(const liveness_settings& s) const;
  /// Suspicion after `silence` seconds: -log10 P(a live node stays this silent), under a
  /// normal model of its gaps (0 before two gaps are known).
  double suspicion(double silence, const liveness_settings& s) const;

 private:
  std::deque<double> gaps_;
  double last_ = 0;
  bool seen_ = false;
  double sum_ = 0, sum_sq_ = 0;
};

}  // namespace tessera::actors
