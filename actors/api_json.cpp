#include "actors/api_json.hpp"

#include <cstdio>
#include <sstream>

#include "actors/record_json.hpp"

namespace tessera::actors {

namespace {

using ojson = nlohmann::ordered_json;

ojson placements_json(const std::vector<placement>& ps, bool with_round) {
  ojson a = ojson::array();
  for (const auto& p : ps) {
    ojson e;
    if (with_round) e["round"] = p.round;
    e["job"] = p.job;
    e["copy"] = p.copy;
    e["rank"] = p.rank;
    e["gpus"] = p.gpus;
    a.push_back(std::move(e));
  }
  return a;
}

/// A number as Prometheus reads it (shortest round-trip form; +Inf for infinity).
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

/// A label value with Prometheus' escapes (backslash, quote, newline).
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void histogram_text(std::ostringstream& o, const char* name, const char* help,
                    const latency_histogram& h) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  for (std::size_t i = 0; i < h.bounds.size(); ++i)
    o << name << "_bucket{le=\"" << number(h.bounds[i]) << "\"} " << h.counts[i] << '\n';
  o << name << "_bucket{le=\"+Inf\"} " << h.count << '\n';
  o << name << "_sum " << number(h.sum) << '\n' << name << "_count " << h.count << '\n';
}

}  // namespace

ojson to_json(const job_status& j, bool placements) {
  ojson o = json_of_fields<ojson>(j.summary);
  for (const char* per_rank : {"planned_gpu_seconds", "busy_gpu_seconds", "throughput"})
    o.erase(per_rank);  // a run's summary has them; clients are shown the job's totals
  o["state"] = j.state;
  o["steps_per_second"] = j.steps_per_second;
  o["copies"] = j.copies;
  o["gpu_seconds"] = j.gpu_seconds;
  if (placements) o["placements"] = placements_json(j.placements, true);
  return o;
}

ojson to_json(const node_status& n) {
  ojson o;
  o["rank"] = n.rank;
  o["name"] = n.name;
  o["gpu_type"] = n.gpu_type;
  o["gpus"] = n.gpus;
  o["speed"] = n.speed;
  o["host"] = n.host;
  o["pid"] = n.pid;
  o["state"] = n.state;
  o["silence"] = n.silence;
  o["loss_bound"] = n.loss_bound;
  o["assignment"] = placements_json(n.assignment, false);
  return o;
}

ojson to_json(const round_status& r) {
  ojson o;
  o["round"] = r.round;
  o["start"] = r.start;
  o["length"] = r.length;
  o["busy_gpus"] = r.busy_gpus;
  o["idle_gpus"] = r.idle_gpus;
  o["active_jobs"] = r.active_jobs;
  o["waiting_jobs"] = r.waiting_jobs;
  o["plan_seconds"] = r.plan_seconds;
  o["dispatch_latency"] = r.dispatch_latency;
  o["assignments"] = placements_json(r.assignments, false);
  return o;
}

ojson to_json(const cluster_status& c) {
  ojson o;
  o["policy"] = c.policy;
  o["round"] = c.round;
  o["round_length"] = c.round_length;
  o["uptime"] = c.uptime;
  o["nodes_alive"] = c.nodes_by_state.count("alive") ? c.nodes_by_state.at("alive") : 0;
  o["nodes"] = c.nodes;
  o["gpus"] = c.gpus;
  o["jobs"] = ojson::object();
  for (const auto& [state, n] : c.jobs) o["jobs"][state] = n;
  o["utilisation"] = ojson::object();
  for (const auto& [type, u] : c.utilisation) o["utilisation"][type] = u;
  o["steps_total"] = c.steps_total;
  o["throughput"] = c.throughput;
  o["shutting_down"] = c.shutting_down;
  if (const auto& j = c.journal; j.present)
    o["journal"] = {{"writable", j.writable},
                    {"error", j.error},
                    {"held_records", j.held_records},
                    {"write_errors", j.write_errors},
                    {"paused_rounds", j.paused_rounds},
                    {"records", j.records},
                    {"bytes", j.bytes}};
  return o;
}

std::string metrics_text(const cluster_status& c,
                         const std::vector<http::request_count>& requests) {
  std::ostringstream o;
  o << "# HELP tessera_jobs Jobs by state.\n# TYPE tessera_jobs gauge\n";
  for (const char* s :
       {"queued", "running", "preempted", "cancelling", "finished", "failed", "cancelled"}) {
    auto it = c.jobs.find(s);
    o << "tessera_jobs{state=\"" << s << "\"} " << (it == c.jobs.end() ? 0 : it->second) << '\n';
  }
  o << "# HELP tessera_nodes Nodes by state.\n# TYPE tessera_nodes gauge\n";
  for (const char* s : {"waiting", "alive", "lost", "left"}) {
    auto it = c.nodes_by_state.find(s);
    o << "tessera_nodes{state=\"" << s << "\"} " << (it == c.nodes_by_state.end() ? 0 : it->second)
      << '\n';
  }
  o << "# HELP tessera_rounds_total Rounds planned.\n# TYPE tessera_rounds_total counter\n"
    << "tessera_rounds_total " << c.rounds_total << '\n';
  histogram_text(o, "tessera_round_seconds", "Time to plan and lay out a round.", c.round_seconds);
  histogram_text(o, "tessera_dispatch_latency_seconds",
                 "From a round's orders to every copy running.", c.dispatch_seconds);
  o << "# HELP tessera_gpu_utilisation Share of each GPU type's GPUs assigned this round.\n"
    << "# TYPE tessera_gpu_utilisation gauge\n";
  for (const auto& [type, u] : c.utilisation)
    o << "tessera_gpu_utilisation{type=\"" << label(type) << "\"} " << number(u) << '\n';
  o << "# HELP tessera_steps_total Training steps confirmed by checkpoints.\n"
    << "# TYPE tessera_steps_total counter\ntessera_steps_total " << c.steps_total << '\n'
    << "# HELP tessera_throughput_steps_per_second Steps per second over running jobs.\n"
    << "# TYPE tessera_throughput_steps_per_second gauge\n"
    << "tessera_throughput_steps_per_second " << number(c.throughput) << '\n';
  if (const auto& j = c.journal; j.present)
    o << "# HELP tessera_journal_writable 1 while the journal's writes succeed, else 0.\n"
      << "# TYPE tessera_journal_writable gauge\ntessera_journal_writable " << (j.writable ? 1 : 0)
      << "\n# HELP tessera_journal_write_errors_total Journal batches the disk refused.\n"
      << "# TYPE tessera_journal_write_errors_total counter\ntessera_journal_write_errors_total "
      << j.write_errors
      << "\n# HELP tessera_journal_held_records State changes waiting for the disk.\n"
      << "# TYPE tessera_journal_held_records gauge\ntessera_journal_held_records "
      << j.held_records
      << "\n# HELP tessera_journal_paused_rounds_total Rounds the jobs waited for the journal.\n"
      << "# TYPE tessera_journal_paused_rounds_total counter\n"
      << "tessera_journal_paused_rounds_total " << j.paused_rounds
      << "\n# HELP tessera_journal_bytes Bytes of the journal file.\n"
      << "# TYPE tessera_journal_bytes gauge\ntessera_journal_bytes " << j.bytes << '\n';
  o << "# HELP tessera_api_requests_total API requests answered, by method and code.\n"
    << "# TYPE tessera_api_requests_total counter\n";
  for (const auto& r : requests)
    o << "tessera_api_requests_total{method=\"" << label(r.method) << "\",code=\"" << r.code
      << "\"} " << r.count << '\n';
  return o.str();
}

}  // namespace tessera::actors
