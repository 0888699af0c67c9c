#include "actors/scheduler_actor.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <chrono>
#include <map>
#include <set>

#include "actors/dispatch.hpp"
#include "actors/status_views.hpp"
#include "runtime/input_limits.hpp"

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

tracked_job make_tracked(const run_job& rj, std::size_t ranks) {
  tracked_job t;
  t.spec = rj;
  t.planned.assign(ranks, 0.0);
  t.busy.assign(ranks, 0.0);
  t.throughput.assign(ranks, 0.0);
  return t;
}

tracked_job* find_job(scheduler_state& st, std::int64_t id) {
  auto it = st.by_id.find(id);
  return it == st.by_id.end() ? nullptr : it->second;
}

/// Moves a job through its life (runtime/job_life.hpp); an illegal event is logged and
/// changes nothing (false).
bool advance(scheduler_state& st, tracked_job& j, job_event e) {
  auto to = next_state(j.life, e);
  if (!to) {
    std::cerr << "tessera: job " << j.spec.spec.id << ": " << to.err().message << "; ignored\n";
    return false;
  }
  if (*to != j.life && st.cfg.log) st.cfg.log->state_changed(j.spec.spec.id, *to, j.step, st.round);
  j.life = *to;
  return true;
}

/// Every job's checkpoint book, by job id.
std::map<std::int64_t, const checkpoint_book*> checkpoint_books(const scheduler_state& st) {
  std::map<std::int64_t, const checkpoint_book*> books;
  for (const auto& j : st.jobs) books[j.spec.spec.id] = &j.ckpt.book;
  return books;
}

/// Admitted and neither finished nor cancelled: the policy plans it.
bool active_job(const tracked_job& j) { return j.arrived && !is_final(j.life); }

/// Whether the active jobs wait for the checkpoint directory this round (counted per job);
/// probes it while they do and removes stray files (actors/checkpoints.hpp).
bool checkpoints_wait(scheduler_state& st) {
  if (!before_round(st.ckpts, st.round, checkpoint_books(st), std::cerr)) return false;
  for (auto& j : st.jobs)
    if (active_job(j)) ++j.ckpt.paused_rounds;
  return true;
}

/// The round of a run whose jobs all wait: nothing runs, the round's timer still ticks.
planned_round waiting_round(const round_context& ctx) {
  planned_round r;
  r.plan.start = ctx.now;
  r.plan.length = ctx.round_length;
  return r;
}

/// Adds a job to the books and to the arrival queue.
void add_job(scheduler_state& st, const run_job& rj) {
  st.jobs.push_back(make_tracked(rj, st.nodes.size()));
  st.by_id[rj.spec.id] = &st.jobs.back();
  st.jobs.back().ckpt.book = checkpoint_book(st.cfg.epoch_base);
  st.rates->add(st.jobs.back().spec);
  st.arrivals.push(&st.jobs.back().spec.spec);
}

/// A job a resume brings back from the journal: its state as it was (one that ran comes back
/// preempted), its confirmed checkpoints, a cancel that was waiting.
void restore_job(scheduler_state& st, const restored_job& r) {
  add_job(st, r.spec);
  auto& j = st.jobs.back();
  j.cancel_requested = r.cancel_requested;
  j.step = r.step;
  for (const auto& f : r.checkpoints)
    if (!f.path.empty()) note_confirmed(j.ckpt, r.spec.spec.id, f, std::cerr);
  j.life = r.life == job_state::running ? job_state::preempted : r.life;
}

job_summary summarise(const tracked_job& j) {
  job_summary js;
  js.id = j.spec.spec.id;
  js.kind = j.spec.kind;
  js.job_type = j.spec.spec.job_type;
  js.scale = j.spec.spec.scale_factor;
  js.total_steps = static_cast<std::int64_t>(j.spec.spec.total_steps);
  js.finished = j.finished();
  js.canceled = j.canceled();
  js.arrival = j.spec.spec.arrival;
  js.first_start = j.first_start;
  js.finish = j.finish;
  js.jct = j.finished() ? j.finish - j.spec.spec.arrival : -1;
  js.steps = j.step;
  js.run_time = j.run_time;
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
  js.checkpoint_fallbacks = j.ckpt.fallbacks;
  js.restarts_from_scratch = j.ckpt.restarts_from_scratch;
  js.checkpoint_write_failures = j.ckpt.write_failures;
  js.paused_rounds = j.ckpt.paused_rounds;
  if (const auto* f = j.ckpt.book.resume()) js.checkpoint = f->path;
  js.failed = j.failed();
  js.state = state_name(j.life);
  js.failure = j.failure;
  js.program_failures = j.program_failures;
  js.startup_seconds = j.startups > 0 ? j.startup_sum / j.startups : 0;
  return js;
}

/// Ends the run: shuts the live nodes down, sends the summary, quits.
void finish(self_ptr self, bool ok, std::string why) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  run_summary sum;
  sum.ok = ok;
  sum.error = why;
  sum.rounds = st.round + 1;
  sum.seconds = elapsed(self);
  sum.failed_ranks = st.failed_ranks;
  sum.dispatch_latency = st.dispatch_latency;
  sum.round_records = st.round_records;
  sum.messages = st.messages;
  sum.dropped = st.dropped;
  sum.refused = st.refused;
  sum.joins = st.joins;
  std::string failed;
  for (const auto& j : st.jobs)
    if (j.failed()) failed += (failed.empty() ? "" : ", ") + std::to_string(j.spec.spec.id);
  // A served cluster's jobs fail alone: stopping it is a success whatever they did.
  if (ok && !failed.empty() && !st.stopping) {
    ok = false;
    why = "job(s) " + failed + " failed (see each job's failure)";
  }
  sum.ok = ok;
  sum.error = why;
  for (const auto& j : st.jobs) {
    sum.jobs.push_back(summarise(j));
    sum.checkpoint_fallbacks += j.ckpt.fallbacks;
    sum.restarts_from_scratch += j.ckpt.restarts_from_scratch;
  }
  sum.checkpoint_pauses = st.ckpts.health.pauses();
  before_round(st.ckpts, st.round, checkpoint_books(st), std::cerr);  // last strays
  // A failed program is the job's failure, not the run's: the nodes end normally.
  const std::int32_t code = ok || !failed.empty() ? 0 : 1;
  for (auto& n : st.nodes)
    if (n.alive) self->send(n.handle, shutdown_atom::value, code);
  if (st.listener) self->send(st.listener, std::move(sum));
  self->quit();
}

caf::behavior idle(self_ptr self);
caf::behavior running(self_ptr self);
caf::behavior draining(self_ptr self);

/// Marks a node lost: its copies' progress this round is gone and they are replanned. A
/// draining round that waited only for it moves on (reports_check_atom).
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
  for (auto& j : st.jobs)
    if (!j.reported && std::any_of(j.pieces.begin(), j.pieces.end(),
                                   [&](const copy_piece& p) { return p.rank == rank; })) {
      if (!j.round_failed) ++j.lost_rounds;
      j.round_failed = true;
      ++j.sync_epoch;  // the parts left may be stuck in a collective with the lost node
      fence_job(j.ckpt, st.ckpts, j.spec.spec.id, std::cerr);  // in case it is only stalled
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
  for (auto& j : st.jobs) j.last_type = -1;
}

/// The policy's view of an active job: per-type throughput is the one measured on a node of
/// the type, else the model's (step_time at speed 1.0 scaled by the type's mean speed).
job_view view_of(const tracked_job& j, const cluster& live) {
  job_view v;
  v.spec = &j.spec.spec;
  v.steps_done = static_cast<double>(j.step);
  v.run_time = j.run_time;
  v.attained_service = j.gpu_seconds;
  v.last_type = j.last_type;
  v.throughput.assign(live.types.size(), 0.0);
  for (std::size_t k = 0; k < live.types.size(); ++k) {
    if (live.types[k].gpus < j.spec.spec.scale_factor) continue;
    auto m = j.measured.find(live.types[k].name);
    v.throughput[k] = m != j.measured.end() && m->second > 0
                          ? m->second
                          : live.types[k].mean_speed / j.spec.step_time;
  }
  return v;
}

/// Adds a part of this round to a job's history, which keeps its last history_rounds rounds.
void note_placement(tracked_job& j, const placement& p) {
  constexpr int history_rounds = 100;
  j.history.push_back(p);
  int rounds = 0;
  std::int64_t last = -1;
  for (auto it = j.history.rbegin(); it != j.history.rend(); ++it)
    if (it->round != last) {
      last = it->round;
      if (++rounds > history_rounds) {
        const std::int64_t cut = it->round;
        while (!j.history.empty() && j.history.front().round <= cut) j.history.pop_front();
        break;
      }
    }
}

/// Records where each job runs this round: its pieces (from the orders), restarts, the type
/// of copy 0 and the GPU-seconds planned on each rank.
void book_round(scheduler_state& st, const round_plan& p,
                const std::map<int, round_orders>& orders) {
  for (auto& j : st.jobs) {
    j.round_rank = -1;
    j.round_gpus = 0;
    j.pieces.clear();
    j.reports_left = 0;
    j.reported = false;
    j.round_failed = false;
  }
  st.started = 0;
  st.expected_starts = 0;
  std::map<std::int64_t, tracked_job*> by_id;
  for (auto& j : st.jobs) by_id[j.spec.spec.id] = &j;
  std::map<std::int64_t, int> copies;  // per job: copies this round
  for (const auto& [rank, o] : orders)
    for (const auto& c : o.copies) {
      auto* j = by_id.at(c.job);
      const bool leader = c.part_ranks.empty() || c.part_ranks.front() == rank;
      j->pieces.push_back(copy_piece{c.copy, rank, c.gpus, leader, c.part_ranks.size() > 1});
      note_placement(*j, placement{o.round, c.job, c.copy, rank, c.gpus});
      j->round_gpus += c.gpus;
      ++j->reports_left;
      ++st.expected_starts;
      copies[c.job] = std::max(copies[c.job], c.copy + 1);
      if (c.copy == 0 && leader) {
        if (j->last_rank >= 0 && j->last_rank != rank) ++j->restarts;
        j->round_rank = rank;
      }
    }
  for (auto& j : st.jobs)
    if (active_job(j)) advance(st, j, copies.count(j.spec.spec.id) ? job_event::placed : job_event::left_out);
  for (const auto& [id, n] : copies) {
    auto* j = by_id.at(id);
    j->last_busy = 0;
    ++j->rounds;
    j->max_copies = std::max(j->max_copies, n);
    if (j->first_start < 0) j->first_start = p.start;
  }
  std::map<std::int64_t, int> copy0_type;  // per job: GPU type of copy 0's first placement
  for (const auto& as : p.assignments) {
    if (!copies.count(as.job)) continue;
    auto* j = by_id.at(as.job);
    for (const auto& sh : as.shares) j->planned[st.live_ranks[sh.server]] += sh.gpus * p.length;
    if (as.copy == 0) copy0_type.emplace(as.job, as.type);
  }
  for (auto& j : st.jobs) {
    if (j.round_rank >= 0)
      j.last_type = copy0_type[j.spec.spec.id];
    else if (active_job(j))
      j.last_type = -1;
  }
}

/// At a round boundary: the jobs a client cancelled while they ran are cancelled now (their
/// checkpoint of the round that just ended is kept).
void apply_cancels(scheduler_state& st) {
  for (auto& j : st.jobs)
    if (j.cancel_requested && !is_final(j.life) && advance(st, j, job_event::cancelled))
      ++st.job_set_version;
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

/// Plans and dispatches the next round, or waits for the next arrival when no job is active,
/// or ends the run when none is left.
void start_round(self_ptr self) {
  auto& st = self->state;
  if (st.done) return;
  const auto& cfg = st.cfg;
  const double now = elapsed(self);
  const auto wall0 = std::chrono::steady_clock::now();
  apply_cancels(st);
  if (st.stopping) return finish(self, true, "stopped by request");
  for (const job* a : st.arrivals.admit(now)) {
    find_job(st, a->id)->arrived = true;
    ++st.job_set_version;
  }
  std::vector<const tracked_job*> active;
  for (const auto& j : st.jobs)
    if (active_job(j)) active.push_back(&j);
  if (active.empty()) {
    if (st.arrivals.empty() && !cfg.serve) return finish(self, true, "");
    if (!st.arrivals.empty())
      self->delayed_send(self, seconds(st.arrivals.next_arrival() - now), arrival_atom::value);
    self->become(idle(self));
    return;
  }
  refresh_live_cluster(st);
  const bool wait = checkpoints_wait(st);
  std::vector<job_view> views;
  if (!wait)
    for (const auto* j : active) views.push_back(view_of(*j, st.live));
  round_context ctx;
  ctx.now = now;
  ctx.round_length = cfg.round_length;
  ctx.cl = &st.live;
  ctx.last_plan = st.have_last ? &st.last_plan : nullptr;
  ctx.job_set_version = st.job_set_version;
  ctx.rates = &st.rates->for_live(st.live, st.live_ranks);
  ctx.copy_limit = cfg.can_sync ? 0 : 1;
  auto planned = wait ? waiting_round(ctx) : plan_round(*cfg.pol, ctx, std::move(views));
  if (!planned)
    return finish(self, false, "policy " + cfg.pol->name() + ": " + planned.err().message);
  dispatch_context dc{&cfg.cl, st.live_ranks, cfg.can_sync, st.round + 1, cfg.round_length,
                      cfg.report_grace, cfg.checkpoint_dir, {}, cfg.master_port_base};
  for (const auto& n : st.nodes) dc.hosts.push_back(n.hello.host);
  std::map<std::int64_t, dispatch_job> known;
  for (const auto& j : st.jobs)
    known[j.spec.spec.id] =
        dispatch_job{&j.spec, j.step, j.sync_epoch, &j.ckpt.book, &j.measured};
  auto orders = dispatch_plan(planned->plan, dc, [&](std::int64_t id) -> const dispatch_job* {
    auto it = known.find(id);
    return it == known.end() ? nullptr : &it->second;
  }, cfg.pol->name());
  if (!orders) return finish(self, false, orders.err().message);

  ++st.round;
  st.round_t0 = now;
  book_round(st, planned->plan, *orders);
  st.round_records.push_back(record_round(planned->plan, st.live.total_gpus(),
                                          static_cast<int>(active.size())));
  note_round(st, *orders,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
  st.pending.clear();
  double program_grace = 0;  // a program's node may wait this long past the round for it
  for (auto& [rank, o] : *orders) {
    for (const auto& c : o.copies)
      if (c.is_program()) program_grace = std::max(program_grace, c.program.grace);
    st.pending.insert(rank);
    self->send(st.nodes[rank].handle, std::move(o));
  }
  st.last_plan = std::move(planned->plan);
  st.have_last = true;
  if (cfg.verbose)
    std::cerr << "tessera: round " << st.round << " at " << now << " s: " << st.expected_starts
              << " parts on " << st.live_ranks.size() << " nodes\n";
  self->delayed_send(self, seconds(cfg.round_length), round_tick_atom::value, st.round);
  st.round_deadline = cfg.round_length + cfg.report_grace + program_grace;
  self->delayed_send(self, seconds(st.round_deadline), round_deadline_atom::value, st.round);
  self->become(running(self));
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
  self->become(idle(self));
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
  if (!st.done)
    self->delayed_send(self, seconds(st.cfg.heartbeat_interval), hb_check_atom::value);
}

/// A user's program failed in its round (progress_report::program_failed): the round is lost,
/// the job restarts from its checkpoint in a later round, and after max_restarts failures it
/// is failed (the run goes on with the other jobs).
void on_program_failure(self_ptr self, tracked_job& j, int rank, const progress_report& r,
                        bool keeper) {
  auto& s = self->state;
  if (--j.reports_left <= 0) j.reported = true;
  if (keeper && !j.round_failed) {
    j.round_failed = true;
    ++j.lost_rounds;
  }
  if (j.failed()) return;
  ++j.program_failures;
  j.failure = r.error;
  const int allowed = j.spec.program.max_restarts;
  if (j.program_failures > allowed) {
    advance(s, j, job_event::failed);
    ++s.job_set_version;
    std::cerr << "tessera: job " << r.job << " failed on node rank " << rank << " (failure "
              << j.program_failures << ", max_restarts " << allowed << "): " << r.error << '\n';
    for (const auto& pc : j.pieces)
      if (s.nodes[pc.rank].alive) self->send(s.nodes[pc.rank].handle, stop_copy{s.round, r.job, pc.copy});
    return;
  }
  std::cerr << "tessera: job " << r.job << " on node rank " << rank << ": " << r.error
            << "\ntessera: job " << r.job << " restarts from its last checkpoint (failure "
            << j.program_failures << " of at most " << allowed << " restarts)\n";
}

/// A job that cannot run (e.g. a node cannot build its kind) fails alone; the others go on.
void fail_job(self_ptr self, tracked_job& j, int rank, const std::string& why) {
  auto& s = self->state;
  if (is_final(j.life)) return;
  if (--j.reports_left <= 0) j.reported = true;
  j.failure = "on node rank " + std::to_string(rank) + ": " + why;
  if (!advance(s, j, job_event::failed)) return;
  ++s.job_set_version;
  std::cerr << "tessera: job " << j.spec.spec.id << " failed " << j.failure << '\n';
  for (const auto& pc : j.pieces)
    if (s.nodes[pc.rank].alive)
      self->send(s.nodes[pc.rank].handle, stop_copy{s.round, j.spec.spec.id, pc.copy});
}

/// A copy's report of its round: progress, time, measured rate, or a failure.
void on_progress(self_ptr self, int rank, const progress_report& r) {
  auto& s = self->state;
  auto* j = find_job(s, r.job);
  if (!j) return;
  const copy_piece* piece = nullptr;
  for (const auto& pc : j->pieces)
    if (pc.copy == r.copy && pc.rank == rank) piece = &pc;
  // Copy 0's leader wrote the checkpoint: its report carries the job's progress.
  const bool keeper = piece && piece->copy == 0 && piece->leader;
  if (r.program_failed) return on_program_failure(self, *j, rank, r, keeper);
  if (!r.error.empty()) {
    if (!r.retry) return fail_job(self, *j, rank, r.error);
    // A synchronisation failed: the job resumes from its checkpoint on a fresh channel.
    std::cerr << "tessera: job " << r.job << " on node rank " << rank << ": " << r.error
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
  // The job's step follows its confirmed checkpoints (checkpoint_done), not this report.
  if (keeper) {
    j->last_rank = rank;
    j->run_time += r.busy_seconds;
  }
  if (keeper && !r.checkpoint_error.empty()) {
    j->round_failed = true;
    note_write_failure(j->ckpt, s.ckpts, r.job, r.checkpoint_error, std::cerr);
  }
  if (r.startup_seconds > 0) {
    j->startup_sum += r.startup_seconds;
    ++j->startups;
    // A program restarts each round: a start that eats most of the round starves the job.
    if (r.startup_seconds > 0.5 * s.cfg.round_length && !j->slow_start_told) {
      j->slow_start_told = true;
      std::cerr << "tessera: job " << r.job << ": its program took " << r.startup_seconds
                << " s to start, more than half of a " << s.cfg.round_length
                << " s round; a longer --round-length leaves it time to train\n";
    }
  }
  j->gpu_seconds += r.busy_seconds * gpus;
  j->busy[rank] += r.busy_seconds * gpus;
  j->last_busy += r.busy_seconds * gpus;
  if (r.throughput > 0) {
    j->throughput[rank] = r.throughput;
    // A part of a spread copy runs at its slowest part's pace: not this node's rate.
    if (piece && !piece->spread) {
      j->measured[s.cfg.cl.servers[rank].gpu_type] = r.throughput * std::max(1, r.task_times);
      s.rates->record(rank, j->spec.spec.job_type, j->spec.spec.scale_factor, r.task_times,
                      r.throughput);
    }
  }
  if (keeper) {
    j->loss = r.loss;
    j->round_rate = r.throughput;
  }  // other parts and copies report losses of their own batches
}

/// A copy's start: a fallback (or restart from scratch) takes the job's step back, and its
/// other copies, started from other state, cannot be merged with it this round; any other
/// start before the job's step is a regression.
void note_copy_start(tracked_job& j, const copy_started& c) {
  const auto source = static_cast<state_source>(c.source);
  if (note_start(j.ckpt, c.job, source, c.bad_files, c.why, std::cerr)) {
    j.step = c.step;
    if (std::any_of(j.pieces.begin(), j.pieces.end(), [](const copy_piece& p) { return p.copy > 0; }))
      j.round_failed = true;
  } else if (c.step < j.step) {
    ++j.regressions;
  }
}

/// Why a client's job cannot be accepted ("" when it can): the scheduler's own checks, for
/// clients that did not read it through runtime/job_file.hpp.
std::string job_refusal(const scheduler_config& cfg, const run_job& rj) {
  if (!rj.is_program() && std::find(cfg.known_kinds.begin(), cfg.known_kinds.end(), rj.kind) ==
                              cfg.known_kinds.end())
    return "unknown job kind '" + rj.kind + "'";
  // The job-file bound (runtime/input_limits.hpp) also keeps total_steps exact through the
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

/// Adds accepted jobs to the books and the arrival queue; their ids.
std::vector<std::int64_t> add_jobs(scheduler_state& s, const std::vector<run_job>& jobs) {
  std::vector<std::int64_t> ids;
  for (const auto& rj : jobs) {
    add_job(s, rj);
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
  if (!s.cfg.log) return add_jobs(s, accepted);
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
  promise.deliver(add_jobs(s, jobs));
  self->send(self, arrival_atom::value);
}

/// A client's cancel: a job not running now is cancelled at once; a running one finishes
/// its round (and checkpoint) and is cancelled at the boundary.
caf::result<cancel_outcome> cancel(self_ptr self, std::int64_t id) {
  auto& s = self->state;
  ++s.messages;
  if (!local_sender(self)) {
    ++s.dropped;
    return make_run_error(run_errc::unauthenticated, "cancel_job from a remote actor");
  }
  auto* j = find_job(s, id);
  if (!j) return cancel_outcome::unknown;
  if (is_final(j->life)) return cancel_outcome::ended;
  j->cancel_requested = true;
  if (s.cfg.log) s.cfg.log->cancel_requested(id);
  if (j->pieces.empty() || j->reported) {
    advance(s, *j, job_event::cancelled);
    ++s.job_set_version;
  }
  return cancel_outcome::accepted;
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
      [=](const copy_started& c) {
        auto& s = self->state;
        if (sender_rank(self) < 0 || c.round != s.round) return;
        if (auto* j = find_job(s, c.job)) note_copy_start(*j, c);
        if (++s.started == s.expected_starts) {
          s.dispatch_latency.push_back(elapsed(self) - s.round_t0);
          s.dispatch_histogram.observe(s.dispatch_latency.back());
          if (!s.recent_rounds.empty() && s.recent_rounds.back().round == s.round)
            s.recent_rounds.back().dispatch_latency = s.dispatch_latency.back();
        }
      },
      [=](const progress_report& r) {
        const int rank = sender_rank(self);
        if (rank < 0 || r.round != self->state.round) return;
        on_progress(self, rank, r);
      },
      [=](const checkpoint_done& c) {
        auto& s = self->state;
        if (sender_rank(self) < 0) return;
        if (auto* j = find_job(s, c.job); j && c.round == s.round && !j->round_failed) {
          if (j->spec.is_program()) {
            j->step = c.step;  // the program keeps its own files in its directory
            if (s.cfg.log) s.cfg.log->checkpointed(c.job, {"", c.round, c.step});
            return;
          }
          note_confirmed(j->ckpt, c.job, {c.path, c.round, c.step}, std::cerr);
          if (s.cfg.log) s.cfg.log->checkpointed(c.job, {c.path, c.round, c.step});
          j->step = j->ckpt.book.step();
        }
      },
      [=](const job_finished& f) {
        auto& s = self->state;
        if (sender_rank(self) < 0) return;
        auto* j = find_job(s, f.job);
        if (!j || is_final(j->life) || !advance(s, *j, job_event::completed)) return;
        j->finish = elapsed(self);
        j->step = f.step;
        j->loss = f.loss;
        j->accuracy = f.accuracy;
        j->reached_target = f.reached_target;
        ++s.job_set_version;
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

/// Running: the round's orders are out and its time is not up.
caf::behavior running(self_ptr self) {
  return caf::message_handler{
      [=](round_tick_atom, std::int64_t round) {
        auto& s = self->state;
        if (round != s.round) return;
        if (s.pending.empty())
          start_round(self);
        else
          self->become(draining(self));
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
  st.rates = std::make_shared<run_rates>(st.cfg.cl);
  st.round = st.cfg.first_round - 1;
  for (const auto& r : st.cfg.restored) restore_job(st, r);
  for (const auto& rj : st.cfg.jobs) add_job(st, rj);
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
  self->delayed_send(self, seconds(st.cfg.register_timeout), reg_timeout_atom::value);
  if (st.cfg.max_seconds > 0)
    self->delayed_send(self, seconds(st.cfg.max_seconds), run_timeout_atom::value);
  return registering(self);
}

}  // namespace tessera::actors
