#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <chrono>
#include <map>
#include <set>

#include "actors/dispatch.hpp"
#include "actors/status_views.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera::actors {

namespace {

using round_tick_atom = caf::atom_constant<caf::atom("rtick")>;      // round time is up
using round_deadline_atom = caf::atom_constant<caf::atom("rdeadline")>;  // reports overdue
using reports_check_atom = caf::atom_constant<caf::atom("rcheck")>;  // a node left: advance?
using hb_check_atom = caf::atom_constant<caf::atom("hbcheck")>;      // heartbeat scan
using reg_timeout_atom = caf::atom_constant<caf::atom("regtimeout")>;  // registration overdue
using run_timeout_atom = caf::atom_constant<caf::atom("runtimeout")>;  // max_seconds passed
using arrival_atom = caf::atom_constant<caf::atom("arrival")>;       // next arrival is due
using refused_atom = caf::atom_constant<caf::atom("refused")>;       // a node was refused
using finals_due_atom = caf::atom_constant<caf::atom("finalsdue")>;  // job summaries overdue
using journal_ack_atom = caf::atom_constant<caf::atom("jrnlack")>;   // a submission is on disk

using self_ptr = caf::stateful_actor<scheduler_state>*;

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(std::max(0.0, s)));
}

double seconds_between(caf::actor_clock::time_point a, caf::actor_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Seconds since the run started, on the actor system's clock.
double elapsed(self_ptr self) { return seconds_between(self->state.t0, self->clock().now()); }

job_entry* find_job(scheduler_state& st, std::int64_t id) {
  auto it = st.by_id.find(id);
  return it == st.by_id.end() ? nullptr : it->second;
}

/// The job whose actor sent the current message, or null (dropped, counted): only job actors
/// tell the scheduler about jobs.
job_entry* job_sender(self_ptr self) {
  auto& st = self->state;
  ++st.messages;
  auto it = st.by_job_actor.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  if (it != st.by_job_actor.end()) return it->second;
  ++st.dropped;
  return nullptr;
}

/// Writes to the journal what changed between a job's snapshots: its state, a cancel, a newer
/// confirmed checkpoint (a program's step, which has no file of ours).
void journal_changes(scheduler_state& st, const job_snapshot& was, const job_snapshot& now) {
  auto& log = *st.cfg.log;
  if (now.life != was.life) log.state_changed(now.id, now.life, now.step, st.round);
  if (now.status.state == "cancelling" && was.status.state != "cancelling")
    log.cancel_requested(now.id);
  const auto* newer = now.book.resume();
  const auto* older = was.book.resume();
  if (newer && (!older || newer->path != older->path)) log.checkpointed(now.id, *newer);
  else if (!newer && now.step != was.step) log.checkpointed(now.id, {"", st.round, now.step});
}

/// Keeps a job's latest snapshot; a job that ended changes the job set. What changed goes to
/// a served cluster's journal (not for a job's first snapshot: its submission says it).
void take_snapshot(scheduler_state& st, job_entry& e, job_snapshot&& snap, bool journal = true) {
  if (!e.ended() && is_final(snap.life)) ++st.job_set_version;
  if (journal && st.cfg.log) journal_changes(st, e.latest, snap);
  e.latest = std::move(snap);
}

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

/// Adds a job: its job actor (which owns it from now on), its entry and its place in the
/// arrival queue.
void add_job(self_ptr self, const run_job& rj, const restored_job* restored = nullptr) {
  auto& st = self->state;
  st.jobs.emplace_back();
  auto& e = st.jobs.back();
  e.spec = rj;
  st.rates->add(e.spec);  // may rename its job type: the job actor gets the key
  job_config jc;
  jc.spec = e.spec;
  for (const auto& sv : st.cfg.cl.servers) jc.rank_types.push_back(sv.gpu_type);
  jc.round_length = st.cfg.round_length;
  jc.checkpoint_dir = st.cfg.checkpoint_dir;
  jc.epoch_base = st.cfg.epoch_base;
  if (restored) jc.restored = *restored;
  take_snapshot(st, e, snapshot_of(make_job_data(jc)), false);
  e.handle = self->spawn(job_actor, std::move(jc), caf::actor_cast<caf::actor>(self));
  st.by_id[rj.spec.id] = &e;
  st.by_job_actor[e.handle.address()] = &e;
  st.arrivals.push(&e.spec.spec);
}

/// A job's end as far as the scheduler knows it, for a job actor that did not answer.
job_final final_from(const job_entry& e) {
  job_final f;
  auto& js = f.summary;
  js.id = e.spec.spec.id;
  js.kind = e.spec.kind;
  js.job_type = e.spec.spec.job_type;
  js.scale = e.spec.spec.scale_factor;
  js.total_steps = static_cast<std::int64_t>(e.spec.spec.total_steps);
  js.arrival = e.spec.spec.arrival;
  js.steps = e.latest.step;
  js.finished = e.latest.life == job_state::finished;
  js.canceled = e.latest.life == job_state::cancelled;
  js.failed = e.latest.life == job_state::failed;
  js.state = state_name(e.latest.life);
  js.checkpoint = e.latest.status.checkpoint;
  f.book = e.latest.book;
  return f;
}

/// Ends the run once every job's summary is in: shuts the live nodes down, sends the
/// summary, quits.
void complete_end(self_ptr self) {
  auto& st = self->state;
  auto& sum = st.ending.sum;
  std::string failed;
  for (const auto& f : st.ending.finals)
    if (f.summary.failed) failed += (failed.empty() ? "" : ", ") + std::to_string(f.summary.id);
  // A served cluster's jobs fail alone: stopping it is a success whatever they did.
  if (sum.ok && !failed.empty() && !st.stopping) {
    sum.ok = false;
    sum.error = "job(s) " + failed + " failed (see each job's failure)";
  }
  std::int64_t refused_reports = 0;
  std::map<std::int64_t, const checkpoint_book*> books;
  for (const auto& f : st.ending.finals) {
    sum.jobs.push_back(f.summary);
    sum.checkpoint_fallbacks += f.summary.checkpoint_fallbacks;
    sum.restarts_from_scratch += f.summary.restarts_from_scratch;
    refused_reports += f.dropped;
    books[f.summary.id] = &f.book;
  }
  sum.messages = st.messages;
  sum.dropped = st.dropped + refused_reports;
  sum.checkpoint_pauses = st.ckpts.health.pauses();
  before_round(st.ckpts, st.round, books, std::cerr);  // last strays
  // A failed program is the job's failure, not the run's: the nodes end normally.
  const std::int32_t code = sum.ok || !failed.empty() ? 0 : 1;
  for (auto& n : st.nodes)
    if (n.alive) self->send(n.handle, shutdown_atom::value, code);
  if (st.listener) self->send(st.listener, std::move(sum));
  self->quit();
}

/// Job `i`'s summary is in; the run ends with the last one.
void take_final(self_ptr self, std::size_t i, job_final&& f) {
  auto& end = self->state.ending;
  if (end.answered[i]) return;
  end.answered[i] = true;
  end.finals[i] = std::move(f);
  if (--end.left == 0) complete_end(self);
}

/// Job `i` gave no summary (`why`): its last known state stands in.
void final_missing(self_ptr self, std::size_t i, const std::string& why) {
  const auto& e = self->state.jobs[i];
  if (self->state.ending.answered[i]) return;
  std::cerr << "tessera: job " << e.spec.spec.id << " did not give its summary (" << why
            << "); its last known state is used\n";
  take_final(self, i, final_from(e));
}

/// Ends the run: asks every job actor for its summary (at a round boundary a cancel waiting
/// for it takes effect first), then complete_end.
void finish(self_ptr self, bool ok, std::string why, bool at_boundary = false) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  auto& sum = st.ending.sum;
  sum.ok = ok;
  sum.error = std::move(why);
  sum.rounds = st.round + 1;
  sum.seconds = elapsed(self);
  sum.failed_ranks = st.failed_ranks;
  sum.dispatch_latency = st.dispatch_latency;
  sum.round_records = st.round_records;
  sum.refused = st.refused;
  sum.joins = st.joins;
  st.ending.finals.resize(st.jobs.size());
  st.ending.answered.assign(st.jobs.size(), false);
  st.ending.left = st.jobs.size();
  if (st.ending.left == 0) return complete_end(self);
  // One timer for every answer (finish_missing): a timeout per request costs a clock entry each.
  std::size_t i = 0;
  for (auto& e : st.jobs) {
    self->request(e.handle, caf::infinite, summary_atom::value, at_boundary)
        .then([=](job_final& f) { take_final(self, i, std::move(f)); },
              [=](caf::error& err) { final_missing(self, i, describe(self->system(), err)); });
    ++i;
  }
  self->delayed_send(self, seconds(st.cfg.job_timeout), finals_due_atom::value);
}

/// The jobs that did not give their summaries in time end with their last known state.
void finals_overdue(self_ptr self) {
  auto& end = self->state.ending;
  for (std::size_t i = 0; i < end.answered.size(); ++i)
    if (!end.answered[i]) final_missing(self, i, "no answer within the job time-out");
}

caf::behavior idle(self_ptr self);
caf::behavior starting(self_ptr self);
caf::behavior running(self_ptr self);
caf::behavior draining(self_ptr self);

/// Marks a node lost: its copies' progress this round is gone and they are replanned (each
/// job of the round with a part on it is told, and fences its checkpoint writers). A draining
/// round that waited only for it moves on (reports_check_atom).
void node_lost(self_ptr self, int rank, const std::string& why) {
  auto& st = self->state;
  auto& n = st.nodes[rank];
  if (!n.alive) return;
  n.alive = false;
  st.failed_ranks.push_back(rank);
  // Fenced: whatever it sends from now on is refused, and it is told so.
  st.by_addr.erase(n.handle.address());
  st.fenced.insert(n.handle.address());
  self->send(n.handle, fenced_atom::value, "declared lost: " + why);
  std::cerr << "tessera: node rank " << rank << " (" << n.hello.host << ", pid " << n.hello.pid
            << ") lost: " << why << "; its copies resume from their last checkpoints\n";
  for (auto& e : st.jobs) {
    const auto on_rank = [&](const copy_piece& p) { return p.rank == rank; };
    if (std::none_of(e.pieces.begin(), e.pieces.end(), on_rank)) continue;
    self->send(e.handle, node_lost_atom::value, st.round, static_cast<std::int32_t>(rank));
    e.pieces.erase(std::remove_if(e.pieces.begin(), e.pieces.end(), on_rank), e.pieces.end());
  }
  ++st.job_set_version;
  st.have_last = false;
  st.pending.erase(rank);
  if (std::none_of(st.nodes.begin(), st.nodes.end(), [](const node_record& r) { return r.alive; })) {
    finish(self, false, "every node was lost");
    return;
  }
  self->send(self, reports_check_atom::value);
}

/// The cluster of live nodes; a change invalidates the last plan and the jobs' last types.
void refresh_live_cluster(scheduler_state& st) {
  std::vector<int> live_ranks;
  std::vector<server> servers;
  for (std::size_t r = 0; r < st.nodes.size(); ++r)
    if (st.nodes[r].alive) {
      live_ranks.push_back(static_cast<int>(r));
      servers.push_back(st.cfg.cl.servers[r]);
    }
  if (live_ranks == st.live_ranks) return;
  st.live_ranks = live_ranks;
  st.live = make_cluster(std::move(servers));
  st.have_last = false;
  ++st.job_set_version;
  ++st.live_generation;  // the jobs' last types index the previous live cluster
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
                                    st.nodes[rank].handle, c.partner >= 0});
      ++st.expected_starts;
    }
  for (const auto& as : p.assignments) {
    auto it = out.find(as.job);
    if (it == out.end()) continue;
    for (const auto& sh : as.shares) it->second.planned[st.live_ranks[sh.server]] += sh.gpus * p.length;
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
  dispatch_context dc{&cfg.cl, st.live_ranks, cfg.can_sync, st.round + 1, cfg.round_length,
                      cfg.report_grace, cfg.checkpoint_dir, {}, cfg.master_port_base};
  for (const auto& n : st.nodes) dc.hosts.push_back(n.hello.host);
  dc.rates = &st.rates->for_live(st.live, st.live_ranks);
  std::map<std::int64_t, dispatch_job> known;
  for (const auto* e : planned)
    known[e->spec.spec.id] = dispatch_job{&e->spec, e->latest.step, e->latest.sync_epoch,
                                          &e->latest.book, &e->latest.measured};
  auto orders = dispatch_plan(p, dc, [&](std::int64_t id) -> const dispatch_job* {
    auto it = known.find(id);
    return it == known.end() ? nullptr : &it->second;
  }, cfg.pol->name());
  if (!orders) return orders;
  for (auto& [rank, o] : *orders)
    for (auto& c : o.copies) c.job_actor = find_job(st, c.job)->handle;
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
    std::cerr << "tessera: round " << st.round << " at " << st.round_t0 << " s: "
              << st.expected_starts << " parts on " << st.live_ranks.size() << " nodes\n";
  self->delayed_send(self, seconds(cfg.round_length), round_tick_atom::value, st.round);
  st.round_deadline = cfg.round_length + cfg.report_grace + program_grace;
  self->delayed_send(self, seconds(st.round_deadline), round_deadline_atom::value, st.round);
}

/// With every asked job's view in (or its time up): plans the round exactly as the simulator
/// does (runtime/core/round_loop.hpp), tells every job its assignment and the nodes their orders;
/// or waits for the next arrival when no job is active, or ends the run when none is left.
void plan_and_dispatch(self_ptr self) {
  auto& st = self->state;
  auto& start = st.starting;
  start.open = false;
  if (st.done) return;
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
      self->delayed_send(self, seconds(st.arrivals.next_arrival() - start.now), arrival_atom::value);
    self->become(self->state.phases.idle);
    return;
  }
  refresh_live_cluster(st);
  const bool wait = checkpoints_wait(st);
  auto plan = plan_now(st, planned, wait);
  if (!plan) return finish(self, false, "policy " + st.cfg.pol->name() + ": " + plan.err().message);
  auto orders = orders_of(st, plan->plan, planned);
  if (!orders) return finish(self, false, orders.err().message);
  ++st.round;
  st.round_t0 = start.now;
  auto assignments = book_round(st, plan->plan, *orders);
  for (auto* e : assigned) {
    auto& a = assignments[e->spec.spec.id];  // none: left out
    a.round = st.round;
    a.start = plan->plan.start;
    a.run_start = st.t0;
    a.live_generation = st.live_generation;
    a.paused = wait;
    self->send(e->handle, std::move(a));
  }
  st.round_records.push_back(record_round(plan->plan, st.live.total_gpus(),
                                          static_cast<int>(assigned.size())));
  note_round(st, *orders,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start.wall0).count());
  send_orders(self, *orders);
  st.last_plan = std::move(plan->plan);
  st.have_last = true;
  self->become(self->state.phases.running);
}

/// A job's answer to the view request of round start `id`.
void on_view(self_ptr self, std::uint64_t id, job_entry& e, job_snapshot&& snap) {
  auto& st = self->state;
  ++st.messages;
  if (st.done) return;
  take_snapshot(st, e, std::move(snap));
  auto& start = st.starting;
  if (!start.open || start.id != id || !start.answered.insert(e.spec.spec.id).second) return;
  if (--start.left == 0) plan_and_dispatch(self);
}

/// Job `e` gave no view for round start `id` (`why`): it is left out of the round (logged).
void view_missing(self_ptr self, std::uint64_t id, job_entry& e, const std::string& why) {
  auto& start = self->state.starting;
  if (self->state.done || !start.open || start.id != id || start.answered.count(e.spec.spec.id))
    return;
  std::cerr << "tessera: job " << e.spec.spec.id << " did not give its view (" << why
            << "); it is left out of round " << self->state.round + 1 << '\n';
  start.answered.insert(e.spec.spec.id);  // answered, without a view: left out
  start.silent.insert(e.spec.spec.id);
  if (--start.left == 0) plan_and_dispatch(self);
}

/// At a heartbeat scan: when the round start has waited job_timeout for views, every job
/// still silent is left out of the round.
void check_views(self_ptr self) {
  const auto& start = self->state.starting;
  if (!start.open ||
      seconds_between(start.since, self->clock().now()) < self->state.cfg.job_timeout)
    return;
  const auto asked = start.asked;
  for (auto* e : asked) view_missing(self, start.id, *e, "no answer within the job time-out");
}

/// Starts the next round: admits arrivals and asks every active job actor for its view (the
/// round boundary for the job). Every report of the round that ended is in the jobs'
/// mailboxes ahead of the request: each live node sent its reports before its round_done,
/// and CAF enqueues a message when it is sent (the middleman keeps one connection's order).
/// plan_and_dispatch follows once they answered.
void start_round(self_ptr self) {
  auto& st = self->state;
  if (st.done) return;
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
  start.answered.clear();
  start.silent.clear();
  for (auto& e : st.jobs)
    if (active_job(e)) start.asked.push_back(&e);
  start.left = start.asked.size();
  start.open = true;
  self->become(self->state.phases.starting);
  if (start.left == 0) return plan_and_dispatch(self);
  // No timer per request, nor per round (each costs a clock entry on the round's critical
  // path): the heartbeat scan leaves out the jobs still silent after job_timeout.
  const auto id = start.id;
  for (auto* e : start.asked)
    self->request(e->handle, caf::infinite, view_atom::value)
        .then([=](job_snapshot& snap) { on_view(self, id, *e, std::move(snap)); },
              [=](caf::error& err) { view_missing(self, id, *e, describe(self->system(), err)); });
}

/// The live node whose actor is `a`, or -1.
int rank_of(const scheduler_state& st, const caf::actor_addr& a) {
  auto it = st.by_addr.find(a);
  return it == st.by_addr.end() ? -1 : it->second;
}

/// The live node that sent the current message, or -1. Every message counts; one from any
/// other actor is dropped (counted), and a fenced node is reminded that it was declared lost.
int sender_rank(self_ptr self) {
  auto& st = self->state;
  ++st.messages;
  const auto addr = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (const int rank = rank_of(st, addr); rank >= 0) {
    st.nodes[rank].last_seen = self->clock().now();
    return rank;
  }
  ++st.dropped;
  if (st.fenced.count(addr))
    self->send(caf::actor_cast<caf::actor>(self->current_sender()), fenced_atom::value,
               std::string("this node was declared lost; its reports are refused"));
  return -1;
}

/// True when the current message comes from an actor of the scheduler's own process: the
/// only clients allowed to submit or cancel jobs until clients authenticate.
bool local_sender(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

/// Why node `h` cannot register, or no error.
caf::error refusal_of(const scheduler_state& st, const node_hello& h) {
  const int n = static_cast<int>(st.nodes.size());
  const std::string who = "node rank " + std::to_string(h.rank) + " (" + h.host + ", pid " +
                          std::to_string(h.pid) + ")";
  if (h.version != protocol_version)
    return make_run_error(run_errc::protocol_mismatch,
                          who + " speaks protocol version " + std::to_string(h.version) +
                              ", this scheduler speaks version " +
                              std::to_string(protocol_version));
  if (h.rank < 0 || h.rank >= n)
    return make_run_error(run_errc::unknown_node,
                          who + " is not in the cluster file, which lists " + std::to_string(n) +
                              " servers (ranks 0.." + std::to_string(n - 1) + ")");
  if (st.nodes[h.rank].alive)
    return make_run_error(run_errc::duplicate_node,
                          who + ": rank " + std::to_string(h.rank) + " is held by a live node");
  const auto& sv = st.cfg.cl.servers[h.rank];
  if (sv.gpu_type != h.gpu_type || sv.gpus != h.gpus || sv.speed != h.speed)
    return make_run_error(run_errc::unknown_node,
                          who + " describes its server differently from the scheduler's "
                                "cluster file (" + h.gpu_type + " x" + std::to_string(h.gpus) +
                              " vs " + sv.gpu_type + " x" + std::to_string(sv.gpus) + ")");
  return {};
}

/// Refuses a registration: logged and counted. Only a proven node whose configuration the
/// cluster cannot take, before the run started, ends the run (the cluster can never be
/// complete); a stranger or a second claim on a live rank leaves the run as it is.
caf::error refuse(self_ptr self, const caf::error& why, bool fatal) {
  auto& st = self->state;
  ++st.refused;
  const std::string text = describe(self->system(), why);
  std::cerr << "tessera: refused " << text << '\n';
  if (fatal) self->send(self, refused_atom::value, text);
  return why;
}

/// Starts the run once every node of the cluster file has registered.
void start_if_complete(self_ptr self) {
  auto& st = self->state;
  if (st.run_started || !std::all_of(st.nodes.begin(), st.nodes.end(),
                                 [](const node_record& r) { return r.registered; }))
    return;
  st.run_started = true;
  st.t0 = self->clock().now();
  self->send(self, hb_check_atom::value);
  self->send(self, arrival_atom::value);
  self->become(self->state.phases.idle);
}

/// Registers a node that proved the cluster secret; after the start it joins the live
/// cluster from the next round.
caf::result<node_welcome> register_node(self_ptr self, const node_hello& h) {
  auto& st = self->state;
  ++st.messages;
  const auto who = caf::actor_cast<caf::actor_addr>(self->current_sender());
  const auto nonces = st.challenges.take(who);
  if (!nonces || !hello_is_proven(st.cfg.secret, h, *nonces))
    return refuse(self,
                  make_run_error(run_errc::unauthenticated,
                                 "a registration as node rank " + std::to_string(h.rank) + " (" +
                                     h.host + ", pid " + std::to_string(h.pid) +
                                     ") without a valid proof of the cluster secret"),
                  false);
  if (auto refusal = refusal_of(st, h))
    return refuse(self, refusal,
                  !st.run_started && refusal.code() != static_cast<std::uint8_t>(run_errc::duplicate_node));
  auto& rec = st.nodes[h.rank];
  if (rec.handle) st.by_addr.erase(rec.handle.address());
  rec.handle = caf::actor_cast<caf::actor>(self->current_sender());
  rec.registered = true;
  rec.alive = true;
  rec.leaving = false;
  rec.hello = h;
  rec.last_seen = self->clock().now();
  st.by_addr[who] = h.rank;
  st.fenced.erase(who);
  self->monitor(rec.handle);
  if (st.run_started) {
    ++st.joins;
    ++st.job_set_version;
    std::cerr << "tessera: node rank " << h.rank << " (" << h.host << ", pid " << h.pid
              << ") joined; it gets work from the next round\n";
  }
  start_if_complete(self);
  return node_welcome{h.rank, st.cfg.round_length, st.cfg.heartbeat_interval};
}

/// Answers a registration's first message with the scheduler's nonce and proof.
caf::result<auth_challenge> challenge(self_ptr self, const auth_request& r) {
  auto& st = self->state;
  ++st.messages;
  nonce_pair issued;
  auto answer = answer_request(st.cfg.secret, r, issued);
  if (!answer) {
    ++st.dropped;
    return make_run_error(run_errc::unauthenticated, answer.err().message);
  }
  st.challenges.issue(caf::actor_cast<caf::actor_addr>(self->current_sender()), std::move(issued));
  return std::move(*answer);
}

/// Shuts a node that asked to leave down once it has reported the current round.
void release_if_leaving(self_ptr self, int rank) {
  auto& st = self->state;
  auto& n = st.nodes[rank];
  if (!n.alive || !n.leaving || st.pending.count(rank)) return;
  n.alive = false;
  st.by_addr.erase(n.handle.address());
  ++st.job_set_version;
  self->send(n.handle, shutdown_atom::value, std::int32_t{0});
  std::cerr << "tessera: node rank " << rank << " left the cluster (drained)\n";
  // Under a stop every node drains too (mpirun forwards the signal): that is the stop.
  if (std::none_of(st.nodes.begin(), st.nodes.end(), [](const node_record& r) { return r.alive; }))
    finish(self, st.stopping, st.stopping ? "stopped by request" : "every node left");
}

/// Loses every live node that has not been heard from within the heartbeat timeout.
void check_heartbeats(self_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  for (std::size_t r = 0; r < st.nodes.size(); ++r) {
    if (!st.nodes[r].alive) continue;
    const double silent = seconds_between(st.nodes[r].last_seen, now);
    if (silent > st.cfg.heartbeat_timeout)
      node_lost(self, static_cast<int>(r), "no heartbeat for " + std::to_string(silent) + " s");
  }
  check_views(self);
  if (!st.done)
    self->delayed_send(self, seconds(st.cfg.heartbeat_interval), hb_check_atom::value);
}

/// Why a client's job cannot be accepted ("" when it can): the scheduler's own checks, for
/// clients that did not read it through runtime/core/job_file.hpp.
std::string job_refusal(const scheduler_config& cfg, const run_job& rj) {
  if (!rj.is_program() && std::find(cfg.known_kinds.begin(), cfg.known_kinds.end(), rj.kind) ==
                              cfg.known_kinds.end())
    return "unknown job kind '" + rj.kind + "'";
  // The job-file bound (runtime/core/input_limits.hpp) also keeps total_steps exact through the
  // double the job spec holds and back to int64 (summarise, dispatch).
  if (!(rj.spec.total_steps > 0) || rj.spec.total_steps > limits::max_total_steps ||
      rj.spec.scale_factor < 1 || !(rj.step_time > 0))
    return "a job needs total_steps in (0, 1e11], scale_factor >= 1 and step_time > 0";
  // As `tessera run` checks its job file: a gang needs a GPU type with its K GPUs, unless
  // the policy stacks tasks (hare).
  if (cfg.pol && !cfg.pol->stacks_tasks() &&
      std::none_of(cfg.cl.types.begin(), cfg.cl.types.end(), [&](const gpu_type& t) {
        return t.gpus >= rj.spec.scale_factor;
      }))
    return "scale_factor " + std::to_string(rj.spec.scale_factor) +
           ": no GPU type of the cluster has that many GPUs, so policy " + cfg.pol->name() +
           " cannot place it";
  return "";
}

/// Adds accepted jobs; their ids.
std::vector<std::int64_t> add_jobs(self_ptr self, const std::vector<run_job>& jobs) {
  std::vector<std::int64_t> ids;
  for (const auto& rj : jobs) {
    add_job(self, rj);
    ids.push_back(rj.spec.id);
  }
  return ids;
}

/// A client's new jobs: checked, given ids, queued for admission; all or none.
caf::result<std::vector<std::int64_t>> submit(self_ptr self, const submit_job& sj) {
  auto& s = self->state;
  ++s.messages;
  if (!local_sender(self)) {
    ++s.dropped;
    return make_run_error(run_errc::unauthenticated, "submit_job from a remote actor");
  }
  std::int64_t next = 0;
  for (const auto& j : s.jobs) next = std::max<std::int64_t>(next, j.spec.spec.id + 1);
  std::set<std::int64_t> taken;  // ids given in this batch, and those of unsynced batches
  for (const auto& rj : sj.jobs)
    if (rj.id_given) taken.insert(rj.spec.id);
  std::set<std::int64_t> waiting;
  for (const auto& [t, batch] : s.unsynced)
    for (const auto& rj : batch.first) waiting.insert(rj.spec.id);
  taken.insert(waiting.begin(), waiting.end());
  std::vector<run_job> accepted;
  for (std::size_t i = 0; i < sj.jobs.size(); ++i) {
    run_job rj = sj.jobs[i];
    const std::string which = "job[" + std::to_string(i) + "]: ";
    if (auto why = job_refusal(s.cfg, rj); !why.empty())
      return make_run_error(run_errc::bad_job, which + why);
    if (rj.id_given && (find_job(s, rj.spec.id) || waiting.count(rj.spec.id)))
      return make_run_error(run_errc::bad_job,
                            which + "job id " + std::to_string(rj.spec.id) + " is taken");
    if (!rj.id_given) {
      while (find_job(s, next) || taken.count(next)) ++next;
      rj.spec.id = next++;
    }
    if (s.run_started) rj.spec.arrival += elapsed(self);  // before the start: from the start
    rj.id_given = true;
    accepted.push_back(std::move(rj));
  }
  if (!s.cfg.log) return add_jobs(self, accepted);
  // Durable before acknowledged: the jobs join once their record is on disk (on_synced).
  auto promise = self->make_response_promise<std::vector<std::int64_t>>();
  const auto ticket = s.next_ticket++;
  s.unsynced.emplace(ticket, std::make_pair(accepted, promise));
  s.cfg.log->submitted(accepted, [relay = s.journal_relay, ticket](std::string err) {
    caf::anon_send(relay, journal_ack_atom::value, ticket, std::move(err));
  });
  return promise;
}

/// A submission's journal record is on disk (or failed: `err`): its jobs join, its client
/// gets their ids (or the error).
void on_synced(self_ptr self, std::uint64_t ticket, const std::string& err) {
  auto& s = self->state;
  if (!local_sender(self)) return;
  auto it = s.unsynced.find(ticket);
  if (it == s.unsynced.end()) return;
  auto [jobs, promise] = std::move(it->second);
  s.unsynced.erase(it);
  if (!err.empty()) {
    promise.deliver(make_run_error(run_errc::unavailable, "the journal did not take it: " + err));
    return;
  }
  promise.deliver(add_jobs(self, jobs));
  self->send(self, arrival_atom::value);
}

/// A client's cancel, delegated to the job's actor (which answers): a job not running now is
/// cancelled at once; a running one finishes its round (and checkpoint) and is cancelled at
/// the boundary.
caf::result<cancel_outcome> cancel(self_ptr self, std::int64_t id) {
  auto& s = self->state;
  ++s.messages;
  if (!local_sender(self)) {
    ++s.dropped;
    return make_run_error(run_errc::unauthenticated, "cancel_job from a remote actor");
  }
  auto* e = find_job(s, id);
  if (!e) return cancel_outcome::unknown;
  if (e->ended()) return cancel_outcome::ended;
  self->delegate(e->handle, cancel_job{id});
  return caf::delegated<cancel_outcome>{};
}

/// A client asks the cluster to stop: now when no round is in flight, else at its end.
bool stop(self_ptr self) {
  auto& s = self->state;
  if (!local_sender(self)) {
    ++s.dropped;
    return false;
  }
  s.stopping = true;
  if (!s.run_started || s.pending.empty()) finish(self, true, "stopped by request");
  return true;
}

/// A node reported every copy of a round; true when it was the current round's report of a
/// live node. A node that asked to leave goes now.
bool on_round_done(self_ptr self, const round_done& d) {
  auto& s = self->state;
  const int rank = sender_rank(self);
  if (rank < 0 || d.round != s.round) return false;
  s.pending.erase(rank);
  release_if_leaving(self, rank);
  return !s.done;
}

/// A node report sent to the scheduler instead of its job's actor: dropped, counted.
void misdirected(self_ptr self) {
  if (sender_rank(self) >= 0) ++self->state.dropped;  // others were counted by sender_rank
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

/// What every state after registration handles the same way.
caf::message_handler common(self_ptr self) {
  return {
      [=](const auth_request& r) { return challenge(self, r); },
      [=](const node_hello& h) { return register_node(self, h); },
      [=](refused_atom, const std::string& text) { finish(self, false, text); },
      [=](run_timeout_atom) {
        finish(self, false,
               "the run did not end within " + std::to_string(self->state.cfg.max_seconds) +
                   " s");
      },
      [=](const heartbeat&) { sender_rank(self); },
      [=](hb_check_atom) { check_heartbeats(self); },
      [=](leave_atom) {
        const int rank = sender_rank(self);
        if (rank < 0) return;
        self->state.nodes[rank].leaving = true;
        std::cerr << "tessera: node rank " << rank << " asked to leave after this round\n";
        release_if_leaving(self, rank);
      },
      // A node tells its copies' starts to the scheduler too (dispatch latency); their other
      // reports go to the job actors (start_copy::job_actor): one sent here is dropped.
      [=](const copy_started& c) {
        if (sender_rank(self) >= 0) copy_started_in(self, c.round);
      },
      [=](const progress_report&) { misdirected(self); },
      [=](const checkpoint_done&) { misdirected(self); },
      [=](const job_finished&) { misdirected(self); },
      [=](job_snapshot& snap) {
        if (auto* e = job_sender(self)) take_snapshot(self->state, *e, std::move(snap));
      },
      [=](const rate_sample& r) {
        if (job_sender(self))
          self->state.rates->record(r.rank, r.job_type, r.scale, r.task_times, r.steps_per_s);
      },
      [=](write_failed_atom, std::int64_t job, const std::string& why) {
        if (job_sender(self)) note_dir_failure(self->state.ckpts, job, why, std::cerr);
      },
      [=](const round_done& d) { on_round_done(self, d); },
      [=](const submit_job& sj) { return submit(self, sj); },
      [=](journal_ack_atom, std::uint64_t ticket, const std::string& err) {
        on_synced(self, ticket, err);
      },
      [=](const cancel_job& c) { return cancel(self, c.job); },
      [=](stop_atom) { return stop(self); },
      [=](jobs_atom, std::int64_t id, bool placements) {
        return job_statuses(self->state, id, placements);
      },
      [=](nodes_atom) { return node_statuses(self->state); },
      [=](rounds_atom, std::int32_t limit) { return round_statuses(self->state, limit); },
      [=](cluster_atom) { return cluster_of(self->state, elapsed(self)); },
      // Timers of other states, and arrivals while a round runs (the next round admits
      // them), need nothing here.
      [=](round_tick_atom, std::int64_t) {},
      [=](round_deadline_atom, std::int64_t) {},
      [=](reports_check_atom) {},
      [=](finals_due_atom) {
        if (self->state.done && self->state.ending.left > 0) finals_overdue(self);
      },
      [=](arrival_atom) {},
      [=](reg_timeout_atom) {},
  };
}

/// Loses the nodes that have not reported round `round` by its deadline.
void lose_late_nodes(self_ptr self, std::int64_t round) {
  auto& s = self->state;
  const std::set<int> late = s.pending;
  for (int r : late)
    node_lost(self, r,
              "no report for round " + std::to_string(round) + " within " +
                  std::to_string(s.round_deadline) + " s");
}

/// Registering: nodes register until every server of the cluster file has one.
caf::behavior registering(self_ptr self) {
  return caf::message_handler{
      [=](reg_timeout_atom) {
        auto& s = self->state;
        std::string missing;
        for (std::size_t r = 0; r < s.nodes.size(); ++r)
          if (!s.nodes[r].registered) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        finish(self, false,
               "not every node registered within " + std::to_string(s.cfg.register_timeout) +
                   " s; missing ranks: " + missing);
      },
  }.or_else(common(self));
}

/// Idle: no job is active; the next arrival (a timer, or a submission) starts a round.
caf::behavior idle(self_ptr self) {
  return caf::message_handler{
      [=](arrival_atom) { start_round(self); },
      [=](const submit_job& sj) {
        auto ids = submit(self, sj);
        self->send(self, arrival_atom::value);
        return ids;
      },
  }.or_else(common(self));
}

/// Starting: the round's views are being collected (start_round, plan_and_dispatch). A
/// cancel waits until the round is dispatched, so it meets the job in the round's
/// assignment (as when no view is pending: the job then runs until the boundary).
caf::behavior starting(self_ptr self) {
  return caf::message_handler{
      [=](const cancel_job&) -> caf::result<cancel_outcome> { return caf::skip; },
  }.or_else(common(self));
}

/// Running: the round's orders are out and its time is not up.
caf::behavior running(self_ptr self) {
  return caf::message_handler{
      [=](round_tick_atom, std::int64_t round) {
        auto& s = self->state;
        if (round != s.round) return;
        if (s.pending.empty())
          start_round(self);
        else
          self->become(self->state.phases.draining);
      },
  }.or_else(common(self));
}

/// Draining: the round's time is up; the next round starts once every live node reported
/// (or was lost by the round's deadline).
caf::behavior draining(self_ptr self) {
  return caf::message_handler{
      [=](const round_done& d) {
        if (on_round_done(self, d) && self->state.pending.empty()) start_round(self);
      },
      [=](reports_check_atom) {
        if (self->state.pending.empty()) start_round(self);
      },
      [=](round_deadline_atom, std::int64_t round) {
        if (round != self->state.round) return;
        lose_late_nodes(self, round);
        if (!self->state.done) start_round(self);
      },
  }.or_else(common(self));
}

}  // namespace

caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, scheduler_config cfg,
                              caf::actor listener) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.listener = listener;
  st.t0 = self->clock().now();
  st.nodes.resize(st.cfg.cl.servers.size());
  st.rates = std::make_shared<run_rates>(st.cfg.cl, st.cfg.colocation);
  st.round = st.cfg.first_round - 1;
  for (const auto& r : st.cfg.restored) add_job(self, r.spec, &r);
  for (const auto& rj : st.cfg.jobs) add_job(self, rj);
  if (st.cfg.log)
    st.journal_relay = self->spawn<caf::linked>(
        [sched = caf::actor_cast<caf::actor>(self)](caf::event_based_actor* relay) -> caf::behavior {
          return {[=](journal_ack_atom a, std::uint64_t ticket, std::string& err) {
            relay->send(sched, a, ticket, std::move(err));
          }};
        });
  self->set_down_handler([=](caf::down_msg& d) {
    ++self->state.messages;
    const int rank = rank_of(self->state, d.source);
    if (rank >= 0)
      node_lost(self, rank, "its actor went down (" + describe(self->system(), d.reason) + ")");
    self->state.fenced.erase(d.source);  // gone: nothing more can come from it
  });
  st.ckpts.dir = st.cfg.checkpoint_dir;
  st.ckpts.probe_errno = st.cfg.hooks.checkpoint_probe_errno;
  // Built once: a behaviour of this many handlers costs tens of microseconds to build, and
  // the scheduler changes phase two or three times a round.
  st.phases = {idle(self), starting(self), running(self), draining(self)};
  self->delayed_send(self, seconds(st.cfg.register_timeout), reg_timeout_atom::value);
  if (st.cfg.max_seconds > 0)
    self->delayed_send(self, seconds(st.cfg.max_seconds), run_timeout_atom::value);
  return registering(self);
}

}  // namespace tessera::actors
