// The scheduler's phases as behaviours (actors/scheduler_actor.hpp): the handlers every phase
// after registration shares, built per interface (actors/interfaces.hpp) so the compiler checks
// them against the protocol, and each phase's own. The concerns they call live in
// scheduler_nodes.cpp, scheduler_rounds.cpp, scheduler_clients.cpp and scheduler_ending.cpp.
#include "actors/scheduler_actor.hpp"

#include <iostream>
#include <memory>
#include <string>

#include "actors/interfaces.hpp"
#include "actors/scheduler_parts.hpp"
#include "actors/status_views.hpp"

namespace tessera::actors {

namespace sched {

namespace {

/// What nodes send the scheduler: registration, heartbeats, drains, starts, round reports.
scheduler_node_api::behavior_type from_nodes(self_ptr self) {
  return {
      [=](const auth_request& r) { return challenge(self, r); },
      [=](const node_hello& h) { return register_node(self, h); },
      [=](const heartbeat&) { heartbeat_from(self); }, [=](leave_atom) { node_leaves(self); },
      // A node tells its copies' starts to the scheduler too (dispatch latency); their other
      // reports go to the job actors (start_copy::job_actor).
      [=](const copy_started& c) {
        if (sender_rank(self) >= 0) copy_started_in(self, c.round);
      },
      [=](const round_done& d) { on_round_done(self, d); },
      [=](settled_atom, std::int64_t) {},  // a settle that came too late (settling takes it)
  };
}

/// What job actors tell the scheduler: their snapshots, measured rates, failed writes.
scheduler_job_api::behavior_type from_jobs(self_ptr self) {
  return {
      [=](job_snapshot& snap) {
        if (auto* e = job_sender(self)) take_snapshot(self, *e, std::move(snap));
      },
      [=](view_atom, std::uint64_t start, job_snapshot& snap) {
        if (auto* e = job_sender(self)) on_view(self, start, *e, std::move(snap));
      },
      [=](summary_atom, std::uint64_t, job_final&) {},  // asked only once the run ends
      [=](const rate_sample& r) {
        if (job_sender(self))
          self->state.rates->record(r.rank, r.job_type, r.scale, r.task_times, r.steps_per_s);
      },
      [=](write_failed_atom, std::int64_t job, const std::string& why) {
        if (job_sender(self)) note_dir_failure(self->state.ckpts, job, why, std::cerr);
      },
  };
}

/// What clients in the scheduler's process ask (actors/status_views.hpp answers queries).
scheduler_client_api::behavior_type from_clients(self_ptr self) {
  return {
      [=](const submit_job& sj) { return submit(self, sj); },
      [=](const cancel_job& c) { return cancel(self, c.job); },
      [=](stop_atom) { return stop(self); },
      [=](jobs_atom, std::int64_t id, bool placements) {
        return job_statuses(client_view_of(self->state), id, placements);
      },
      [=](job_page_atom, std::int64_t after, std::int32_t count, const std::string& state) {
        return job_page(client_view_of(self->state), after, count, state);
      },
      [=](nodes_atom) { return node_statuses(client_view_of(self->state), self->clock().now()); },
      [=](rounds_atom, std::int32_t limit) {
        return round_statuses(client_view_of(self->state), limit);
      },
      [=](cluster_atom) { return cluster_of(client_view_of(self->state), elapsed(self)); },
  };
}

/// What every phase handles the same way: the run's own alarms, the journal's
/// acknowledgements and the three interfaces.
caf::message_handler common(self_ptr self) {
  return caf::message_handler{
      [=](refused_atom, const std::string& text) { finish(self, false, text); },
      [=](run_timeout_atom) {
        finish(self, false,
               "the run did not end within " + std::to_string(self->state.cfg.max_seconds) + " s");
      },
      [=](hb_check_atom) { check_heartbeats(self); },
      [=](journal_ack_atom, std::uint64_t ticket, const std::string& err) {
        on_synced(self, ticket, err);
      },
  }
      .or_else(handlers_of(from_nodes(self)))
      .or_else(handlers_of(from_jobs(self)))
      .or_else(handlers_of(from_clients(self)));
}

/// What no handler of the current phase takes. The scheduler's own timers and wake-ups that
/// belong to a phase already over (a round's deadline after every report came in, an
/// arrival while a round runs, which the next round admits) are dropped quietly; a message
/// from another actor is counted as dropped, and a request among them answered with an error.
caf::result<caf::message> unhandled(caf::scheduled_actor* ptr, caf::message_view&) {
  auto* self = static_cast<self_ptr>(ptr);
  if (self->current_sender().get() != self->ctrl()) {
    ++self->state.messages;
    ++self->state.dropped;
  }
  if (self->current_message_id().is_request()) return caf::make_error(caf::sec::unexpected_message);
  return caf::make_message();
}

/// Registering: nodes register until every server of the cluster file has one.
caf::behavior registering(self_ptr self) {
  return caf::message_handler{
      [=](reg_timeout_atom) { registration_overdue(self); },
  }
      .or_else(common(self));
}

/// Idle: no job is active; the next arrival (a timer, or a submission) starts a round.
caf::behavior idle(self_ptr self) {
  return caf::message_handler{
      [=](arrival_atom) { start_round(self); },
  }
      .or_else(common(self));
}

/// Starting: the round's views are being collected (start_round). A cancel waits until the
/// round is dispatched, so it meets the job in the round's assignment (as when no view is
/// pending: the job then runs until the boundary).
caf::behavior starting(self_ptr self) {
  return caf::message_handler{
      [=](const cancel_job&) -> caf::result<cancel_outcome> { return caf::skip; },
  }
      .or_else(common(self));
}

/// Settling: the round is planned, its orders wait until the nodes that keep processes with
/// unsaved state let go of the ones it moves (actors/node_actor.cpp settle()).
caf::behavior settling(self_ptr self) {
  return caf::message_handler{
      [=](settled_atom, std::int64_t round) { on_settled(self, sender_rank(self), round); },
      [=](settle_due_atom, std::int64_t round) { settle_overdue(self, round); },
      [=](const cancel_job&) -> caf::result<cancel_outcome> { return caf::skip; },
  }
      .or_else(common(self));
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
  }
      .or_else(common(self));
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
        if (round == self->state.round && lose_late_nodes(self, round)) start_round(self);
      },
  }
      .or_else(common(self));
}

/// The relay that brings the journal's acknowledgements (from its writer thread) back to the
/// scheduler as messages.
caf::actor journal_relay(self_ptr self) {
  // The scheduler goes in as an argument, not a capture: CAF 0.17 spawning a function with no
  // arguments dereferences an empty tuple pointer (UBSan: reference binding to null).
  return self->spawn<caf::linked>(
      [](caf::event_based_actor* relay, caf::actor sched) -> caf::behavior {
        return {[=](journal_ack_atom a, std::uint64_t ticket, std::string& err) {
          relay->send(sched, a, ticket, std::move(err));
        }};
      },
      caf::actor_cast<caf::actor>(self));
}

}  // namespace

}  // namespace sched

caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, scheduler_config cfg,
                              caf::actor listener) {
  using namespace sched;
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.listener = listener;
  st.t0 = self->clock().now();
  st.created = st.t0;
  st.nodes.resize(st.cfg.cl.servers.size());
  st.rates = std::make_shared<run_rates>(st.cfg.cl, st.cfg.colocation);
  st.round = st.cfg.first_round - 1;
  st.ckpts.dir = st.cfg.checkpoint_dir;
  st.ckpts.probe_errno = st.cfg.hooks.checkpoint_probe_errno;
  if (auto log = st.cfg.log)  // what the journal names, a resume looks for: kept until it does not
    st.ckpts.pinned = [log](const std::string& path) { return log->names(path); };
  for (const auto& r : st.cfg.restored) add_job(self, r.spec, &r);  // job actors get the pin
  for (const auto& rj : st.cfg.jobs) add_job(self, rj);
  if (st.cfg.log) st.journal_relay = journal_relay(self);
  self->set_default_handler(unhandled);
  self->set_down_handler([=](caf::down_msg& d) { node_down(self, d); });
  // Built once: a behaviour of this many handlers costs tens of microseconds to build, and
  // the scheduler changes phase two or three times a round.
  st.phases = {idle(self), starting(self), settling(self), running(self), draining(self)};
  st.registration_progress = self->clock().now();  // the registration wait counts from here
  self->delayed_send(self, seconds(st.cfg.register_timeout), reg_timeout_atom::value);
  if (st.cfg.max_seconds > 0)
    self->delayed_send(self, seconds(st.cfg.max_seconds), run_timeout_atom::value);
  return registering(self);
}

}  // namespace tessera::actors
