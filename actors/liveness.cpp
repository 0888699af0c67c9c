// Phi-accrual loss detection (actors/liveness.hpp).
#include "actors/liveness.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::actors {

liveness_settings liveness_for(double timeout, double ceiling) {
  liveness_settings s;
  s.floor = timeout;
  s.ceiling = ceiling > 0 ? std::max(ceiling, timeout) : std::max(20.0, 10 * timeout);
  return s;
}

double upper_quantile_of_phi(double phi) {
  // P(Z > z) = erfc(z / sqrt 2) / 2, decreasing in z: bisect on [0, 40].
  const double target = std::pow(10.0, -phi);
  double lo = 0, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erfc(mid / std::sqrt(2.0)) / 2 > target ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

void heartbeat_gaps::arrived(double t) {
  if (seen_) {
    const double gap = std::max(0.0, t - last_);
    gaps_.push_back(gap);
    sum_ += gap;
    sum_sq_ += gap * gap;
    if (gaps_.size() > window) {
      sum_ -= gaps_.front();
      sum_sq_ -= gaps_.front() * gaps_.front();
      gaps_.pop_front();
    }
  }
  last_ = std::max(last_, t);
  seen_ = true;
}

void heartbeat_gaps::credit(double by) {
  if (seen_ && by > 0) last_ += by;
}

double heartbeat_gaps::mean() const {
  return gaps_.empty() ? 0 : sum_ / static_cast<double>(gaps_.size());
}

double heartbeat_gaps::sd() const {
  if (gaps_.size() < 2) return 0;
  const double n = static_cast<double>(gaps_.size());
  const double m = sum_ / n;
  // Running sums drift by rounding: never below zero.
  return std::sqrt(std::max(0.0, (sum_sq_ - n * m * m) / (n - 1)));
}

double heartbeat_gaps::bound(const liveness_settings& s) const {
  if (gaps_.size() < 2) return s.floor;
  const double b = mean() + upper_quantile_of_phi(s.phi) * std::max(sd(), s.min_sd);
  return std::clamp(b, s.floor, std::max(s.floor, s.ceiling));
}

double heartbeat_gaps::suspicion(double silence, const liveness_settings& s) const {
  if (gaps_.size() < 2) return 0;
  const double z = (silence - mean()) / std::max(sd(), s.min_sd);
  const double tail = std::erfc(z / std::sqrt(2.0)) / 2;
  return tail <= 0 ? 300 : -std::log10(tail);  // 300: beyond a double's smallest tail
}

}  // namespace tessera::actors
