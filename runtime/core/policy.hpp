#pragma once
/// @file policy.hpp
/// The policy interface: one snapshot in, one round plan out. A policy never commits anything
/// and never knows whether a simulator or the actor runtime executes its plan.

#include <memory>
#include <string>

#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"

namespace tessera {

/// A scheduling policy. May keep state between rounds (cached solutions, deficits, prices);
/// deterministic for a given seed.
class policy {
 public:
  virtual ~policy() = default;
  /// The registry name, e.g. "max_min_fairness_perf".
  virtual std::string name() const = 0;
  /// Plans one round. An error means the policy failed, not that nothing could be placed (an
  /// empty plan is a valid answer).
  virtual result<round_plan> plan(const snapshot& s) = 0;
  /// True when the policy may run several of a job's tasks back to back on one GPU (a task
  /// split, runtime/core/task_split.hpp), so a job may need more tasks than the cluster has GPUs.
  /// Launchers ask it before refusing such a job.
  virtual bool stacks_tasks() const { return false; }
};

/// A Gavel-family policy: computes time fractions per GPU type; the shared mechanism turns
/// them into placements.
class allocation_policy {
 public:
  virtual ~allocation_policy() = default;
  /// Time fractions for snapshot::jobs (rows) over cluster::types (columns).
  virtual result<allocation> allocate(const snapshot& s) = 0;
  /// True when the allocation depends on progress or time, so it must be recomputed every
  /// round rather than only when the job set changes.
  virtual bool recompute_every_round() const { return false; }
  /// Takes back an allocation the caller is done with, so a policy may reuse its storage in
  /// the next allocate (none by default).
  virtual void recycle(allocation&& spent) { (void)spent; }
};

}  // namespace tessera
