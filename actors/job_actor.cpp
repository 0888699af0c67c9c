#include "actors/job_actor.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

namespace tessera::actors {

namespace {

/// An ended job back from a journal shows what it ended with.
void restore_history(job_data& j, const job_history& h) {
  j.first_start = h.first_start;
  j.finish = h.finish;
  j.step = h.steps;
  j.run_time = h.run_time;
  j.gpu_seconds = h.gpu_seconds;
  j.loss = h.loss;
  j.accuracy = h.accuracy;
  j.restarts = h.restarts;
  j.lost_rounds = h.lost_rounds;
  j.rounds = h.rounds;
  j.max_copies = h.max_copies;
  j.program_failures = h.program_failures;
  j.reached_target = h.reached_target;
  j.failure = h.failure;
}

}  // namespace

job_data make_job_data(const job_config& cfg) {
  job_data j;
  j.spec = cfg.spec;
  const auto ranks = cfg.rank_types.size();
  j.planned.assign(ranks, 0.0);
  j.busy.assign(ranks, 0.0);
  j.throughput.assign(ranks, 0.0);
  j.ckpt.book = checkpoint_book(cfg.epoch_base);
  j.ckpt.pinned = cfg.pinned;
  if (const auto& r = cfg.restored) {
    // Back from a journal: as it was, but a job that was running comes back preempted (no
    // round of the new cluster has placed it yet).
    j.cancel_requested = r->cancel_requested;
    j.step = r->step;
    for (const auto& f : r->checkpoints)
      if (!f.path.empty()) note_confirmed(j.ckpt, j.spec.spec.id, f, std::cerr);
    j.life = r->life == job_state::running ? job_state::preempted : r->life;
    if (r->ended) restore_history(j, *r->ended);
  }
  return j;
}

std::string shown_state(const job_data& j) {
  if (j.cancel_requested && !is_final(j.life)) return "cancelling";
  return state_name(j.life);
}

job_status status_of(const job_data& j, bool placements) {
  job_status s;
  s.summary = summary_of(j, false);
  s.state = shown_state(j);
  s.steps_per_second = j.life == job_state::running ? j.round_rate : 0;
  for (const auto& pc : j.pieces) s.copies = std::max(s.copies, pc.copy + 1);
  s.gpu_seconds = j.gpu_seconds;
  if (placements) s.placements.assign(j.history.begin(), j.history.end());
  return s;
}

job_snapshot snapshot_of(const job_data& j) {
  job_snapshot v;
  v.id = j.spec.spec.id;
  v.life = j.life;
  v.status = status_of(j, false);
  v.step = j.step;
  v.run_time = j.run_time;
  v.gpu_seconds = j.gpu_seconds;
  v.last_type = j.last_type;
  v.live_generation = j.live_generation;
  v.sync_epoch = j.sync_epoch;
  v.book = j.ckpt.book;
  v.measured = j.measured;
  return v;
}

job_summary summary_of(const job_data& j, bool per_rank) {
  const bool finished = j.life == job_state::finished;
  job_summary js;
  js.id = j.spec.spec.id;
  js.kind = j.spec.kind;
  js.job_type = j.spec.spec.job_type;
  js.scale = j.spec.spec.scale_factor;
  js.total_steps = static_cast<std::int64_t>(j.spec.spec.total_steps);
  js.finished = finished;
  js.canceled = j.life == job_state::cancelled;
  js.arrival = j.spec.spec.arrival;
  js.first_start = j.first_start;
  js.finish = j.finish;
  js.jct = finished ? j.finish - j.spec.spec.arrival : -1;
  js.steps = j.step;
  js.run_time = j.run_time;
  js.loss = j.loss;
  js.accuracy = j.accuracy;
  js.restarts = j.restarts;
  js.lost_rounds = j.lost_rounds;
  js.regressions = j.regressions;
  if (per_rank) {
    js.planned_gpu_seconds = j.planned;
    js.busy_gpu_seconds = j.busy;
    js.throughput = j.throughput;
  }
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
  js.failed = j.life == job_state::failed;
  js.state = state_name(j.life);
  js.failure = j.failure;
  js.program_failures = j.program_failures;
  js.startup_seconds = j.startups > 0 ? j.startup_sum / j.startups : 0;
  return js;
}

namespace {

/// Moves a job through its life (actors/job_life.hpp); an illegal event is logged and
/// changes nothing (false).
bool advance(job_data& j, job_event e, std::ostream& log) {
  auto to = next_state(j.life, e);
  if (!to) {
    log << "tessera: job " << j.spec.spec.id << ": " << to.err().message << "; ignored\n";
    return false;
  }
  j.life = *to;
  return true;
}

}  // namespace

void note_placement(std::deque<placement>& history, const placement& p) {
  constexpr int history_rounds = 100;
  history.push_back(p);
  int rounds = 0;
  std::int64_t last = -1;
  for (auto it = history.rbegin(); it != history.rend(); ++it)
    if (it->round != last) {
      last = it->round;
      if (++rounds > history_rounds) {
        const std::int64_t cut = it->round;
        while (!history.empty() && history.front().round <= cut) history.pop_front();
        break;
      }
    }
}

bool apply_assignment(job_data& j, const job_assignment& a, std::ostream& log) {
  const bool placed = !a.pieces.empty();
  if (!advance(j, placed ? job_event::placed : job_event::left_out, log)) return false;
  j.round = a.round;
  j.run_start = a.run_start;
  j.pieces = a.pieces;
  j.round_rank = -1;
  j.round_gpus = 0;
  j.reports_left = static_cast<int>(a.pieces.size());
  j.reported = false;
  j.round_failed = false;
  if (a.paused) ++j.ckpt.paused_rounds;
  j.last_type = placed ? a.type : -1;
  j.live_generation = a.live_generation;
  if (!placed) return true;
  j.round_step = j.step;
  int copies = 0;
  for (const auto& pc : a.pieces) {
    note_placement(j.history, placement{a.round, j.spec.spec.id, pc.copy, pc.rank, pc.gpus});
    j.round_gpus += pc.gpus;
    copies = std::max(copies, pc.copy + 1);
    if (pc.copy == 0 && pc.leader) {
      if (j.last_rank >= 0 && j.last_rank != pc.rank) ++j.restarts;
      j.round_rank = pc.rank;
    }
  }
  for (const auto& [rank, seconds] : a.planned)
    if (rank >= 0 && rank < static_cast<int>(j.planned.size())) j.planned[rank] += seconds;
  j.last_busy = 0;
  ++j.rounds;
  j.max_copies = std::max(j.max_copies, copies);
  if (j.first_start < 0) j.first_start = a.start;
  return true;
}

namespace {

using self_ptr = caf::stateful_actor<job_actor_state>*;

caf::behavior waiting(self_ptr self);
caf::behavior in_round(self_ptr self);
caf::behavior ended(self_ptr self);

std::int64_t id_of(self_ptr self) { return self->state.job.spec.spec.id; }

/// Tells the scheduler the job's state (it keeps the latest for clients and planning).
void push(self_ptr self) { self->send(self->state.scheduler, snapshot_of(self->state.job)); }

/// True when the current message comes from the job's scheduler; anything else is refused.
bool from_scheduler(self_ptr self) {
  if (caf::actor_cast<caf::actor_addr>(self->current_sender()) == self->state.scheduler.address())
    return true;
  ++self->state.dropped;
  return false;
}

/// The rank of the node that sent the current report, or -1 (dropped and counted) when the
/// sender is not a node of the job's open round as its assignment lists them (by actor
/// address; a node declared lost no longer is), or the report is of another job or round.
int reporter_rank(self_ptr self, std::int64_t job, std::int64_t round) {
  auto& s = self->state;
  const auto it = s.reporters.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  if (it == s.reporters.end() || job != id_of(self) || round != s.job.round) {
    ++s.dropped;
    return -1;
  }
  return it->second;
}

/// The behaviour the job's life and round call for.
void settle(self_ptr self) {
  const auto& s = self->state;
  const auto& phase = !s.reporters.empty()   ? s.phases.in_round
                      : is_final(s.job.life) ? s.phases.ended
                                             : s.phases.waiting;
  self->become(phase);
}

/// The round boundary: the open round's reports are all in, later ones are refused; a cancel
/// a client asked for while the job ran takes effect now (its checkpoint of the round kept).
void close_round(self_ptr self) {
  auto& s = self->state;
  s.reporters.clear();
  if (s.job.cancel_requested && !is_final(s.job.life))
    advance(s.job, job_event::cancelled, std::cerr);
  settle(self);
}

/// The scheduler's assignment for a round: the job's pieces and the nodes it hears from. Only
/// a change of its life is pushed (the scheduler knows the rest: it made the assignment).
void on_assignment(self_ptr self, const job_assignment& a) {
  auto& s = self->state;
  const auto before = s.job.life;
  s.reporters.clear();
  if (!apply_assignment(s.job, a, std::cerr)) return settle(self);
  for (const auto& pc : a.pieces) s.reporters[pc.node.address()] = pc.rank;
  if (s.job.life != before) push(self);
  settle(self);
}

/// Stops the job's copies still running (it failed): each node's part checkpoints and ends.
void stop_copies(self_ptr self) {
  auto& s = self->state;
  for (const auto& pc : s.job.pieces)
    if (s.reporters.count(pc.node.address()))
      self->send(caf::actor_cast<node_api>(pc.node), stop_copy{s.job.round, id_of(self), pc.copy});
}

/// A job that cannot run (e.g. a node cannot build its kind) fails alone; the others go on.
void fail_job(self_ptr self, int rank, const std::string& why) {
  auto& j = self->state.job;
  if (is_final(j.life)) return;
  if (--j.reports_left <= 0) j.reported = true;
  j.failure = "on node rank " + std::to_string(rank) + ": " + why;
  if (!advance(j, job_event::failed, std::cerr)) return;
  std::cerr << "tessera: job " << id_of(self) << " failed " << j.failure << '\n';
  stop_copies(self);
  push(self);
}

/// A user's program failed in its round (progress_report::program_failed): the round is lost,
/// the job restarts from its checkpoint in a later round, and after max_restarts failures it
/// is failed (the run goes on with the other jobs).
void on_program_failure(self_ptr self, int rank, const progress_report& r, bool keeper) {
  auto& j = self->state.job;
  if (--j.reports_left <= 0) j.reported = true;
  if (keeper && !j.round_failed) {
    j.round_failed = true;
    ++j.lost_rounds;
  }
  if (j.life == job_state::failed) return;
  ++j.program_failures;
  j.failure = r.error;
  const int allowed = j.spec.program.max_restarts;
  if (j.program_failures > allowed) {
    advance(j, job_event::failed, std::cerr);
    std::cerr << "tessera: job " << r.job << " failed on node rank " << rank << " (failure "
              << j.program_failures << ", max_restarts " << allowed << "): " << r.error << '\n';
    stop_copies(self);
    push(self);
    return;
  }
  std::cerr << "tessera: job " << r.job << " on node rank " << rank << ": " << r.error
            << "\ntessera: job " << r.job << " restarts from its last checkpoint (failure "
            << j.program_failures << " of at most " << allowed << " restarts)\n";
}

/// A program's start-to-hello time: summed; one that eats most of the round is warned about
/// once (a program restarts each round, so such a start starves the job).
void note_startup(self_ptr self, const progress_report& r) {
  auto& j = self->state.job;
  const double round_length = self->state.cfg.round_length;
  j.startup_sum += r.startup_seconds;
  ++j.startups;
  if (r.startup_seconds > 0.5 * round_length && !j.slow_start_told) {
    j.slow_start_told = true;
    std::cerr << "tessera: job " << r.job << ": its program took " << r.startup_seconds
              << " s to start, more than half of a " << round_length
              << " s round; a longer --round-length leaves it time to train\n";
  }
}

/// A copy's report of its round without a failure: time, GPU-seconds, measured rate, loss.
void note_progress(self_ptr self, int rank, const progress_report& r, const copy_piece* piece,
                   bool keeper) {
  auto& s = self->state;
  auto& j = s.job;
  const int gpus = piece ? piece->gpus : j.round_gpus;
  if (--j.reports_left <= 0) j.reported = true;
  // The job's step follows its confirmed checkpoints (checkpoint_done), not this report.
  if (keeper) {
    j.last_rank = rank;
    j.run_time += r.busy_seconds;
  }
  if (keeper && !r.checkpoint_error.empty()) {
    j.round_failed = true;
    ++j.ckpt.write_failures;
    self->send(s.scheduler, write_failed_atom::value, r.job, r.checkpoint_error);
  }
  if (r.startup_seconds > 0) note_startup(self, r);
  j.gpu_seconds += r.busy_seconds * gpus;
  j.busy[rank] += r.busy_seconds * gpus;
  j.last_busy += r.busy_seconds * gpus;
  if (r.throughput > 0) {
    j.throughput[rank] = r.throughput;
    // A part of a spread copy runs at its slowest part's pace, a copy of a pair at its
    // co-located rate: neither is the job's rate alone on this node.
    if (piece && !piece->spread && !piece->shared) {
      j.measured[s.cfg.rank_types[rank]] = r.throughput * std::max(1, r.task_times);
      self->send(s.scheduler, rate_sample{rank, j.spec.spec.job_type, j.spec.spec.scale_factor,
                                          r.task_times, r.throughput});
    }
  }
  if (keeper) {
    j.loss = r.loss;
    j.round_rate = r.throughput;
    // A program that resumed from its own checkpoint, older than the step the round ordered
    // (a node lost with a warm process's unsaved state), redid steps. Forked copies' reports
    // carry the merged step, which says nothing of where each began.
    const bool forked = std::any_of(j.pieces.begin(), j.pieces.end(),
                                    [](const copy_piece& p) { return p.copy > 0; });
    if (j.spec.is_program() && !forked && r.step - r.steps < j.round_step) ++j.regressions;
  }  // other parts and copies report losses of their own batches
}

/// A copy's report of its round: progress, time, measured rate, or a failure.
void on_progress(self_ptr self, int rank, const progress_report& r) {
  auto& j = self->state.job;
  const copy_piece* piece = nullptr;
  for (const auto& pc : j.pieces)
    if (pc.copy == r.copy && pc.rank == rank) piece = &pc;
  // Copy 0's leader wrote the checkpoint: its report carries the job's progress.
  const bool keeper = piece && piece->copy == 0 && piece->leader;
  if (r.program_failed) return on_program_failure(self, rank, r, keeper);
  if (!r.error.empty()) {
    if (!r.retry) return fail_job(self, rank, r.error);
    // A synchronisation failed: the job resumes from its checkpoint on a fresh channel.
    std::cerr << "tessera: job " << r.job << " on node rank " << rank << ": " << r.error
              << "; it resumes from its last checkpoint\n";
    ++j.sync_epoch;
    if (keeper && !j.round_failed) {
      j.round_failed = true;
      ++j.lost_rounds;
    }
    if (--j.reports_left <= 0) j.reported = true;
    return;
  }
  note_progress(self, rank, r, piece, keeper);
}

/// A copy's start: a fallback (or restart from scratch) takes the job's step back, and its
/// other copies, started from other state, cannot be merged with it this round; any other
/// start before the job's step is a regression.
void on_started(self_ptr self, const copy_started& c) {
  auto& j = self->state.job;
  const auto source = static_cast<state_source>(c.source);
  if (note_start(j.ckpt, c.job, source, c.bad_files, c.why, std::cerr)) {
    j.step = c.step;
    if (std::any_of(j.pieces.begin(), j.pieces.end(),
                    [](const copy_piece& p) { return p.copy > 0; }))
      j.round_failed = true;
  } else if (c.step < j.step) {
    ++j.regressions;
  }
}

/// A copy's checkpoint of this round is on disk: the job's step follows it (unless the
/// round's progress is lost).
void on_checkpoint(self_ptr self, const checkpoint_done& c) {
  auto& j = self->state.job;
  if (j.round_failed) return;
  if (j.spec.is_program()) {
    j.step = c.step;  // the program keeps its own files in its directory
    return;
  }
  note_confirmed(j.ckpt, c.job, {c.path, c.round, c.step}, std::cerr);
  j.step = j.ckpt.book.step();
}

/// The job reached its total steps (or its target loss); refused unless it is running.
void on_finished(self_ptr self, const job_finished& f) {
  auto& j = self->state.job;
  if (!advance(j, job_event::completed, std::cerr)) return;
  j.finish = std::chrono::duration<double>(self->clock().now() - j.run_start).count();
  j.step = f.step;
  j.loss = f.loss;
  j.accuracy = f.accuracy;
  j.reached_target = f.reached_target;
  push(self);
}

/// A node of the job's round `round` was declared lost: unless every piece had reported, the
/// round's progress is lost, its collectives move to a fresh channel and its checkpoint
/// writers are fenced (in case the node is only stalled). The node's reports count no more.
void on_node_lost(self_ptr self, std::int64_t round, int rank) {
  auto& s = self->state;
  auto& j = s.job;
  if (round != j.round) return;
  for (auto it = s.reporters.begin(); it != s.reporters.end();)
    it = it->second == rank ? s.reporters.erase(it) : std::next(it);
  if (j.reported || std::none_of(j.pieces.begin(), j.pieces.end(),
                                 [&](const copy_piece& p) { return p.rank == rank; }))
    return;
  if (!j.round_failed) ++j.lost_rounds;
  j.round_failed = true;
  ++j.sync_epoch;  // the parts left may be stuck in a collective with the lost node
  run_checkpoints dir;
  dir.dir = s.cfg.checkpoint_dir;
  fence_job(j.ckpt, dir, id_of(self), std::cerr);
  j.round_rank = -1;
  j.pieces.clear();
  push(self);
}

/// A client's cancel (delegated by the scheduler): a job not running now is cancelled at
/// once; a running one finishes its round (and checkpoint) and is cancelled at the boundary.
cancel_outcome on_cancel(self_ptr self) {
  auto& j = self->state.job;
  const auto& sender = self->current_sender();
  if (!sender || sender->node() != self->node()) {
    ++self->state.dropped;
    return cancel_outcome::unknown;
  }
  if (is_final(j.life)) return cancel_outcome::ended;
  j.cancel_requested = true;
  if (j.pieces.empty() || j.reported) advance(j, job_event::cancelled, std::cerr);
  push(self);
  return cancel_outcome::accepted;
}

/// What every phase handles the same way: the scheduler's messages and a client's cancel.
job_scheduler_api::behavior_type common(self_ptr self) {
  return {
      [=](view_atom, std::uint64_t start) {
        if (!from_scheduler(self)) return;
        close_round(self);
        self->send(self->state.scheduler, view_atom::value, start, snapshot_of(self->state.job));
      },
      [=](const job_assignment& a) {
        if (from_scheduler(self)) on_assignment(self, a);
      },
      [=](node_lost_atom, std::int64_t round, std::int32_t rank) {
        if (from_scheduler(self)) on_node_lost(self, round, rank);
      },
      [=](summary_atom, bool at_boundary, std::uint64_t index) {
        if (!from_scheduler(self)) return;
        if (at_boundary) close_round(self);
        const auto& s = self->state;
        self->send(s.scheduler, summary_atom::value, index,
                   job_final{summary_of(s.job), s.job.ckpt.book, s.dropped});
      },
      [=](const cancel_job&) { return on_cancel(self); },
  };
}

/// Reports outside a round the job runs in: refused, counted.
job_node_api::behavior_type refuse_reports(self_ptr self) {
  return {
      [=](const copy_started&) { ++self->state.dropped; },
      [=](const progress_report&) { ++self->state.dropped; },
      [=](const checkpoint_done&) { ++self->state.dropped; },
      [=](const job_finished&) { ++self->state.dropped; },
  };
}

/// Waiting: queued, preempted, or its round closed.
caf::behavior waiting(self_ptr self) {
  return handlers_of(common(self)).or_else(handlers_of(refuse_reports(self)));
}

/// The round's reports, taken from the nodes its assignment lists (others refused, counted).
job_node_api::behavior_type take_reports(self_ptr self) {
  return {
      [=](const copy_started& c) {
        if (reporter_rank(self, c.job, c.round) >= 0) on_started(self, c);
      },
      [=](const progress_report& r) {
        if (const int rank = reporter_rank(self, r.job, r.round); rank >= 0)
          on_progress(self, rank, r);
      },
      [=](const checkpoint_done& c) {
        if (reporter_rank(self, c.job, c.round) >= 0) on_checkpoint(self, c);
      },
      [=](const job_finished& f) {
        if (reporter_rank(self, f.job, self->state.job.round) >= 0) on_finished(self, f);
      },
  };
}

/// In a round: the round's reports from the nodes its assignment lists.
caf::behavior in_round(self_ptr self) {
  return handlers_of(take_reports(self)).or_else(handlers_of(common(self)));
}

/// Ended: finished, failed or cancelled; nothing more happens to it.
caf::behavior ended(self_ptr self) {
  return handlers_of(common(self)).or_else(handlers_of(refuse_reports(self)));
}

}  // namespace

caf::behavior job_actor(caf::stateful_actor<job_actor_state>* self, job_config cfg,
                        caf::actor scheduler) {
  auto& s = self->state;
  s.job = make_job_data(cfg);
  s.cfg = std::move(cfg);
  s.scheduler = caf::actor_cast<scheduler_job_api>(scheduler);
  self->monitor(scheduler);
  self->set_down_handler([=](caf::down_msg& d) {
    if (d.source == self->state.scheduler.address()) self->quit();
  });
  // Built once: the job changes phase up to twice a round, on the round start's path.
  s.phases = {waiting(self), in_round(self), ended(self)};
  return s.phases.waiting;
}

}  // namespace tessera::actors
