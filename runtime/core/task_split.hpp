#pragma once
/// @file task_split.hpp
/// The time model of relaxed fixed-scale synchronisation (Hare, IEEE TCC'24), shared
/// by the simulator's executor and the policies that plan task splits.
///
/// A job of scale K runs each step as K independent gradient tasks over K shards of its global
/// batch and synchronises once all K are done. A *task split* is a set of assignments of one
/// job copy (same `job`, same `copy`) each with `tasks > 0`: assignment a puts t_a tasks per
/// step on its g_a GPUs, and sum_a t_a = K. A GPU runs its tasks back to back; the GPUs of an
/// assignment share its tasks as evenly as whole tasks allow, so the busiest runs
/// ceil(t_a / g_a) of them (the policies here only make splits with g_a dividing t_a, where
/// this is exactly t_a / g_a).
///
/// Per-task time. Gavel's table gives T(type, K): steps/s of the job as a K-GPU gang, one task
/// per GPU per step, so one task on a GPU of server u takes
///     tau_u = 1 / rate_at(u, job_type, K, multi)
/// seconds, where rate_at is the executor's per-server throughput
/// (runtime/core/server_throughput.hpp: table x speed factor, else the analytic model) and `multi`
/// is whether the job's split spans more than one server (Gavel's "_unconsolidated" entry: the
/// gradient exchange crosses the network). tau_u includes a task's share of the step's
/// synchronisation, so it is an upper bound when several tasks share a GPU (no exchange among
/// them); for the gang placement (K tasks on K GPUs of one type) it gives back exactly T(type, K).
///
/// Step time of a split: a step completes when its last task completes,
///     step_s = max_a ceil(t_a / g_a) * max_{u in a} tau_u,
/// and the job advances at 1 / step_s steps/s (0 when some server has no estimate).
/// Assignments without tasks (tasks = 0, every other policy) are not task splits: they run at
/// `server_throughput::rate`.

#include <string>
#include <vector>

#include "runtime/core/plan.hpp"
#include "runtime/core/server_throughput.hpp"

namespace tessera {

/// Tasks the busiest GPU of `a` runs per step: ceil(tasks / GPUs); 0 when `a` has no GPUs or
/// no tasks.
int tasks_per_gpu(const assignment& a);

/// Seconds one task of a scale-`scale` job of `job_type` takes on server `server`:
/// 1 / rate_at(server, job_type, scale, multi_server); +infinity when there is no estimate.
double task_seconds(const server_throughput& rates, int server, const std::string& job_type,
                    int scale, bool multi_server);

/// True when the assignments together use more than one server.
bool spans_servers(const std::vector<const assignment*>& parts);

/// Seconds per step of job `j` split over `parts` (assignments of one job copy, each with
/// tasks > 0): max over parts of tasks_per_gpu x the slowest of its servers' task_seconds,
/// `multi` = the parts span several servers. +infinity when a server has no estimate or
/// `parts` is empty.
double split_step_seconds(const server_throughput& rates, const job& j,
                          const std::vector<const assignment*>& parts);

/// Steps/s of job `j` split over `parts`: 1 / split_step_seconds, 0 when that is infinite.
double split_rate(const server_throughput& rates, const job& j,
                  const std::vector<const assignment*>& parts);

/// Whether job `jv` can run tasks of a task split on `server`: its view has a throughput for
/// the server's GPU type, or -- the type having fewer GPUs than the job's K, which rules out a
/// gang but not a split -- `s.rates` has a measured or tabled (not analytic) rate for it there.
bool split_runs_on(const snapshot& s, const job_view& jv, int server);

}  // namespace tessera
