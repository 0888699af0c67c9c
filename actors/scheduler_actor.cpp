#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <set>

#include "runtime/snapshot_builder.hpp"
#include "runtime/task_layout.hpp"

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
        std::any_of(j.pieces.begin(), j.pieces.end(),
                    [&](const copy_piece& p) { return p.rank == rank; })) {
      if (!j.round_failed) ++j.lost_rounds;
      j.round_failed = true;
      ++j.sync_epoch;  // the parts left may be stuck in a collective with the lost node
      j.round_rank = -1;
      j.pieces.clear();
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
  s.copy_limit = cfg.can_sync ? 0 : 1;
  s.rates = &st.rates->for_live(live, live_ranks);
  auto planned = cfg.pol->plan(s);
  if (!planned) {
    finish(self, false, "policy " + cfg.pol->name() + " failed: " + planned.err().message);
    return;
  }
  round_plan p = std::move(planned.value());
  p.start = now;
  p.length = cfg.round_length;
  if (auto v = validate_plan(s, p, cfg.pol->name()); !v) {
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
    j.pieces.clear();
    j.reports_left = 0;
    j.reported = false;
    j.round_failed = false;
  }
  // Per job copy: the tightest step budget of its assignments and its first one's GPU type.
  std::map<std::pair<job_id, int>, double> budget;
  std::map<std::pair<job_id, int>, int> first_type;
  for (const auto& as : p.assignments) {
    const auto key = std::make_pair(as.job, as.copy);
    first_type.emplace(key, as.type);
    auto [b, fresh] = budget.emplace(key, as.step_budget);
    if (!fresh && as.step_budget >= 0) b->second = b->second < 0 ? as.step_budget
                                                                  : std::min(b->second, as.step_budget);
  }
  // Where each copy's tasks run (runtime/task_layout.hpp), grouped by job, copies in order.
  const auto layouts = layout_copies(p, [&](job_id id) {
    const auto* j = find_job(st, id);
    return j ? j->spec.spec.scale_factor : 1;
  });
  std::map<std::int64_t, std::vector<const copy_layout*>> by_job;
  for (const auto& l : layouts)
    if (find_job(st, l.job)) by_job[l.job].push_back(&l);
  for (auto& [id, copies] : by_job) {
    std::sort(copies.begin(), copies.end(),
              [](const copy_layout* a, const copy_layout* b) { return a->copy < b->copy; });
    std::set<int> ranks;
    std::size_t parts = 0;
    for (std::size_t c = 0; c < copies.size(); ++c) {
      if (copies[c]->copy != static_cast<int>(c)) {
        finish(self, false, "policy " + cfg.pol->name() + " gave job " + std::to_string(id) +
                                " copies that are not numbered 0.." +
                                std::to_string(copies.size() - 1));
        return;
      }
      for (const auto& part : copies[c]->parts) {
        ranks.insert(live_ranks[part.server]);
        ++parts;
      }
    }
    if (copies.size() > 1 && (!cfg.can_sync || ranks.size() != parts)) {
      finish(self, false, "policy " + cfg.pol->name() + " forked job " + std::to_string(id) +
                              (cfg.can_sync ? " into copies sharing a node"
                                            : " but this launch cannot merge copies (use mpirun)"));
      return;
    }
  }
  /// One node's part as ordered: its rank and its layout part (shards renumbered by rank).
  struct node_part {
    int rank;
    copy_part part;
  };
  for (auto& [id, copies] : by_job) {
    auto* j = find_job(st, id);
    const int n = static_cast<int>(copies.size());
    const int k = j->spec.spec.scale_factor;
    std::vector<std::vector<node_part>> runs(copies.size());
    for (std::size_t c = 0; c < copies.size(); ++c) {
      int gpus = 0;
      for (const auto& part : copies[c]->parts) {
        gpus += part.gpus;
        if (part.tasks > 0) runs[c].push_back({live_ranks[part.server], part});
      }
      std::sort(runs[c].begin(), runs[c].end(),
                [](const node_part& a, const node_part& b) { return a.rank < b.rank; });
      int next = 0;
      for (auto& r : runs[c]) {
        r.part.shard_begin = next;
        next += r.part.tasks;
      }
      if (!cfg.can_sync && runs[c].size() > 1) {
        // No aggregators: the first part's node runs every task, the others' GPUs are held.
        runs[c].resize(1);
        runs[c][0].part = copy_part{runs[c][0].part.server, gpus, k, 0, 1};
      }
    }
    std::vector<std::int32_t> leaders;
    if (n > 1)
      for (const auto& r : runs) leaders.push_back(r.front().rank);
    // The slowest part's step bounds every collective's wait.
    double longest_step = 0;
    for (const auto& r : runs)
      for (const auto& np : r)
        longest_step = std::max(longest_step, np.part.task_times * j->spec.step_time /
                                                  cfg.cl.servers[np.rank].speed);
    for (const auto& as : p.assignments)
      if (as.job == id)
        for (const auto& sh : as.shares)
          j->planned[live_ranks[sh.server]] += sh.gpus * cfg.round_length;
    const auto remaining = static_cast<std::int64_t>(j->spec.spec.total_steps) - j->step;
    j->last_busy = 0;
    ++j->rounds;
    j->max_copies = std::max(j->max_copies, n);
    for (std::size_t c = 0; c < runs.size(); ++c) {
      const bool spread = runs[c].size() > 1;
      std::vector<std::int32_t> part_ranks;
      if (spread)
        for (const auto& np : runs[c]) part_ranks.push_back(np.rank);
      for (std::size_t q = 0; q < runs[c].size(); ++q) {
        const auto& np = runs[c][q];
        j->pieces.push_back(copy_piece{static_cast<int>(c), np.rank, np.part.gpus, q == 0, spread});
        if (c == 0 && q == 0) {
          if (j->last_rank >= 0 && j->last_rank != np.rank) ++j->restarts;
          j->round_rank = np.rank;
          j->last_type = first_type[{id, 0}];
        }
        j->round_gpus += np.part.gpus;
        ++j->reports_left;
        start_copy o;
        o.job = id;
        o.copy = static_cast<std::int32_t>(c);
        o.kind = j->spec.kind;
        o.seed = j->spec.seed;
        o.config = j->spec.config;
        o.scale = k;
        o.gpus = np.part.gpus;
        o.total_steps = static_cast<std::int64_t>(j->spec.spec.total_steps);
        o.resume_step = j->step;
        const double b = budget[{id, static_cast<int>(c)}];
        o.step_budget = b < 0 ? -1 : static_cast<std::int64_t>(std::ceil(b));
        if (n > 1) {
          // Copies together should not overshoot the job's total by more than n - 1 steps.
          const std::int64_t share = (remaining + n - 1) / n;
          o.step_budget = o.step_budget < 0 ? share : std::min(o.step_budget, share);
          o.fork_ranks = leaders;
        }
        o.part_ranks = part_ranks;
        o.shard_begin = np.part.shard_begin;
        o.shards = np.part.tasks;
        o.task_times = np.part.task_times;
        o.channel = (static_cast<std::uint64_t>(id) << 20) ^ j->sync_epoch;
        o.aggregate_timeout = std::max(1.0, cfg.report_grace / 2) + longest_step;
        o.step_time = j->spec.step_time;
        o.target_loss = j->spec.target_loss;
        o.merge = train::to_string(j->spec.merge);
        o.checkpoint_path = checkpoint_path(cfg, id);
        orders[np.rank].copies.push_back(std::move(o));
        ++st.expected_starts;
      }
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
    std::cerr << "tessera: round " << st.round << " at " << now << " s: " << layouts.size()
              << " job copies in " << st.expected_starts << " parts on " << live_ranks.size()
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
  st.rates = std::make_shared<run_rates>(st.cfg.cl);
  for (const auto& rj : st.cfg.jobs) {
    st.jobs.push_back(make_tracked(rj, st.nodes.size()));
    st.rates->add(st.jobs.back().spec);
  }
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
        const copy_piece* piece = nullptr;
        for (const auto& pc : j->pieces)
          if (pc.copy == r.copy && pc.rank == r.rank) piece = &pc;
        // Copy 0's leader wrote the checkpoint: its report carries the job's progress.
        const bool keeper = piece && piece->copy == 0 && piece->leader;
        if (!r.error.empty()) {
          if (!r.retry) {
            finish(self, false,
                   "job " + std::to_string(r.job) + " failed on node rank " +
                       std::to_string(r.rank) + ": " + r.error);
            return;
          }
          // A synchronisation failed: the job resumes from its checkpoint on a fresh channel.
          std::cerr << "tessera: job " << r.job << " on node rank " << r.rank << ": " << r.error
                    << "; it resumes from its last checkpoint\n";
          ++j->sync_epoch;
          if (keeper && !j->round_failed) {
            j->round_failed = true;
            ++j->lost_rounds;
          }
          if (--j->reports_left <= 0) j->reported = true;
          return;
        }
        const int gpus = piece ? piece->gpus : j->round_gpus;
        if (--j->reports_left <= 0) j->reported = true;
        if (keeper) {
          j->last_rank = r.rank;
          j->run_time += r.busy_seconds;
          j->step = std::max(j->step, r.step);
        }
        j->gpu_seconds += r.busy_seconds * gpus;
        j->busy[r.rank] += r.busy_seconds * gpus;
        j->last_busy += r.busy_seconds * gpus;
        if (r.throughput > 0) {
          j->throughput[r.rank] = r.throughput;
          // A part of a spread copy runs at its slowest part's pace: not this node's rate.
          if (piece && !piece->spread) {
            const double gang = r.throughput * std::max(1, r.task_times);
            j->measured[s.cfg.cl.servers[r.rank].gpu_type] = gang;
            s.rates->record(r.rank, j->spec.spec.job_type, j->spec.spec.scale_factor,
                            r.task_times, r.throughput);
          }
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
        s.rates->add(s.jobs.back().spec);
        return id;
      },
      [=](const cancel_job& c) -> bool {
        auto& s = self->state;
        ++s.messages;
        auto* j = find_job(s, c.job);
        if (!j || j->finished || j->canceled) return false;
        j->canceled = true;
        ++s.job_set_version;
        for (const auto& pc : j->pieces)
          if (live_rank(s, pc.rank))
            self->send(s.nodes[pc.rank].handle, stop_copy{s.round, c.job, pc.copy});
        return true;
      },
  };
}

}  // namespace tessera::actors
