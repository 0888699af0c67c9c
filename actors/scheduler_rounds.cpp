// The scheduler's rounds (actors/scheduler_parts.hpp): a round's start (arrivals admitted, the
// active jobs' views asked for), its plan through the shared round loop
// (runtime/core/round_loop.hpp, exactly as the simulator plans), the jobs' assignments and
// the nodes' orders, and the nodes' reports that end it.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "actors/dispatch.hpp"
#include "actors/scheduler_parts.hpp"

namespace tessera::actors::sched {

namespace {

/// Every job's checkpoint book (as its latest snapshot has it), by job id.
std::map<std::int64_t, const checkpoint_book*> checkpoint_books(const scheduler_state& st) {
  std::map<std::int64_t, const checkpoint_book*> books;
  for (const auto& e : st.jobs) books[e.spec.spec.id] = &e.latest.book;
  return books;
}

/// Admitted and neither ended: the policy plans it.
bool active_job(const job_entry& e) { return e.arrived && !e.ended(); }

/// The round of a run whose jobs all wait: nothing runs, the round's timer still ticks.
planned_round waiting_round(const round_context& ctx) {
  planned_round r;
  r.plan.start = ctx.now;
  r.plan.length = ctx.round_length;
  return r;
}

/// The policy's view of an active job from its latest snapshot: per-type throughput is the
/// one measured on a node of the type, else the model's (step_time at speed 1.0 scaled by the
/// type's mean speed).
job_view view_of(const job_entry& e, const cluster& live, std::uint64_t live_generation) {
  const auto& snap = e.latest;
  job_view v;
  v.spec = &e.spec.spec;
  v.steps_done = static_cast<double>(snap.step);
  v.run_time = snap.run_time;
  v.attained_service = snap.gpu_seconds;
  v.last_type = snap.live_generation == live_generation ? snap.last_type : -1;
  v.throughput.assign(live.types.size(), 0.0);
  for (std::size_t k = 0; k < live.types.size(); ++k) {
    if (live.types[k].gpus < e.spec.spec.scale_factor) continue;
    auto m = snap.measured.find(live.types[k].name);
    v.throughput[k] = m != snap.measured.end() && m->second > 0
                          ? m->second
                          : live.types[k].mean_speed / e.spec.step_time;
  }
  return v;
}

/// Each job's assignment for the round of plan `p` and its `orders`: its pieces (with their
/// nodes' actors), the GPU-seconds planned per rank and the type of copy 0. Also records the
/// pieces in the jobs' entries and the copies whose start the round waits for.
std::map<std::int64_t, job_assignment> book_round(scheduler_state& st, const round_plan& p,
                                                  const std::map<int, round_orders>& orders) {
  for (auto& e : st.jobs) e.pieces.clear();
  st.started = 0;
  st.expected_starts = 0;
  std::map<std::int64_t, job_assignment> out;
  for (const auto& [rank, o] : orders)
    for (const auto& c : o.copies) {
      const bool leader = c.part_ranks.empty() || c.part_ranks.front() == rank;
      auto& a = out[c.job];
      a.pieces.push_back(copy_piece{c.copy, rank, c.gpus, leader, c.part_ranks.size() > 1,
                                    caf::actor_cast<caf::actor>(st.nodes[rank].handle),
                                    c.partner >= 0});
      ++st.expected_starts;
    }
  for (const auto& as : p.assignments) {
    auto it = out.find(as.job);
    if (it == out.end()) continue;
    for (const auto& sh : as.shares)
      it->second.planned[st.live_ranks[sh.server]] += sh.gpus * p.length;
    if (as.copy == 0 && it->second.type < 0) it->second.type = as.type;
  }
  for (const auto& [id, a] : out) {
    auto* e = find_job(st, id);
    e->pieces = a.pieces;
    for (const auto& pc : a.pieces)
      note_placement(e->placements, placement{st.round, id, pc.copy, pc.rank, pc.gpus});
  }
  return out;
}

/// Keeps the round just planned for clients (the last max_rounds rounds).
void note_round(scheduler_state& st, const std::map<int, round_orders>& orders,
                double plan_seconds) {
  constexpr std::size_t max_rounds = 1000;
  const auto& rec = st.round_records.back();
  round_status r;
  r.round = st.round;
  r.start = rec.start;
  r.length = st.cfg.round_length;
  r.busy_gpus = rec.busy_gpus;
  r.idle_gpus = rec.idle_gpus;
  r.active_jobs = rec.active_jobs;
  r.waiting_jobs = rec.waiting_jobs;
  r.plan_seconds = plan_seconds;
  st.plan_seconds.push_back(plan_seconds);
  st.plan_histogram.observe(plan_seconds);
  for (const auto& [rank, o] : orders)
    for (const auto& c : o.copies) r.assignments.push_back({st.round, c.job, c.copy, rank, c.gpus});
  st.recent_rounds.push_back(std::move(r));
  while (st.recent_rounds.size() > max_rounds) st.recent_rounds.pop_front();
}

/// Whether the jobs wait for the checkpoint directory this round: probes it while they do and
/// removes stray files (actors/checkpoints.hpp).
bool checkpoints_wait(scheduler_state& st) {
  return before_round(st.ckpts, st.round, checkpoint_books(st), std::cerr);
}

/// Whether the jobs wait for the journal this round: a served cluster starts no work whose
/// state it could not record (actors/cluster_journal.hpp). Logged when it starts and ends.
bool journal_waits(scheduler_state& st) {
  const auto& log = st.cfg.log;
  if (!log || log->writable()) {
    if (std::exchange(st.journal_waiting, false))
      std::cerr << "tessera: round " << st.round + 1 << ": the journal writes again; jobs run\n";
    return false;
  }
  ++st.journal_paused_rounds;
  if (!std::exchange(st.journal_waiting, true))
    std::cerr << "tessera: round " << st.round + 1 << ": the jobs wait: the journal cannot record "
              << "their state (" << log->trouble() << ")\n";
  return true;
}

/// The plan of the round being started, from the views of the jobs that answered; an error
/// when the policy fails.
result<planned_round> plan_now(scheduler_state& st, const std::vector<const job_entry*>& planned,
                               bool wait) {
  const auto& cfg = st.cfg;
  std::vector<job_view> views;
  for (const auto* e : planned) views.push_back(view_of(*e, st.live, st.live_generation));
  round_context ctx;
  ctx.now = st.starting.now;
  ctx.round_length = cfg.round_length;
  ctx.cl = &st.live;
  ctx.last_plan = st.have_last ? &st.last_plan : nullptr;
  ctx.job_set_version = st.job_set_version;
  ctx.rates = &st.rates->for_live(st.live, st.live_ranks);
  ctx.copy_limit = cfg.can_sync ? 0 : 1;
  ctx.timeline = cfg.timeline.get();
  if (wait || views.empty()) return waiting_round(ctx);
  return plan_round(*cfg.pol, ctx, std::move(views));
}

/// The orders of plan `p` for every live node, each copy naming its job's actor (where the
/// node reports), or an error when the plan breaks a dispatch rule.
result<std::map<int, round_orders>> orders_of(scheduler_state& st, const round_plan& p,
                                              const std::vector<const job_entry*>& planned) {
  const auto& cfg = st.cfg;
  dispatch_context dc{
      &cfg.cl,          st.live_ranks,      cfg.can_sync, st.round + 1,        cfg.round_length,
      cfg.report_grace, cfg.checkpoint_dir, {},           cfg.master_port_base};
  for (const auto& n : st.nodes) dc.hosts.push_back(n.hello.host);
  dc.rates = &st.rates->for_live(st.live, st.live_ranks);
  std::map<std::int64_t, dispatch_job> known;
  for (const auto* e : planned)
    known[e->spec.spec.id] = dispatch_job{&e->spec, e->latest.step, e->latest.sync_epoch,
                                          &e->latest.book, &e->latest.measured};
  auto orders = dispatch_plan(
      p, dc,
      [&](std::int64_t id) -> const dispatch_job* {
        auto it = known.find(id);
        return it == known.end() ? nullptr : &it->second;
      },
      cfg.pol->name());
  if (!orders) return orders;
  for (auto& [rank, o] : *orders)
    for (auto& c : o.copies) c.job_actor = caf::actor_cast<caf::actor>(find_job(st, c.job)->handle);
  return orders;
}

/// Sends the round's orders to the nodes (after every job has its assignment, so a job hears
/// of its round before any report of it) and arms the round's timers.
void send_orders(self_ptr self, std::map<int, round_orders>& orders) {
  auto& st = self->state;
  const auto& cfg = st.cfg;
  st.pending.clear();
  double program_grace = 0;  // a program's node may wait this long past the round for it
  for (auto& [rank, o] : orders) {
    for (const auto& c : o.copies)
      if (c.is_program()) program_grace = std::max(program_grace, c.program.grace);
    st.pending.insert(rank);
    self->send(st.nodes[rank].handle, std::move(o));
  }
  if (cfg.verbose)
    std::cerr << "tessera: round " << st.round << " at " << st.round_t0
              << " s: " << st.expected_starts << " parts on " << st.live_ranks.size() << " nodes\n";
  self->delayed_send(self, seconds(cfg.round_length), round_tick_atom::value, st.round);
  st.round_deadline = cfg.round_length + cfg.report_grace + program_grace;
  st.late_waits = 0;
  self->delayed_send(self, seconds(st.round_deadline), round_deadline_atom::value, st.round);
}

/// Sends the round's orders and runs it, or first asks the nodes that keep processes with
/// unsaved state to let go of the ones the orders move (settle_atom): a copy that moves must
/// not start elsewhere before its old process wrote its checkpoint.
void settle_or_send(self_ptr self, std::map<int, round_orders> orders) {
  auto& st = self->state;
  st.settling.clear();
  if (st.unsaved.empty()) {
    send_orders(self, orders);
    self->become(st.phases.running);
    return;
  }
  // A process let go gets its program's grace to save and exit; a moved copy's grace is in
  // the orders of the node it moves to, so the wait is the largest over every order.
  double grace = 30;
  for (const auto& [rank, o] : orders)
    for (const auto& c : o.copies)
      if (c.is_program()) grace = std::max(grace, c.program.grace);
  for (int rank : st.unsaved) {
    if (rank < 0 || rank >= static_cast<int>(st.nodes.size()) || !st.nodes[rank].alive) continue;
    auto it = orders.find(rank);
    round_orders o = it != orders.end() ? it->second : round_orders{};
    o.round = st.round;
    st.settling.insert(rank);
    self->send(st.nodes[rank].handle, settle_atom::value, std::move(o));
  }
  st.unsaved.clear();
  if (st.settling.empty()) {
    send_orders(self, orders);
    self->become(st.phases.running);
    return;
  }
  st.settle_orders = std::move(orders);
  st.holding_orders = true;
  self->delayed_send(self, seconds(grace + st.cfg.report_grace), settle_due_atom::value, st.round);
  self->become(st.phases.settling);
}

/// With every asked job's view in (or its time up): plans the round exactly as the simulator
/// does (runtime/core/round_loop.hpp), tells every job its assignment and the nodes their orders;
/// or waits for the next arrival when no job is active, or ends the run when none is left.
void plan_and_dispatch(self_ptr self) {
  auto& st = self->state;
  auto& start = st.starting;
  start.open = false;
  std::vector<const job_entry*> planned;  // answered and active, in submission order
  std::vector<job_entry*> assigned;       // also the ones that did not answer
  for (auto* e : start.asked)
    if (!e->ended()) {
      assigned.push_back(e);
      if (!start.silent.count(e->spec.spec.id)) planned.push_back(e);
    }
  if (assigned.empty()) {
    if (st.arrivals.empty() && !st.cfg.serve) return finish(self, true, "");
    if (!st.arrivals.empty())
      self->delayed_send(self, seconds(st.arrivals.next_arrival() - start.now),
                         arrival_atom::value);
    self->become(self->state.phases.idle);
    return;
  }
  refresh_live_cluster(st);
  const bool ckpt_wait = checkpoints_wait(st);  // both asked: each logs its own
  const bool wait = journal_waits(st) || ckpt_wait;
  auto plan = plan_now(st, planned, wait);
  if (!plan) return finish(self, false, "policy " + st.cfg.pol->name() + ": " + plan.err().message);
  auto orders = orders_of(st, plan->plan, planned);
  if (!orders) return finish(self, false, orders.err().message);
  ++st.round;
  st.round_t0 = start.now;
  auto assignments = book_round(st, plan->plan, *orders);
  for (auto* e : assigned) {
    auto it = assignments.find(e->spec.spec.id);
    // Left out again after waiting, with nothing paused: nothing changes for the job.
    if (it == assignments.end() && !e->asked_view && !wait) continue;
    job_assignment left_out;
    auto& a = it == assignments.end() ? left_out : it->second;  // none: left out
    a.round = st.round;
    a.start = plan->plan.start;
    a.run_start = st.t0;
    a.live_generation = st.live_generation;
    a.paused = wait;
    self->send(e->handle, std::move(a));
  }
  st.round_records.push_back(
      record_round(plan->plan, st.live.total_gpus(), static_cast<int>(assigned.size())));
  note_round(st, *orders,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start.wall0).count());
  st.last_plan = std::move(plan->plan);
  st.have_last = true;
  settle_or_send(self, std::move(*orders));
}

/// Job `e` gave no view for round start `id` (`why`): it is left out of the round (logged).
void view_missing(self_ptr self, std::uint64_t id, job_entry& e, const std::string& why) {
  auto& start = self->state.starting;
  if (!start.open || start.id != id || start.answered.count(e.spec.spec.id)) return;
  std::cerr << "tessera: job " << e.spec.spec.id << " did not give its view (" << why
            << "); it is left out of round " << self->state.round + 1 << '\n';
  start.answered.insert(e.spec.spec.id);  // answered, without a view: left out
  start.silent.insert(e.spec.spec.id);
  if (--start.left == 0) plan_and_dispatch(self);
}

}  // namespace

/// A job's view for round start `id` (its answer to view_atom).
void on_view(self_ptr self, std::uint64_t id, job_entry& e, job_snapshot&& snap) {
  auto& st = self->state;  // job_sender counted the message
  take_snapshot(self, e, std::move(snap));
  auto& start = st.starting;
  if (!start.open || start.id != id || !start.answered.insert(e.spec.spec.id).second) return;
  e.view_due = false;  // the answer to this start's question (sent after any node_lost_atom)
  if (--start.left == 0) plan_and_dispatch(self);
}

/// At a heartbeat scan: when the round start has waited job_timeout for views, every job
/// still silent is left out of the round.
void check_views(self_ptr self) {
  const auto& start = self->state.starting;
  if (!start.open ||
      seconds_between(start.since, self->clock().now()) < self->state.cfg.job_timeout)
    return;
  const auto asked = start.viewing;
  for (auto* e : asked) view_missing(self, start.id, *e, "no answer within the job time-out");
}

/// Starts the next round: admits arrivals and asks every active job actor for its view (the
/// round boundary for the job). Every report of the round that ended is in the jobs'
/// mailboxes ahead of the request: each live node sent its reports before its round_done,
/// and CAF enqueues a message when it is sent (the middleman keeps one connection's order).
/// plan_and_dispatch follows once they answered.
void start_round(self_ptr self) {
  auto& st = self->state;
  if (st.stopping) return finish(self, true, "stopped by request", true);
  auto& start = st.starting;
  start.now = elapsed(self);
  start.wall0 = std::chrono::steady_clock::now();
  start.since = self->clock().now();
  for (const job* a : st.arrivals.admit(start.now)) {
    find_job(st, a->id)->arrived = true;
    ++st.job_set_version;
  }
  ++start.id;
  start.asked.clear();
  start.viewing.clear();
  start.answered.clear();
  start.silent.clear();
  // Only the jobs that ran in the round that ended (it closes that round for them) and those
  // whose view is due (new, or told of a lost node) are asked: a job that waited changed only
  // by what it pushed (a cancel, for one), so the round costs the jobs that ran, not the queue.
  for (auto& e : st.jobs) {
    if (!active_job(e)) continue;
    start.asked.push_back(&e);
    e.asked_view = !e.pieces.empty() || e.view_due;
    if (e.asked_view) start.viewing.push_back(&e);
  }
  start.left = start.viewing.size();
  start.open = true;
  self->become(self->state.phases.starting);
  if (start.left == 0) return plan_and_dispatch(self);
  // Plain messages, not requests (actors/job_actor.hpp: CAF's pending responses cost
  // quadratic time at thousands of jobs). No timer per job, nor per round (each costs a clock
  // entry on the round's critical path): the heartbeat scan leaves out the jobs still silent
  // after job_timeout (a job actor that died among them).
  for (auto* e : start.viewing) self->send(e->handle, view_atom::value, start.id);
}

/// A node reported every copy of a round; true when it was the current round's report of a
/// live node. A node that asked to leave goes now.
bool on_round_done(self_ptr self, const round_done& d) {
  auto& s = self->state;
  const int rank = sender_rank(self);
  if (rank < 0 || d.round != s.round) return false;
  s.pending.erase(rank);
  if (d.unsaved > 0)
    s.unsaved.insert(rank);
  else
    s.unsaved.erase(rank);
  return release_if_leaving(self, rank);
}

namespace {

/// Sends the orders held while nodes settled, and runs the round.
void send_held_orders(self_ptr self) {
  auto& s = self->state;
  s.holding_orders = false;
  s.settling.clear();
  send_orders(self, s.settle_orders);
  s.settle_orders.clear();
  self->become(s.phases.running);
}

}  // namespace

void on_settled(self_ptr self, int rank, std::int64_t round) {
  auto& s = self->state;
  if (rank < 0 || round != s.round || !s.holding_orders) return;
  s.settling.erase(rank);
  if (s.settling.empty()) send_held_orders(self);
}

void settle_overdue(self_ptr self, std::int64_t round) {
  auto& s = self->state;
  if (round != s.round || !s.holding_orders) return;
  if (!s.settling.empty())
    std::cerr << "tessera: round " << round << ": " << s.settling.size()
              << " node(s) did not let go of moved programs in time; the round starts without "
                 "waiting (a moved program resumes from its last checkpoint)\n";
  send_held_orders(self);
}

/// A copy of round `round` started (a live node's copy_started): once every copy of the
/// current round has, the round's dispatch latency is known.
void copy_started_in(self_ptr self, std::int64_t round) {
  auto& s = self->state;
  if (round != s.round || ++s.started != s.expected_starts) return;
  s.dispatch_latency.push_back(elapsed(self) - s.round_t0);
  s.dispatch_histogram.observe(s.dispatch_latency.back());
  if (!s.recent_rounds.empty() && s.recent_rounds.back().round == s.round)
    s.recent_rounds.back().dispatch_latency = s.dispatch_latency.back();
}

}  // namespace tessera::actors::sched
