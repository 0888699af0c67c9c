#pragma once
/// @file status_views.hpp
/// What the scheduler tells its clients (the control API, docs/api.md) about its jobs, nodes
/// and rounds: plain functions of its state, so they are tested without actors. A job's status
/// is the latest its job actor sent (actors/job_actor.hpp: with every view and whenever its
/// state changes), so a query never waits for the job actors.

#include <cstdint>
#include <vector>

#include "actors/protocol.hpp"

namespace tessera::actors {

struct scheduler_state;

/// Job `id`'s status (empty when there is none), or every job's (id < 0) in submission order;
/// with `placements`, each job's parts in its recent rounds.
std::vector<job_status> job_statuses(const scheduler_state& st, std::int64_t id, bool placements);

/// Every node of the cluster file, by rank, with its parts in the current round.
std::vector<node_status> node_statuses(const scheduler_state& st);

/// The last `limit` rounds (at most those kept), oldest first.
std::vector<round_status> round_statuses(const scheduler_state& st, std::int32_t limit);

/// The cluster's summary at `now` seconds after its start.
cluster_status cluster_of(const scheduler_state& st, double now);

}  // namespace tessera::actors
