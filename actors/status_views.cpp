#include "actors/status_views.hpp"

#include <algorithm>

namespace tessera::actors {

client_view client_view_of(const scheduler_state& st) {
  return client_view{st.cfg.cl,
                     st.cfg.pol ? st.cfg.pol->name() : "",
                     st.cfg.round_length,
                     st.round,
                     st.run_started,
                     st.stopping,
                     st.jobs,
                     st.by_id,
                     st.nodes,
                     st.failed_ranks,
                     st.recent_rounds,
                     st.plan_histogram,
                     st.dispatch_histogram,
                     st.cfg.liveness,
                     st.cfg.log.get(),
                     st.journal_paused_rounds};
}

namespace {

/// A job's latest status with its copies in the current round, and its placements when asked.
job_status status_of(const job_entry& e, bool placements) {
  job_status s = e.latest.status;
  s.copies = 0;
  for (const auto& pc : e.pieces) s.copies = std::max(s.copies, pc.copy + 1);
  if (placements) s.placements.assign(e.placements.begin(), e.placements.end());
  return s;
}

}  // namespace

std::vector<job_status> job_statuses(const client_view& st, std::int64_t id, bool placements) {
  std::vector<job_status> out;
  if (id >= 0) {
    auto it = st.by_id.find(id);
    if (it != st.by_id.end()) out.push_back(status_of(*it->second, placements));
    return out;
  }
  out.reserve(st.jobs.size());
  for (const auto& e : st.jobs) out.push_back(status_of(e, placements));
  return out;
}

std::vector<job_status> job_page(const client_view& st, std::int64_t after, std::int32_t count,
                                 const std::string& state) {
  std::vector<job_status> out;
  for (auto it = st.by_id.upper_bound(after);
       it != st.by_id.end() && static_cast<std::int32_t>(out.size()) < count; ++it)
    if (state.empty() || it->second->latest.status.state == state)
      out.push_back(status_of(*it->second, false));
  return out;
}

namespace {

/// waiting, alive, lost or left.
std::string node_state(const client_view& st, std::size_t rank) {
  const auto& n = st.nodes[rank];
  if (n.alive) return "alive";
  if (!n.registered) return "waiting";
  const bool lost = std::find(st.failed_ranks.begin(), st.failed_ranks.end(),
                              static_cast<std::int32_t>(rank)) != st.failed_ranks.end();
  return lost ? "lost" : "left";
}

}  // namespace

std::vector<node_status> node_statuses(const client_view& st, caf::actor_clock::time_point now) {
  std::vector<node_status> out;
  for (std::size_t r = 0; r < st.nodes.size(); ++r) {
    const auto& srv = st.cl.servers[r];
    node_status n;
    n.rank = static_cast<std::int32_t>(r);
    n.name = srv.name;
    n.gpu_type = srv.gpu_type;
    n.gpus = srv.gpus;
    n.speed = srv.speed;
    n.host = st.nodes[r].hello.host;
    n.pid = st.nodes[r].hello.pid;
    n.state = node_state(st, r);
    if (st.nodes[r].alive) {
      n.silence = std::chrono::duration<double>(now - st.nodes[r].last_seen).count();
      n.loss_bound = st.nodes[r].gaps.bound(st.liveness);
    }
    out.push_back(std::move(n));
  }
  for (const auto& e : st.jobs)
    for (const auto& pc : e.pieces)
      if (pc.rank >= 0 && pc.rank < static_cast<int>(out.size()))
        out[pc.rank].assignment.push_back({st.round, e.spec.spec.id, pc.copy, pc.rank, pc.gpus});
  return out;
}

std::vector<round_status> round_statuses(const client_view& st, std::int32_t limit) {
  const std::size_t n =
      std::min<std::size_t>(st.recent_rounds.size(), static_cast<std::size_t>(std::max(0, limit)));
  return {st.recent_rounds.end() - static_cast<std::ptrdiff_t>(n), st.recent_rounds.end()};
}

cluster_status cluster_of(const client_view& st, double now) {
  cluster_status c;
  c.policy = st.policy;
  c.round = st.round;
  c.round_length = st.round_length;
  c.uptime = st.run_started ? now : 0;
  c.nodes = static_cast<std::int32_t>(st.nodes.size());
  std::map<std::string, int> gpus_of_type, busy_of_type;
  for (std::size_t r = 0; r < st.nodes.size(); ++r) {
    const auto& srv = st.cl.servers[r];
    c.gpus += srv.gpus;
    ++c.nodes_by_state[node_state(st, r)];
    if (st.nodes[r].alive) gpus_of_type[srv.gpu_type] += srv.gpus;
  }
  for (const auto& e : st.jobs) {
    const auto& s = e.latest.status;
    ++c.jobs[s.state];
    c.steps_total += s.summary.steps;
    c.throughput += s.steps_per_second;  // 0 unless running
    for (const auto& pc : e.pieces) busy_of_type[st.cl.servers[pc.rank].gpu_type] += pc.gpus;
  }
  for (const auto& [type, gpus] : gpus_of_type)
    c.utilisation[type] = gpus > 0 ? static_cast<double>(busy_of_type[type]) / gpus : 0.0;
  c.shutting_down = st.stopping;
  c.rounds_total = st.round + 1;
  c.round_seconds = st.plan_seconds;
  c.dispatch_seconds = st.dispatch_seconds;
  if (st.log) {
    const auto stats = st.log->stats();
    c.journal.present = true;
    c.journal.error = st.log->trouble();
    c.journal.writable = c.journal.error.empty();
    c.journal.held_records = static_cast<std::int64_t>(stats.held_records);
    c.journal.write_errors = static_cast<std::int64_t>(stats.write_errors);
    c.journal.records = static_cast<std::int64_t>(stats.file_records);
    c.journal.bytes = static_cast<std::int64_t>(stats.file_bytes);
    c.journal.paused_rounds = st.journal_paused_rounds;
  }
  return c;
}

}  // namespace tessera::actors
