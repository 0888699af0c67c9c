#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <set>

#include "runtime/snapshot_builder.hpp"

namespace tessera::actors {

namespace {

using clock_type = std::chrono::steady_clock;

using round_tick_atom = caf::atom_constant<caf::atom("rtick")>;      // round time is up
using round_deadline_atom = caf::atom_constant<caf::atom("rdeadline")>;  // reports overdue
using hb_check_atom = caf::atom_constant<caf::atom("hbcheck")>;      // heartbeat scan
using reg_timeout_atom = caf::atom_constant<caf::atom("regtimeout")>;  // registration overdue
using run_timeout_atom = caf::atom_constant<caf::atom("runtimeout")>;  // max_seconds passed
using arrival_atom = caf::atom_constant<caf::atom("arrival")>;       // next arrival is due
using refused_atom = caf::atom_constant<caf::atom("refused")>;       // a node was refused

using self_ptr = caf::stateful_actor<scheduler_state>*;

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(std::max(0.0, s)));
}

double elapsed(const scheduler_state& st) {
  return std::chrono::duration<double>(clock_type::now() - st.t0).count();
}

std::string checkpoint_path(const scheduler_config& cfg, std::int64_t job) {
  return (std::filesystem::path(cfg.checkpoint_dir) / ("job-" + std::to_string(job) + ".ckpt"))
      .string();
}

tracked_job make_tracked(const run_job& rj, std::size_t ranks) {
  tracked_job t;
  t.spec = rj;
  t.planned.assign(ranks, 0.0);
  t.busy.assign(ranks, 0.0);
  t.throughput.assign(ranks, 0.0);
  return t;
}

tracked_job* find_job(scheduler_state& st, std::int64_t id) {
  for (auto& j : st.jobs)
    if (j.spec.spec.id == id) return &j;
  return nullptr;
}

/// Ends the run: shuts the live nodes down, sends the summary, quits.
void finish(self_ptr self, bool ok, const std::string& why) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  run_summary sum;
  sum.ok = ok;
  sum.error = why;
  sum.rounds = st.round + 1;
  sum.seconds = elapsed(st);
  sum.failed_ranks = st.failed_ranks;
  sum.dispatch_latency = st.dispatch_latency;
  sum.messages = st.messages;
  sum.flood_messages = st.flood;
  sum.flood_seconds = st.flood > 0 ? st.flood_last - st.flood_first : 0;
  for (const auto& j : st.jobs) {
    job_summary js;
    js.id = j.spec.spec.id;
    js.kind = j.spec.kind;
    js.finished = j.finished;
    js.canceled = j.canceled;
    js.arrival = j.spec.spec.arrival;
    js.finish = j.finish;
    js.jct = j.finished ? j.finish - j.spec.spec.arrival : -1;
    js.steps = j.step;
    js.loss = j.loss;
    js.accuracy = j.accuracy;
    js.restarts = j.restarts;
    js.lost_rounds = j.lost_rounds;
    js.regressions = j.regressions;
    js.planned_gpu_seconds = j.planned;
    js.busy_gpu_seconds = j.busy;
    js.throughput = j.throughput;
    js.final_rank = j.last_rank;
    js.final_round_busy = j.last_busy;
    js.rounds = j.rounds;
    js.max_copies = j.max_copies;
    js.reached_target = j.reached_target;
    sum.jobs.push_back(std::move(js));
  }
  const std::int32_t code = ok ? 0 : 1;
  for (auto& n : st.nodes)
    if (n.alive) self->send(n.handle, shutdown_atom::value, code);
  if (st.listener) self->send(st.listener, std::move(sum));
  self->quit();
}

void start_round(self_ptr self);

/// Marks a node lost: its copies' progress this round is gone and they are replanned.
void node_lost(self_ptr self, int rank, const std::string& why) {
  auto& st = self->state;
  auto& n = st.nodes[rank];
  if (!n.alive) return;
  n.alive = false;
  st.failed_ranks.push_back(rank);
  std::cerr << "tessera: node rank " << rank << " (" << n.hello.host << ", pid " << n.hello.pid
            << ") lost: " << why << "; its copies resume from their last checkpoints\n";
  for (auto& j : st.jobs)
    if (st.round_open && !j.reported &&
        std::find(j.copy_ranks.begin(), j.copy_ranks.end(), rank) != j.copy_ranks.end()) {
      ++j.lost_rounds;
      j.round_rank = -1;
      j.copy_ranks.clear();
    }
  ++st.job_set_version;
  st.have_last = false;
  st.pending.erase(rank);
  if (std::none_of(st.nodes.begin(), st.nodes.end(), [](const node_record& r) { return r.alive; })) {
    finish(self, false, "every node was lost");
    return;
  }
  if (st.round_open && st.pending.empty() && st.timer_fired) {
    st.round_open = false;
    start_round(self);
  }
}

/// Starts the next round when the current one's time is up and every live node reported.
void maybe_advance(self_ptr self) {
  auto& st = self->state;
  if (st.done || !st.round_open || !st.timer_fired || !st.pending.empty()) return;
  st.round_open = false;
  start_round(self);
}

void start_round(self_ptr self) {
  auto& st = self->state;
  if (st.done) return;
  const auto& cfg = st.cfg;
  const double now = elapsed(st);
  // Admit arrivals.
  for (auto& j : st.jobs)
    if (!j.arrived && j.spec.spec.arrival <= now + 1e-9) {
      j.arrived = true;
      ++st.job_set_version;
    }
  std::vector<tracked_job*> active;
  double next_arrival = -1;
  for (auto& j : st.jobs) {
    if (j.finished || j.canceled) continue;
    if (j.arrived)
      active.push_back(&j);
    else if (next_arrival < 0 || j.spec.spec.arrival < next_arrival)
      next_arrival = j.spec.spec.arrival;
  }
  if (active.empty()) {
    if (next_arrival < 0) {
      finish(self, true, "");
      return;
    }
    self->delayed_send(self, seconds(next_arrival - now), arrival_atom::value);
    return;
  }
  std::stable_sort(active.begin(), active.end(), [](const tracked_job* a, const tracked_job* b) {
    if (a->spec.spec.arrival != b->spec.spec.arrival)
      return a->spec.spec.arrival < b->spec.spec.arrival;
    return a->spec.spec.id < b->spec.spec.id;
  });

  // The cluster of live nodes; a change invalidates the last plan and cached allocations.
  std::vector<int> live_ranks;
  std::vector<server> servers;
  for (std::size_t r = 0; r < st.nodes.size(); ++r)
    if (st.nodes[r].alive) {
      live_ranks.push_back(static_cast<int>(r));
      servers.push_back(cfg.cl.servers[r]);
    }
  if (live_ranks != st.live_ranks) {
    st.live_ranks = live_ranks;
    st.live = make_cluster(std::move(servers));
    st.have_last = false;
    ++st.job_set_version;
    for (auto& j : st.jobs) j.last_type = -1;
  }
  const cluster& live = st.live;

  // Snapshot: per-type throughput is the measured one where a node of the type reported,
  // else the model's: step_time at speed 1.0, scaled by the type's mean speed factor.
  std::vector<job_accounting> acc;
  acc.reserve(active.size());
  for (auto* j : active) {
    job_accounting a;
    a.spec = &j->spec.spec;
    a.steps_done = static_cast<double>(j->step);
    a.run_time = j->run_time;
    a.attained_service = j->gpu_seconds;
    a.last_type = j->last_type;
    a.throughput.assign(live.types.size(), 0.0);
    for (std::size_t k = 0; k < live.types.size(); ++k) {
      if (live.types[k].gpus < j->spec.spec.scale_factor) continue;
      auto m = j->measured.find(live.types[k].name);
      a.throughput[k] = m != j->measured.end() && m->second > 0
                            ? m->second
                            : live.types[k].mean_speed / j->spec.step_time;
    }
    acc.push_back(std::move(a));
  }
  snapshot s = build_snapshot(now, cfg.round_length, live, acc,
                              st.have_last ? &st.last_plan : nullptr, st.job_set_version);
  s.copy_limit = cfg.can_fork ? 0 : 1;
  auto planned = cfg.pol->plan(s);
  if (!planned) {
    finish(self, false, "policy " + cfg.pol->name() + " failed: " + planned.err().message);
    return;
  }
  round_plan p = std::move(planned.value());
  p.start = now;
  p.length = cfg.round_length;
  if (auto v = validate_plan(live, p, cfg.pol->name()); !v) {
    finish(self, false, v.err().message);
    return;
  }

  ++st.round;
  st.round_open = true;
  st.timer_fired = false;
  st.round_t0 = now;
  st.started = 0;
  st.expected_starts = 0;
  std::map<int, round_orders> orders;
  for (int r : live_ranks) {
    orders[r].round = st.round;
    orders[r].length = cfg.round_length;
  }
  for (auto& j : st.jobs) {
    j.round_rank = -1;
    j.round_gpus = 0;
    j.copy_ranks.clear();
    j.copy_gpus.clear();
    j.reports_left = 0;
    j.reported = false;
  }
  // The copies of each job, by copy index (HadarE forks a job into several).
  std::map<std::int64_t, std::vector<const assignment*>> by_job;
  for (const auto& as : p.assignments)
    if (find_job(st, as.job) && !as.shares.empty()) by_job[as.job].push_back(&as);
  for (auto& [id, copies] : by_job) {
    std::sort(copies.begin(), copies.end(),
              [](const assignment* a, const assignment* b) { return a->copy < b->copy; });
    std::set<int> ranks;
    for (std::size_t c = 0; c < copies.size(); ++c) {
      ranks.insert(live_ranks[copies[c]->shares.front().server]);
      if (copies[c]->copy != static_cast<int>(c)) {
        finish(self, false, "policy " + cfg.pol->name() + " gave job " + std::to_string(id) +
                                " copies that are not numbered 0.." +
                                std::to_string(copies.size() - 1));
        return;
      }
    }
    if (copies.size() > 1 && (!cfg.can_fork || ranks.size() != copies.size())) {
      finish(self, false, "policy " + cfg.pol->name() + " forked job " + std::to_string(id) +
                              (cfg.can_fork ? " into copies sharing a node"
                                            : " but this launch cannot merge copies (use mpirun)"));
      return;
    }
  }
  for (auto& [id, copies] : by_job) {
    auto* j = find_job(st, id);
    const int n = static_cast<int>(copies.size());
    std::vector<std::int32_t> fork_ranks;
    if (n > 1)
      for (const auto* as : copies) fork_ranks.push_back(live_ranks[as->shares.front().server]);
    const auto remaining = static_cast<std::int64_t>(j->spec.spec.total_steps) - j->step;
    j->last_busy = 0;
    ++j->rounds;
    j->max_copies = std::max(j->max_copies, n);
    for (const auto* asp : copies) {
      const auto& as = *asp;
      const int rank = live_ranks[as.shares.front().server];
      for (const auto& sh : as.shares)
        j->planned[live_ranks[sh.server]] += sh.gpus * cfg.round_length;
      if (as.copy == 0) {
        if (j->last_rank >= 0 && j->last_rank != rank) ++j->restarts;
        j->round_rank = rank;
        j->last_type = as.type;
      }
      j->copy_ranks.push_back(rank);
      j->copy_gpus.push_back(as.gpus());
      j->round_gpus += as.gpus();
      ++j->reports_left;
      start_copy c;
      c.job = j->spec.spec.id;
      c.copy = as.copy;
      c.kind = j->spec.kind;
      c.seed = j->spec.seed;
      c.config = j->spec.config;
      c.scale = as.tasks > 0 ? as.tasks : j->spec.spec.scale_factor;
      c.gpus = as.gpus();
      c.total_steps = static_cast<std::int64_t>(j->spec.spec.total_steps);
      c.resume_step = j->step;
      c.step_budget =
          as.step_budget < 0 ? -1 : static_cast<std::int64_t>(std::ceil(as.step_budget));
      if (n > 1) {
        // Copies together should not overshoot the job's total by more than n - 1 steps.
        const std::int64_t share = (remaining + n - 1) / n;
        c.step_budget = c.step_budget < 0 ? share : std::min(c.step_budget, share);
        c.fork_ranks = fork_ranks;
        c.aggregate_timeout = std::max(1.0, cfg.report_grace / 2);
      }
      c.step_time = j->spec.step_time;
      c.target_loss = j->spec.target_loss;
      c.merge = train::to_string(j->spec.merge);
      c.checkpoint_path = checkpoint_path(cfg, c.job);
      orders[rank].copies.push_back(std::move(c));
      ++st.expected_starts;
    }
  }
  for (auto& j : st.jobs)
    if (j.arrived && !j.finished && !j.canceled && j.round_rank < 0) j.last_type = -1;
  st.pending.clear();
  for (auto& [rank, o] : orders) {
    st.pending.insert(rank);
    self->send(st.nodes[rank].handle, std::move(o));
  }
  st.last_plan = std::move(p);
  st.have_last = true;
  if (cfg.verbose)
    std::cerr << "tessera: round " << st.round << " at " << now << " s: "
              << st.last_plan.assignments.size() << " copies on " << live_ranks.size()
              << " nodes\n";
  self->delayed_send(self, seconds(cfg.round_length), round_tick_atom::value, st.round);
  self->delayed_send(self, seconds(cfg.round_length + cfg.report_grace),
                     round_deadline_atom::value, st.round);
}

/// Which rank an actor address belongs to, or -1.
int rank_of(const scheduler_state& st, const caf::actor_addr& a) {
  for (std::size_t r = 0; r < st.nodes.size(); ++r)
    if (st.nodes[r].handle && st.nodes[r].handle.address() == a) return static_cast<int>(r);
  return -1;
}

/// True when `rank` is a live node (messages from lost nodes are ignored).
bool live_rank(const scheduler_state& st, int rank) {
  return rank >= 0 && rank < static_cast<int>(st.nodes.size()) && st.nodes[rank].alive;
}

}  // namespace

caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, scheduler_config cfg,
                              caf::actor listener) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.listener = listener;
  st.t0 = clock_type::now();
  st.nodes.resize(st.cfg.cl.servers.size());
  for (const auto& rj : st.cfg.jobs) st.jobs.push_back(make_tracked(rj, st.nodes.size()));
  self->set_down_handler([=](caf::down_msg& d) {
    ++self->state.messages;
    const int rank = rank_of(self->state, d.source);
    if (rank >= 0)
      node_lost(self, rank, "its actor went down (" + describe(self->system(), d.reason) + ")");
  });
  self->delayed_send(self, seconds(st.cfg.register_timeout), reg_timeout_atom::value);
  if (st.cfg.max_seconds > 0)
    self->delayed_send(self, seconds(st.cfg.max_seconds), run_timeout_atom::value);

  return {
      [=](const node_hello& h) -> caf::result<node_welcome> {
        auto& s = self->state;
        ++s.messages;
        const int n = static_cast<int>(s.nodes.size());
        std::string who = "node rank " + std::to_string(h.rank) + " (" + h.host + ", pid " +
                          std::to_string(h.pid) + ")";
        caf::error refusal;
        if (h.version != protocol_version) {
          refusal = make_run_error(
              run_errc::protocol_mismatch,
              who + " speaks protocol version " + std::to_string(h.version) +
                  ", this scheduler speaks version " + std::to_string(protocol_version));
        } else if (h.rank < 0 || h.rank >= n) {
          refusal = make_run_error(run_errc::unknown_node,
                                   who + " is not in the cluster file, which lists " +
                                       std::to_string(n) + " servers (ranks 0.." +
                                       std::to_string(n - 1) + ")");
        } else if (s.nodes[h.rank].registered) {
          refusal = make_run_error(run_errc::duplicate_node, who + " registered twice");
        } else {
          const auto& sv = s.cfg.cl.servers[h.rank];
          if (sv.gpu_type != h.gpu_type || sv.gpus != h.gpus || sv.speed != h.speed)
            refusal = make_run_error(run_errc::unknown_node,
                                     who + " describes its server differently from the "
                                           "scheduler's cluster file (" + h.gpu_type + " x" +
                                           std::to_string(h.gpus) + " vs " + sv.gpu_type + " x" +
                                           std::to_string(sv.gpus) + ")");
        }
        if (refusal) {
          const std::string text = describe(self->system(), refusal);
          std::cerr << "tessera: refused " << text << '\n';
          // A cluster that cannot be completed as configured ends the run.
          self->send(self, refused_atom::value, text);
          return refusal;
        }
        auto& rec = s.nodes[h.rank];
        rec.handle = caf::actor_cast<caf::actor>(self->current_sender());
        rec.registered = true;
        rec.alive = true;
        rec.hello = h;
        rec.last_seen = clock_type::now();
        self->monitor(rec.handle);
        if (std::all_of(s.nodes.begin(), s.nodes.end(),
                        [](const node_record& r) { return r.registered; })) {
          s.t0 = clock_type::now();
          self->send(self, hb_check_atom::value);
          self->send(self, arrival_atom::value);
        }
        return node_welcome{h.rank, s.cfg.round_length, s.cfg.heartbeat_interval};
      },
      [=](refused_atom, const std::string& text) { finish(self, false, text); },
      [=](reg_timeout_atom) {
        auto& s = self->state;
        std::string missing;
        for (std::size_t r = 0; r < s.nodes.size(); ++r)
          if (!s.nodes[r].registered) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        if (!missing.empty())
          finish(self, false,
                 "not every node registered within " + std::to_string(s.cfg.register_timeout) +
                     " s; missing ranks: " + missing);
      },
      [=](run_timeout_atom) {
        finish(self, false,
               "the run did not end within " + std::to_string(self->state.cfg.max_seconds) +
                   " s");
      },
      [=](arrival_atom) {
        if (!self->state.round_open) start_round(self);
      },
      [=](const heartbeat& h) {
        auto& s = self->state;
        ++s.messages;
        if (h.seq < 0) {
          ++s.flood;
          const double t = elapsed(s);
          if (s.flood_first < 0) s.flood_first = t;
          s.flood_last = t;
        }
        if (live_rank(s, h.rank)) s.nodes[h.rank].last_seen = clock_type::now();
      },
      [=](hb_check_atom) {
        auto& s = self->state;
        const auto now = clock_type::now();
        for (std::size_t r = 0; r < s.nodes.size(); ++r) {
          if (!s.nodes[r].alive) continue;
          const double silent = std::chrono::duration<double>(now - s.nodes[r].last_seen).count();
          if (silent > s.cfg.heartbeat_timeout)
            node_lost(self, static_cast<int>(r),
                      "no heartbeat for " + std::to_string(silent) + " s");
        }
        if (!s.done) self->delayed_send(self, seconds(s.cfg.heartbeat_interval), hb_check_atom::value);
      },
      [=](round_tick_atom, std::int64_t round) {
        auto& s = self->state;
        if (round != s.round) return;
        s.timer_fired = true;
        maybe_advance(self);
      },
      [=](round_deadline_atom, std::int64_t round) {
        auto& s = self->state;
        if (round != s.round || !s.round_open) return;
        const std::set<int> late = s.pending;
        for (int r : late)
          node_lost(self, r,
                    "no report for round " + std::to_string(round) + " within " +
                        std::to_string(s.cfg.round_length + s.cfg.report_grace) + " s");
        maybe_advance(self);
      },
      [=](const copy_started& c) {
        auto& s = self->state;
        ++s.messages;
        if (!live_rank(s, c.rank) || c.round != s.round) return;
        s.nodes[c.rank].last_seen = clock_type::now();
        if (auto* j = find_job(s, c.job); j && c.step < j->step) ++j->regressions;
        if (++s.started == s.expected_starts)
          s.dispatch_latency.push_back(elapsed(s) - s.round_t0);
      },
      [=](const progress_report& r) {
        auto& s = self->state;
        ++s.messages;
        if (!live_rank(s, r.rank) || r.round != s.round) return;
        s.nodes[r.rank].last_seen = clock_type::now();
        auto* j = find_job(s, r.job);
        if (!j) return;
        if (!r.error.empty()) {
          finish(self, false,
                 "job " + std::to_string(r.job) + " failed on node rank " +
                     std::to_string(r.rank) + ": " + r.error);
          return;
        }
        const int gpus = r.copy >= 0 && r.copy < static_cast<int>(j->copy_gpus.size())
                             ? j->copy_gpus[r.copy]
                             : j->round_gpus;
        if (--j->reports_left <= 0) j->reported = true;
        if (r.copy == 0) {
          j->last_rank = r.rank;
          j->run_time += r.busy_seconds;
        }
        j->step = std::max(j->step, r.step);
        j->gpu_seconds += r.busy_seconds * gpus;
        j->busy[r.rank] += r.busy_seconds * gpus;
        j->last_busy += r.busy_seconds * gpus;
        if (r.throughput > 0) {
          j->throughput[r.rank] = r.throughput;
          j->measured[s.cfg.cl.servers[r.rank].gpu_type] = r.throughput;
        }
        j->loss = r.loss;
      },
      [=](const checkpoint_done& c) {
        auto& s = self->state;
        ++s.messages;
        if (!live_rank(s, c.rank)) return;
        if (auto* j = find_job(s, c.job)) j->step = std::max(j->step, c.step);
      },
      [=](const job_finished& f) {
        auto& s = self->state;
        ++s.messages;
        if (!live_rank(s, f.rank)) return;
        auto* j = find_job(s, f.job);
        if (!j || j->finished) return;
        j->finished = true;
        j->finish = elapsed(s);
        j->step = f.step;
        j->loss = f.loss;
        j->accuracy = f.accuracy;
        j->reached_target = f.reached_target;
        ++s.job_set_version;
      },
      [=](const round_done& d) {
        auto& s = self->state;
        ++s.messages;
        if (!live_rank(s, d.rank) || d.round != s.round) return;
        s.pending.erase(d.rank);
        maybe_advance(self);
      },
      [=](const submit_job& sj) -> caf::result<std::int64_t> {
        auto& s = self->state;
        ++s.messages;
        const auto& d = sj.job;
        if (std::find(s.cfg.known_kinds.begin(), s.cfg.known_kinds.end(), d.kind) ==
            s.cfg.known_kinds.end())
          return make_run_error(run_errc::bad_job, "unknown job kind '" + d.kind + "'");
        if (d.total_steps <= 0 || d.scale < 1 || d.step_time <= 0)
          return make_run_error(run_errc::bad_job,
                                "a job needs total_steps > 0, scale >= 1 and step_time > 0");
        run_job rj;
        std::int64_t id = d.id;
        if (id < 0) {
          id = 0;
          for (const auto& j : s.jobs) id = std::max<std::int64_t>(id, j.spec.spec.id + 1);
        } else if (find_job(s, id)) {
          return make_run_error(run_errc::bad_job, "job id " + std::to_string(id) + " is taken");
        }
        rj.spec.id = id;
        rj.spec.job_type = d.kind;
        rj.spec.scale_factor = d.scale;
        rj.spec.total_steps = static_cast<double>(d.total_steps);
        rj.spec.arrival = std::max(d.arrival, elapsed(s));
        rj.spec.priority_weight = d.priority_weight;
        rj.kind = d.kind;
        rj.seed = d.seed;
        rj.step_time = d.step_time;
        rj.config = d.config;
        s.jobs.push_back(make_tracked(rj, s.nodes.size()));
        return id;
      },
      [=](const cancel_job& c) -> bool {
        auto& s = self->state;
        ++s.messages;
        auto* j = find_job(s, c.job);
        if (!j || j->finished || j->canceled) return false;
        j->canceled = true;
        ++s.job_set_version;
        for (std::size_t k = 0; k < j->copy_ranks.size(); ++k)
          if (live_rank(s, j->copy_ranks[k]))
            self->send(s.nodes[j->copy_ranks[k]].handle,
                       stop_copy{s.round, c.job, static_cast<std::int32_t>(k)});
        return true;
      },
  };
}

}  // namespace tessera::actors
