#pragma once
/// @file task_layout.hpp
/// Where the tasks of each job copy run in a round: the executor's view of a round plan.
///
/// A job of scale K runs each step as K tasks, task i computing the gradient of shard i of the
/// step's global batch (runtime/node/train/trainable.hpp). A plan places a job copy with one
/// assignment (a gang: one task per GPU, on one server or spanning several) or several (a
/// task split, Hare: tasks > 0 on each, summing to K; runtime/core/task_split.hpp). The layout
/// turns that into one `copy_part` per server: the GPUs the copy holds there, the tasks it
/// runs there, which shards those are, and how many task-times its busiest GPU needs per step.
///
/// Rules:
/// - An assignment's tasks (`tasks`, or K for a gang) are spread over its shares in proportion
///   to their GPUs, whole tasks by largest remainder (ties: share order); for a gang of K GPUs
///   that is one task per GPU.
/// - Pieces of one copy on the same server (a split may place two assignments there) add up:
///   GPUs and tasks summed; task-times per step = the most any one of them needs,
///   ceil(tasks / GPUs) (the same step time runtime/core/task_split.hpp charges).
/// - Parts are ordered by server index and take consecutive shards in that order, so the
///   concatenation of the parts' shard gradients is in shard order 0..K-1 and a reduction of
///   them in part order is the one every executor must use (train::sum_shard_gradients).
/// - A share that receives no task (more GPUs than tasks) makes a part with tasks = 0: it
///   holds GPUs and computes nothing.

#include <functional>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"

namespace tessera {

/// One server's part of a job copy in a round.
struct copy_part {
  int server = -1;      ///< server index in the plan's cluster
  int gpus = 0;         ///< GPUs the copy holds on it
  int tasks = 0;        ///< tasks per step it runs: shards shard_begin .. shard_begin+tasks-1
  int shard_begin = 0;  ///< its first shard
  int task_times = 0;   ///< task-times per step on its busiest GPU (0 when tasks = 0)
};

/// The parts of one job copy, by server index.
struct copy_layout {
  job_id job = 0;
  int copy = 0;
  int scale = 0;                 ///< K
  job_id partner = -1;           ///< the job sharing its GPUs (assignment::partner), -1 = none
  std::vector<copy_part> parts;  ///< by server, shards consecutive in that order
};

/// Lays out every job copy of `p` (in order of first appearance). `scale_of(job)` gives K.
std::vector<copy_layout> layout_copies(const round_plan& p,
                                       const std::function<int(job_id)>& scale_of);

/// Spreads `tasks` whole tasks over bins in proportion to `weights` (largest remainder, ties
/// to the earlier bin). Weights must be positive.
std::vector<int> spread_tasks(int tasks, const std::vector<int>& weights);

}  // namespace tessera
