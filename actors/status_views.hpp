#pragma once
/// @file status_views.hpp
/// What the scheduler tells its clients (the control API, docs/api.md) about its jobs, nodes
/// and rounds: plain functions of the part of its state clients see (`client_view`), so they
/// are tested without actors. A job's status is the latest its job actor sent
/// (actors/job_actor.hpp: with every view and whenever its state changes), so a query never
/// waits for the job actors.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "actors/histogram.hpp"
#include "actors/protocol.hpp"
#include "actors/scheduler_state.hpp"
#include "runtime/core/model.hpp"

namespace tessera::actors {

/// The part of the scheduler's state its clients are shown (read only).
struct client_view {
  const cluster& cl;                                ///< the cluster file
  std::string policy;                               ///< the policy's name
  double round_length = 0;                          ///< seconds per round
  std::int64_t round = -1;                          ///< current round, -1 before the first
  bool run_started = false;                         ///< every node registered
  bool stopping = false;                            ///< a stop was asked
  const std::deque<job_entry>& jobs;                ///< every job, in submission order
  const std::map<std::int64_t, job_entry*>& by_id;  ///< every job by id
  const std::vector<node_record>& nodes;            ///< by rank
  const std::vector<std::int32_t>& failed_ranks;    ///< nodes declared lost
  const std::deque<round_status>& recent_rounds;    ///< the last rounds
  const latency_histogram& plan_seconds;            ///< planning time of each round
  const latency_histogram& dispatch_seconds;        ///< orders out -> every copy running
  const liveness_settings& liveness;                ///< when a silent node is lost
  const cluster_journal* log;                       ///< a served cluster's journal, or null
  std::int64_t journal_paused_rounds;               ///< rounds the jobs waited for it
};

/// The client view of the scheduler's state `st`.
client_view client_view_of(const scheduler_state& st);

/// Job `id`'s status (empty when there is none), or every job's (id < 0) in submission order;
/// with `placements`, each job's parts in its recent rounds.
std::vector<job_status> job_statuses(const client_view& v, std::int64_t id, bool placements);

/// A page of the job list: the jobs with an id above `after`, in id order, whose state is
/// `state` (any when empty), at most `count`; without placements. Costs the page, not the
/// job count (by_id is ordered), except for the jobs a state filter skips.
std::vector<job_status> job_page(const client_view& v, std::int64_t after, std::int32_t count,
                                 const std::string& state);

/// Every node of the cluster file, by rank, with its parts in the current round and, for a
/// live one, its silence at `now` against its loss bound.
std::vector<node_status> node_statuses(const client_view& v, caf::actor_clock::time_point now);

/// The last `limit` rounds (at most those kept), oldest first.
std::vector<round_status> round_statuses(const client_view& v, std::int32_t limit);

/// The cluster's summary at `now` seconds after its start.
cluster_status cluster_of(const client_view& v, double now);

}  // namespace tessera::actors
