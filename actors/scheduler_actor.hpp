#pragma once
/// @file scheduler_actor.hpp
/// The scheduler actor: registers the nodes, then runs rounds on a timer. Each round goes
/// through the shared round loop (runtime/core/round_loop.hpp: admission, the policy's snapshot,
/// plan validation, exactly as in the simulator), then actors/dispatch.hpp turns the plan
/// into each live node's round_orders.
///
/// Its life is a sequence of named states, each a behaviour switched with `become`:
///   registering  until every node of the cluster file has registered (or the time-out);
///   starting     the round's start: the active job actors' views are being collected;
///   settling     the round is planned; its orders wait until the nodes holding warm
///                programs with unsaved state let go of those the orders move (settle_atom);
///   running      a round's orders are out and its time is not up;
///   draining     its time is up; waiting for the nodes' reports, then the next round;
///   idle         no active job; waiting for the next arrival;
///   ending       the run's end: the job actors' summaries are collected, then the summary
///                is sent, the nodes are shut down and the actor quits.
/// The run ends from any state: every job finished (not when serving: a served cluster waits
/// for submissions), a stop request (at the next round boundary), a policy error, every node
/// lost, a refused node or the run's time-out. A message a phase does not take (a timer of a
/// phase that is over) is dropped by the default handler; from another actor it is counted.
/// The handlers of each interface the scheduler serves (actors/interfaces.hpp: nodes, job
/// actors, clients) are built as typed behaviours, so the compiler checks them against the
/// protocol. One file per concern: scheduler_nodes.cpp, scheduler_rounds.cpp,
/// scheduler_clients.cpp, scheduler_ending.cpp; scheduler_actor.cpp holds the behaviours.
///
/// Jobs are owned by job actors (actors/job_actor.hpp), one per job, spawned here when a job
/// is added: each keeps its job's life (actors/job_life.hpp's state machine), copies,
/// checkpoint book, restarts and measured rates, and takes its copies' reports from the nodes
/// directly (start_copy::job_actor). At a round's start the scheduler asks every active job
/// for its view (a job that does not answer within `job_timeout` is left out of the round,
/// logged), plans with plan_round exactly as before, then tells each job its assignment and
/// each node its orders. It keeps every job's latest job_snapshot (sent with each view and
/// whenever the job's state changes) to plan, dispatch and answer clients without asking the
/// jobs; it hears from them which copies started (dispatch latency), measured rates
/// (run_rates) and failed checkpoint writes (the directory's health); it tells them when a
/// node of their round is lost, and collects their summaries at the end. A copy's steps never
/// pass through an actor: its parts synchronise through the nodes' aggregators
/// (actors/copy_round.hpp). Clients in the scheduler's process (the control API) submit,
/// cancel (forwarded to the job), stop and query it (actors/protocol.hpp, "clients");
/// actors/status_views.hpp builds their answers from a narrow view of the state. Time is read
/// from the actor system's clock, so tests drive it with CAF's test coordinator.
///
/// Trust (actors/auth.hpp, actors/protocol.hpp): a node registers by proving the cluster
/// secret; a registration without a valid proof, or for a rank a live node holds, is refused
/// and logged without ending the run. After registration each message is attributed to the
/// actor that sent it (`by_addr`), never to a rank it claims; messages from other actors are
/// dropped and counted, and a node declared lost is fenced: it is told so once and its later
/// reports are refused. A lost or new node may register again while the run goes on (a
/// join) and gets work from the next round; a node that asks to leave (leave_atom) finishes
/// its round and is shut down with exit code 0.
///
/// Failures: a node is lost when its actor goes down (its process died or its connection
/// timed out; CAF's heartbeats and connection timeout are configured by the launcher), when it
/// sends no heartbeat for `heartbeat_timeout`, or when it does not report a round within the
/// round's length plus `report_grace`. Its copies' progress of the current round is lost; they
/// are planned again from their last checkpoint (the previous round boundary) on the nodes
/// left, so no job is lost and at most one round of progress is. Its jobs are fenced, so if it
/// was only stalled its late checkpoint writes are refused.
///
/// Checkpoints (actors/checkpoints.hpp): a job resumes from the newest checkpoint the scheduler
/// confirmed and falls back to the one before (or step 0) when a node finds it unusable; a
/// checkpoint directory that does not take writes pauses every job until a probe succeeds.

#include <caf/all.hpp>

#include "actors/scheduler_state.hpp"

namespace tessera::actors {

/// The scheduler actor's behaviour. `listener` receives one run_summary when the run ends
/// (every job finished: ok; a policy error, every node lost, a refused node or a time-out:
/// not ok, with the reason); then the scheduler quits after telling the nodes to shut down.
/// Rounds begin once every node of the cluster file has registered.
caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, scheduler_config cfg,
                              caf::actor listener);

}  // namespace tessera::actors
