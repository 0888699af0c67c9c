/// @file run_report.cpp
/// The summary of a run (launcher/run_report.hpp): its table and its JSON.

#include "launcher/run_report.hpp"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "actors/protocol.hpp"
#include "actors/record_json.hpp"
#include "actors/summary.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"

namespace tessera::cli {

using actors::run_metrics;
using actors::run_settings;
using actors::run_summary;

void print_summary(const run_summary& s, const run_settings& o, const cluster& cl) {
  const std::size_t nodes = cl.servers.size();
  std::ostream& out = std::cout;
  if (s.ok && o.serve) {
    int ended = 0;
    for (const auto& j : s.jobs) ended += j.finished || j.canceled || j.failed ? 1 : 0;
    out << "tessera serve: stopped after " << std::fixed << std::setprecision(2) << s.seconds
        << " s with " << ended << " of " << s.jobs.size() << " jobs ended (" << s.rounds
        << " rounds of " << o.round_length << " s, policy " << o.policy << ", " << nodes
        << " nodes";
  } else if (s.ok)
    out << "tessera run: " << s.jobs.size() << " jobs finished in " << std::fixed
        << std::setprecision(2) << s.seconds << " s (" << s.rounds << " rounds of "
        << o.round_length << " s, policy " << o.policy << ", " << nodes << " nodes";
  else
    out << "tessera run: FAILED after " << std::fixed << std::setprecision(2) << s.seconds << " s ("
        << s.rounds << " rounds): " << s.error << " (policy " << o.policy;
  if (!s.failed_ranks.empty()) {
    out << "; lost node ranks";
    for (auto r : s.failed_ranks) out << ' ' << r;
  }
  out << ")\n";
  out << std::left << std::setw(6) << "job" << std::setw(20) << "kind" << std::right
      << std::setw(10) << "JCT (s)" << std::setw(8) << "steps" << std::setw(10) << "loss"
      << std::setw(10) << "accuracy" << std::setw(10) << "restarts" << std::setw(8) << "rounds"
      << std::setw(8) << "copies" << '\n';
  for (const auto& j : s.jobs) {
    out << std::left << std::setw(6) << j.id << std::setw(20) << j.kind << std::right
        << std::setw(10);
    if (j.finished)
      out << std::setprecision(2) << j.jct;
    else
      out << (j.canceled ? "cancelled" : j.failed ? "failed" : "-");
    out << std::setw(8) << j.steps << std::setw(10) << std::setprecision(4) << j.loss
        << std::setw(10) << j.accuracy << std::setw(10) << j.restarts << std::setw(8) << j.rounds
        << std::setw(8) << j.max_copies << (j.reached_target ? "  (target loss)" : "") << '\n';
  }
  for (const auto& j : s.jobs)
    if (j.failed) out << "job " << j.id << " failed: " << j.failure << '\n';
  out << "schedule metrics (computed as in simulation):\n";
  print_metrics_table(out, {run_metrics(s, o.policy, cl.total_gpus())}, time_unit::seconds);
  if (!o.checkpoint_dir.empty()) {
    out << "checkpoints: " << o.checkpoint_dir;
    if (s.checkpoint_fallbacks + s.restarts_from_scratch + s.checkpoint_pauses > 0)
      out << " (" << s.checkpoint_fallbacks << " fallbacks, " << s.restarts_from_scratch
          << " restarts from scratch, " << s.checkpoint_pauses << " pauses)";
    out << '\n';
  }
}

nlohmann::json to_json(const run_summary& s, const run_settings& o, const cluster& cl) {
  const std::size_t nodes = cl.servers.size();
  nlohmann::json j;
  j["ok"] = s.ok;
  j["error"] = s.error;
  j["policy"] = o.policy;
  j["nodes"] = nodes;
  j["round_length"] = o.round_length;
  j["rounds"] = s.rounds;
  j["seconds"] = s.seconds;
  j["failed_ranks"] = s.failed_ranks;
  j["dispatch_latency"] = s.dispatch_latency;
  j["plan_seconds"] = s.plan_seconds;
  j["messages"] = s.messages;
  j["dropped"] = s.dropped;
  j["refused"] = s.refused;
  j["joins"] = s.joins;
  j["registration_seconds"] = s.registration_seconds;
  j["scheduler_stalled_seconds"] = s.stalled_seconds;
  j["checkpoint_dir"] = o.checkpoint_dir;
  j["checkpoint_fallbacks"] = s.checkpoint_fallbacks;
  j["restarts_from_scratch"] = s.restarts_from_scratch;
  j["checkpoint_pauses"] = s.checkpoint_pauses;
  std::ostringstream m;
  write_metrics_json(m, {run_metrics(s, o.policy, cl.total_gpus())});
  j["metrics"] = nlohmann::json::parse(m.str()).at(0);
  j["jobs"] = nlohmann::json::array();
  for (const auto& x : s.jobs) j["jobs"].push_back(actors::json_of_fields<nlohmann::json>(x));
  return j;
}

int report_run(const run_summary& sum, const run_settings& o, const cluster& cl) {
  if (!o.quiet) print_summary(sum, o, cl);
  if (!sum.ok && o.quiet) std::cerr << "tessera: run failed: " << sum.error << '\n';
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << to_json(sum, o, cl).dump(2) << '\n';
    if (!f) std::cerr << "tessera: cannot write " << o.json_out << '\n';
  }
  return sum.ok ? exit_code::ok : exit_code::failed;
}

}  // namespace tessera::cli
