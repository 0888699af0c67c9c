#pragma once
/// @file scheduler_parts.hpp
/// What the scheduler's files share (private to actors/scheduler_*.cpp): its own timers and
/// wake-ups, its clock, and each concern's functions that the behaviours
/// (scheduler_actor.cpp) and the other concerns call. A function that may end the run returns
/// whether the run goes on, so its caller stops there: after the end only the `ending`
/// behaviour (scheduler_ending.cpp) takes messages.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/scheduler_state.hpp"

namespace tessera::actors::sched {

using self_ptr = caf::stateful_actor<scheduler_state>*;

// The scheduler's messages to itself. A timer of a phase that is over (a round's deadline
// after every report came in, an arrival while a round runs: the next round admits it) finds
// no handler and is dropped quietly by the default handler (scheduler_actor.cpp).
using round_tick_atom = caf::atom_constant<caf::atom("rtick")>;          // round time is up
using round_deadline_atom = caf::atom_constant<caf::atom("rdeadline")>;  // reports overdue
using reports_check_atom = caf::atom_constant<caf::atom("rcheck")>;      // a node left: advance?
using hb_check_atom = caf::atom_constant<caf::atom("hbcheck")>;          // heartbeat scan
using reg_timeout_atom = caf::atom_constant<caf::atom("regtimeout")>;    // registration overdue
using run_timeout_atom = caf::atom_constant<caf::atom("runtimeout")>;    // max_seconds passed
using arrival_atom = caf::atom_constant<caf::atom("arrival")>;           // next arrival is due
using refused_atom = caf::atom_constant<caf::atom("refused")>;           // a node was refused
using finals_due_atom = caf::atom_constant<caf::atom("finalsdue")>;      // job summaries overdue
using journal_ack_atom = caf::atom_constant<caf::atom("jrnlack")>;       // a submission is on disk
using settle_due_atom = caf::atom_constant<caf::atom("settledue")>;      // nodes slow to settle

/// `s` seconds as CAF's timespan (0 for a negative `s`).
inline caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(std::max(0.0, s)));
}

/// Seconds from `a` to `b`.
inline double seconds_between(caf::actor_clock::time_point a, caf::actor_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Seconds since the run started, on the actor system's clock.
inline double elapsed(self_ptr self) {
  return seconds_between(self->state.t0, self->clock().now());
}

// ---- jobs and clients (scheduler_clients.cpp) -----------------------------------------------

/// The job with id `id`, or null.
job_entry* find_job(scheduler_state& st, std::int64_t id);
/// The job whose actor sent the current message, or null (dropped, counted).
job_entry* job_sender(self_ptr self);

/// A job's view for round start `id` (its answer to view_atom): planning follows the last.
void on_view(self_ptr self, std::uint64_t id, job_entry& e, job_snapshot&& snap);
/// Keeps a job's latest snapshot (journaling what changed unless `journal` is false).
void take_snapshot(self_ptr self, job_entry& e, job_snapshot&& snap, bool journal = true);
/// Adds a job: its job actor, its entry, its place in the arrival queue.
void add_job(self_ptr self, const run_job& rj, const restored_job* restored = nullptr);
/// A client's new jobs: checked, given ids, queued for admission; all or none.
caf::result<std::vector<std::int64_t>> submit(self_ptr self, const submit_job& sj);
/// A submission's journal record is on disk (or failed: `err`).
void on_synced(self_ptr self, std::uint64_t ticket, const std::string& err);
/// A client's cancel, delegated to the job's actor.
caf::result<cancel_outcome> cancel(self_ptr self, std::int64_t id);
/// A client asks the cluster to stop: now when no round is in flight, else at its end.
bool stop(self_ptr self);

// ---- nodes (scheduler_nodes.cpp) ------------------------------------------------------------

/// The live node that sent the current message, or -1 (dropped, counted).
int sender_rank(self_ptr self);
/// True when the current message comes from an actor of the scheduler's own process.
bool local_sender(self_ptr self);
/// Answers a registration's first message with the scheduler's nonce and proof.
caf::result<auth_challenge> challenge(self_ptr self, const auth_request& r);
/// Registers a node that proved the cluster secret.
caf::result<node_welcome> register_node(self_ptr self, const node_hello& h);
/// The registration wait passed: it goes on while nodes make progress, then the run starts
/// with the nodes present (min_nodes) or ends saying who is missing.
void registration_overdue(self_ptr self);
/// A node asks to leave after the current round.
void node_leaves(self_ptr self);
/// Shuts a node that asked to leave down once it reported the round; false when the run ended.
bool release_if_leaving(self_ptr self, int rank);
/// Marks a node lost (its copies are replanned); false when the run ended (every node lost).
bool node_lost(self_ptr self, int rank, const std::string& why);
/// A node's actor went down.
void node_down(self_ptr self, const caf::down_msg& d);
/// A node's heartbeat: attributed, and its gap recorded (its loss bound learns from it).
void heartbeat_from(self_ptr self);

/// Loses every live node silent for longer than its loss bound (actors/liveness.hpp), not
/// counting time the scheduler itself ran late; leaves out the jobs whose views are overdue.
void check_heartbeats(self_ptr self);
/// The cluster of live nodes; a change invalidates the last plan and the jobs' last types.
void refresh_live_cluster(scheduler_state& st);
/// Loses the nodes that have not reported round `round` by its deadline (a late node still
/// heartbeating gets up to two more report graces first); false when the round must still
/// wait or the run ended.
bool lose_late_nodes(self_ptr self, std::int64_t round);

// ---- rounds (scheduler_rounds.cpp) ----------------------------------------------------------

/// Starts the next round: admits arrivals and asks every active job for its view.
void start_round(self_ptr self);
/// Leaves out of the round start the jobs whose views are overdue.
void check_views(self_ptr self);
/// A node reported every copy of a round; true when it was the current round's report of a
/// live node and the run goes on.
bool on_round_done(self_ptr self, const round_done& d);
/// Node `rank` let go of the processes the round's orders move (settle_atom): the orders go
/// out once every node asked has answered.
void on_settled(self_ptr self, int rank, std::int64_t round);
/// The nodes asked to settle round `round` took too long: its orders go out without them.
void settle_overdue(self_ptr self, std::int64_t round);
/// A copy of round `round` started: the round's dispatch latency once every copy has.
void copy_started_in(self_ptr self, std::int64_t round);

// ---- the run's end (scheduler_ending.cpp) ---------------------------------------------------

/// Ends the run: asks every job actor for its summary and switches to the `ending`
/// behaviour, which collects them and ends the run with the last.
void finish(self_ptr self, bool ok, std::string why, bool at_boundary = false);

}  // namespace tessera::actors::sched
