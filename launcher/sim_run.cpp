#include "launcher/sim_run.hpp"

#include <cmath>
#include <fstream>

#include "policies/registry.hpp"

namespace tessera::cli {

int jobs_to_finish(const std::vector<job>& jobs, const sim_config& cfg) {
  const bool windowed = cfg.window_begin >= 0 && cfg.window_end >= cfg.window_begin;
  if (!windowed || !cfg.stop_after_window) return static_cast<int>(jobs.size());
  int n = 0;
  for (const auto& j : jobs)
    if (j.id <= cfg.window_end) ++n;
  return n;
}

result<schedule_result> simulate_policy(const sim_inputs& in, const std::string& policy,
                                        progress_meter& meter, const std::string& unit,
                                        timeline_recorder* timeline) {
  auto pol = make_policy(policy, in.policy_args, "--policy-arg");
  if (!pol) {
    meter.done(unit);
    return pol.err();
  }
  const int goal = jobs_to_finish(in.jobs, in.cfg);
  sim_config cfg = in.cfg;
  cfg.timeline = timeline;
  cfg.on_progress = [&](const sim_progress& p) {
    meter.update(unit, sim_fraction(p, goal),
                 std::to_string(p.completed) +
                     " jobs done, t=" + std::to_string(std::lround(p.now / 3600)) + "h");
  };
  auto r = simulate(in.cl, in.table, in.jobs, *pol.value(), cfg);
  meter.done(unit);
  return r;
}

status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  if (!f) return error{error_kind::io, path + ": cannot open for writing"};
  f << text;
  f.close();
  if (!f) return error{error_kind::io, path + ": write failed"};
  return {};
}

}  // namespace tessera::cli
