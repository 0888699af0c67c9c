#pragma once
/// @file interfaces.hpp
/// The protocol's table (actors/protocol.hpp lists the messages) as typed actor interfaces:
/// what each actor takes from whom, and what it answers. CAF 0.17 checks them at compile time
/// on both sides:
/// - a sender holding one of these handles can send only what the interface lists, and its
///   response handlers must take the listed answer (`caf::actor_cast` turns the dynamically
///   typed handle a spawn or a remote lookup gives into the interface);
/// - a receiver builds its handlers for an interface as the interface's `behavior_type` (a
///   `caf::typed_behavior`), which does not compile when a handler is missing, extra, or
///   answers another type.
/// The actors themselves stay dynamically typed: each takes messages from several interfaces
/// (the scheduler from nodes, job actors and clients) and switches phases with `become`, so
/// it composes the typed handler sets into each phase's behaviour (`handlers_of`).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/job_messages.hpp"
#include "actors/protocol.hpp"

namespace tessera::actors {

/// The scheduler as a node sees it: registration (two steps), heartbeats, a drain request,
/// its copies' starts (dispatch latency) and the end of its round's reports.
using scheduler_node_api =
    caf::typed_actor<caf::replies_to<auth_request>::with<auth_challenge>,
                     caf::replies_to<node_hello>::with<node_welcome>, caf::reacts_to<heartbeat>,
                     caf::reacts_to<leave_atom>, caf::reacts_to<copy_started>,
                     caf::reacts_to<round_done>, caf::reacts_to<settled_atom, std::int64_t>>;

/// The scheduler as its job actors see it: their latest snapshots, their views at a round
/// start and their summaries at the end, measured rates and failed checkpoint writes.
using scheduler_job_api = caf::typed_actor<
    caf::reacts_to<job_snapshot>, caf::reacts_to<view_atom, std::uint64_t, job_snapshot>,
    caf::reacts_to<summary_atom, std::uint64_t, job_final>, caf::reacts_to<rate_sample>,
    caf::reacts_to<write_failed_atom, std::int64_t, std::string>>;

/// The scheduler as clients in its process see it (the control API, the launcher).
using scheduler_client_api =
    caf::typed_actor<caf::replies_to<submit_job>::with<std::vector<std::int64_t>>,
                     caf::replies_to<cancel_job>::with<cancel_outcome>,
                     caf::replies_to<stop_atom>::with<bool>,
                     caf::replies_to<jobs_atom, std::int64_t, bool>::with<std::vector<job_status>>,
                     caf::replies_to<job_page_atom, std::int64_t, std::int32_t,
                                     std::string>::with<std::vector<job_status>>,
                     caf::replies_to<nodes_atom>::with<std::vector<node_status>>,
                     caf::replies_to<rounds_atom, std::int32_t>::with<std::vector<round_status>>,
                     caf::replies_to<cluster_atom>::with<cluster_status>>;

/// A job actor as its scheduler sees it: the round boundary, the round's assignment, a lost
/// node of its round, the run's end and a client's cancel (delegated).
using job_scheduler_api =
    caf::typed_actor<caf::reacts_to<view_atom, std::uint64_t>, caf::reacts_to<job_assignment>,
                     caf::reacts_to<node_lost_atom, std::int64_t, std::int32_t>,
                     caf::reacts_to<summary_atom, bool, std::uint64_t>,
                     caf::replies_to<cancel_job>::with<cancel_outcome>>;

/// A job actor as the nodes of its round see it: its copies' reports.
using job_node_api =
    caf::typed_actor<caf::reacts_to<copy_started>, caf::reacts_to<progress_report>,
                     caf::reacts_to<checkpoint_done>, caf::reacts_to<job_finished>>;

/// A node as the scheduler and the job actors see it.
using node_api =
    caf::typed_actor<caf::reacts_to<fenced_atom, std::string>, caf::reacts_to<round_orders>,
                     caf::reacts_to<settle_atom, round_orders>, caf::reacts_to<stop_copy>,
                     caf::reacts_to<shutdown_atom, std::int32_t>>;

/// A typed handler set (an interface's behavior_type) as a message_handler, to compose with
/// other handlers into a phase's behaviour; the set was checked against its interface when
/// it was built.
template <class Typed>
caf::message_handler handlers_of(Typed typed) {
  return caf::message_handler{typed.unbox().as_behavior_impl()};
}

}  // namespace tessera::actors
