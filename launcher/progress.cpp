#include "launcher/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace tessera::cli {

std::string duration_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%lds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return buf;
}

std::string progress_text(double fraction, double elapsed_s, int done, int total,
                          const std::string& unit, const std::string& detail, bool bar) {
  const double f = std::clamp(fraction, 0.0, 1.0);
  std::ostringstream os;
  if (bar) {
    constexpr int width = 24;
    const int full = static_cast<int>(f * width);
    os << '[' << std::string(full, '#') << std::string(width - full, '.') << "] ";
  }
  os << static_cast<int>(f * 100) << "% " << done << '/' << total << ' ' << unit << ", elapsed "
     << duration_text(elapsed_s) << ", ETA "
     << (f > 0 ? duration_text(elapsed_s * (1 - f) / f) : std::string("?"));
  if (!detail.empty()) os << " | " << detail;
  return os.str();
}

double sim_fraction(const sim_progress& p, int goal) {
  if (goal <= 0) return 0;
  return std::min(0.99, static_cast<double>(p.completed) / goal);
}

progress_meter::progress_meter(bool enabled, int total, std::string unit, std::ostream& out,
                               bool tty, std::chrono::milliseconds plain_every)
    : enabled_(enabled),
      tty_(tty),
      total_(std::max(total, 1)),
      unit_(std::move(unit)),
      out_(out),
      every_(plain_every),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

progress_meter::progress_meter(bool enabled, int total, std::string unit,
                               std::chrono::milliseconds plain_every)
    : progress_meter(enabled, total, std::move(unit), std::cerr, isatty(fileno(stderr)) != 0,
                     plain_every) {}

progress_meter::~progress_meter() { finish(); }

void progress_meter::update(const std::string& name, double fraction, const std::string& detail) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  running_[name] = {fraction, detail};
  show(false);
}

void progress_meter::done(const std::string& name) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(name);
  ++done_;
  show(false);
}

void progress_meter::skip(int units) {
  std::lock_guard<std::mutex> lock(mu_);
  skipped_ += units;
  done_ += units;
}

/// Writes the current state: at most every 200 ms on a terminal (every_ when shorter), every
/// `every_` otherwise
/// (always when `force`). The ETA counts only the work of this process, not skipped units.
void progress_meter::show(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const auto gap = tty_ ? std::min(every_, std::chrono::milliseconds(200)) : every_;
  if (!force && (shown_ ? now - last_ < gap : now - start_ < gap)) return;
  last_ = now;
  shown_ = true;
  double work = done_ - skipped_;
  for (const auto& [n, r] : running_) work += r.first;
  const int left = total_ - skipped_;
  const double fraction = left > 0 ? work / left : 1.0;
  std::string detail;
  for (const auto& [n, r] : running_) {
    if (detail.size() > 80) {
      detail += " ...";
      break;
    }
    detail += (detail.empty() ? "" : "; ") + n + (r.second.empty() ? "" : " " + r.second);
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const auto text = progress_text(fraction, elapsed, done_, total_, unit_, detail, tty_);
  if (tty_) {
    out_ << "\r\033[K" << text << std::flush;
    dirty_ = true;
  } else {
    out_ << "progress: " << text << '\n' << std::flush;
  }
}

void progress_meter::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (shown_) show(true);
  if (dirty_) out_ << '\n' << std::flush;
  dirty_ = false;
}

}  // namespace tessera::cli
