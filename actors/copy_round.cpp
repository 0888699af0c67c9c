#include "actors/copy_round.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/cuda_mlp.hpp"
#include "runtime/node/train/fork_merge.hpp"

namespace tessera::actors {

namespace {

using clock_type = std::chrono::steady_clock;

/// Why checkpoint `path` cannot give job `job` its state at `step`, loading it into `t`; ""
/// when it can.
std::string try_checkpoint(const std::string& path, std::int64_t job, std::int64_t step,
                           train::trainable& t) {
  auto h = train::load_trainable_checkpoint(path, t);
  if (!h) return h.err().message;
  if (h->job != job)
    return path + ": holds job " + std::to_string(h->job) + ", expected " + std::to_string(job);
  if (t.step() != step)
    return path + ": at step " + std::to_string(t.step()) + ", confirmed at step " +
           std::to_string(step);
  return "";
}

/// On a node with real GPUs (`device` >= 0, the copy's first assigned GPU), a kind that takes
/// the "device" key (train::cuda_device_key: the CUDA MLP) runs on that GPU unless the job's
/// configuration names one. Whether the kind takes the key is asked of the registry's check,
/// so the node never looks at kind names; CPU kinds refuse the key and are left as they are.
void place_on_device(const train::trainable_registry& kinds, const start_copy& o, int device,
                     train::trainable_config& config) {
  if (device < 0 || config.count(train::cuda_device_key)) return;
  auto with = config;
  with[train::cuda_device_key] = device;
  if (kinds.check(o.kind, o.seed, with)) config = std::move(with);
}

/// Brings `slot.model` to the state the scheduler expects and records where it came from: the
/// model kept in memory when at the expected step (unless `always_load`), else the resume
/// checkpoint, else the fallback, else a fresh model at step 0. Returns "" or why no model
/// could be made at all (an unknown kind).
std::string load_state(copy_slot& slot, const train::trainable_registry& kinds, bool always_load) {
  const auto& o = slot.order;
  slot.bad_files.clear();
  slot.source_why.clear();
  // A model kept from the previous round is current when it is at the step of the newest
  // confirmed checkpoint (a forked copy's too: every copy holds the merged state). A round
  // that failed dropped its model.
  if (!always_load && slot.model && slot.model->step() == o.resume_step) {
    slot.source = state_source::memory;
    return {};
  }
  train::trainable_config config(o.config.begin(), o.config.end());
  place_on_device(kinds, o, slot.device_index(), config);
  const struct {
    const std::string& path;
    std::int64_t step;
    state_source source;
  } candidates[] = {{o.resume_path, o.resume_step, state_source::resume},
                    {o.fallback_path, o.fallback_step, state_source::fallback}};
  for (const auto& c : candidates) {
    if (c.path.empty()) continue;
    auto m = kinds.make(o.kind, o.seed, config);
    if (!m) return m.err().message;
    const auto why = try_checkpoint(c.path, o.job, c.step, **m);
    if (why.empty()) {
      slot.model = std::move(*m);
      slot.source = c.source;
      return {};
    }
    slot.bad_files.push_back(c.path);
    slot.source_why += (slot.source_why.empty() ? "" : "; ") + why;
  }
  auto fresh = kinds.make(o.kind, o.seed, config);
  if (!fresh) return fresh.err().message;
  slot.model = std::move(*fresh);
  slot.source = o.resume_path.empty() ? state_source::fresh : state_source::scratch;
  return {};
}

/// Writes the round's checkpoint of `m` and publishes it unless the job's fence holds a newer
/// epoch than the order's. Sets slot.checkpointed, or slot.checkpoint_error for a failed
/// write; returns the refusal when the fence stopped it ("" otherwise), logged here: a lost
/// node's actor may be gone, and the scheduler ignores it anyway.
std::string publish_checkpoint(copy_slot& slot, const train::trainable& m, const copy_hooks& hooks,
                               std::int32_t rank) {
  const auto& o = slot.order;
  train::write_options opt;
  if (hooks.checkpoint_errno)
    opt.inject_errno = [&] { return hooks.checkpoint_errno(o, slot.round); };
  opt.before_rename = [&]() -> status {
    if (hooks.before_checkpoint_rename) hooks.before_checkpoint_rename(o, slot.round);
    if (o.fence_path.empty()) return {};
    auto st = train::check_fence(o.fence_path, o.epoch);
    slot.fenced = !st;
    return st;
  };
  auto st =
      train::save_trainable_checkpoint(o.checkpoint_path, {o.job, slot.round, o.epoch}, m, opt);
  if (st) {
    slot.checkpointed = true;
    if (hooks.after_checkpoint) hooks.after_checkpoint(o, slot.round, o.checkpoint_path);
    return "";
  }
  if (!slot.fenced) {
    slot.checkpoint_error = st.err().message;
    return "";
  }
  std::cerr << "tessera: node rank " << rank << ": job " << o.job << " round " << slot.round
            << ": checkpoint refused: " << st.err().message << '\n';
  return st.err().message;
}

/// A step counter as two floats, each exact (24-bit halves), and back.
void push_step(std::vector<float>& v, std::int64_t step) {
  v.push_back(static_cast<float>(step >> 24));
  v.push_back(static_cast<float>(step & 0xffffff));
}
std::int64_t read_step(const float* two) {
  return (static_cast<std::int64_t>(two[0]) << 24) + static_cast<std::int64_t>(two[1]);
}

/// The aggregator options of the order's collectives.
comm::reduce_options sync_options(const start_copy& o) {
  comm::reduce_options opt;
  opt.channel = o.channel;
  opt.timeout = std::chrono::milliseconds(static_cast<long>(o.aggregate_timeout * 1000));
  return opt;
}

/// The parts of a spread copy agree before the first step: each can start, and all start
/// from the same step. Returns "" and sets `go` (every part can start), else what failed.
std::string agree_to_start(const start_copy& o, comm::aggregator& agg, std::int64_t step,
                           bool can_start, bool& go) {
  std::vector<float> mine{can_start ? 1.0f : 0.0f};
  push_step(mine, step);
  std::vector<float> all;
  if (auto st = agg.allgather(o.part_ranks, mine, all, nullptr, sync_options(o)); !st)
    return st.err().message;
  go = true;
  for (std::size_t k = 0; k + 3 <= all.size(); k += 3) {
    go = go && all[k] > 0.5f;
    if (read_step(&all[k + 1]) != step)
      return "the parts of the copy start from different steps (" + std::to_string(step) +
             " here, " + std::to_string(read_step(&all[k + 1])) + " on rank " +
             std::to_string(o.part_ranks[k / 3]) + ")";
  }
  return "";
}

/// One step of a copy spread over nodes (see the header, steps 1-4): computes this node's
/// shards at `data_step`, waits until `wall_end`, gathers everyone's gradients and flags,
/// applies the shard-ordered sum. Returns "" and sets `go_on`, else what failed; `sync`
/// tells whether the failure was in the gather.
std::string spread_step(const start_copy& o, train::trainable& m, comm::aggregator& agg,
                        std::int64_t data_step, clock_type::time_point wall_end,
                        const std::function<bool()>& can_go_on, bool& go_on, bool& sync) {
  sync = false;
  const std::size_t n = m.num_params();
  std::vector<float> mine;
  mine.reserve(static_cast<std::size_t>(o.shards) * n + 1);
  std::vector<float> g;
  for (int s = o.shard_begin; s < o.shard_begin + o.shards; ++s) {
    if (auto st = m.compute_gradient(s, o.scale, data_step, g); !st) return st.err().message;
    mine.insert(mine.end(), g.begin(), g.end());
  }
  std::this_thread::sleep_until(wall_end);
  mine.push_back(can_go_on() ? 1.0f : 0.0f);
  std::vector<float> all;
  std::vector<std::size_t> counts;
  if (auto st = agg.allgather(o.part_ranks, mine, all, &counts, sync_options(o)); !st) {
    sync = true;
    return st.err().message;
  }
  std::vector<std::vector<float>> shards;
  shards.reserve(static_cast<std::size_t>(o.scale));
  go_on = true;
  std::size_t at = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 1 || (counts[k] - 1) % n != 0)
      return "rank " + std::to_string(o.part_ranks[k]) + " sent " + std::to_string(counts[k]) +
             " values, not whole gradients of " + std::to_string(n) + " parameters";
    for (std::size_t j = 0; j + 1 < counts[k]; j += n)
      shards.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(at + j),
                          all.begin() + static_cast<std::ptrdiff_t>(at + j + n));
    go_on = go_on && all[at + counts[k] - 1] > 0.5f;
    at += counts[k];
  }
  if (static_cast<int>(shards.size()) != o.scale)
    return "the parts computed " + std::to_string(shards.size()) + " shards, the job has " +
           std::to_string(o.scale);
  std::vector<float> sum;
  if (auto st = train::sum_shard_gradients(shards, sum); !st) return st.err().message;
  if (auto st = m.apply_gradient(sum, o.scale); !st) return st.err().message;
  return "";
}

/// The leader's state (parameters, optimizer state, step) sent to the other parts of its
/// copy: an allgather in which only the leader contributes. Returns "" or what failed.
std::string share_leader_state(const start_copy& o, train::trainable& m, bool leader,
                               comm::aggregator& agg) {
  std::vector<float> mine;
  if (leader) {
    mine = m.params();
    if (auto* s = m.optimizer_state()) mine.insert(mine.end(), s->begin(), s->end());
    push_step(mine, m.step());
  }
  std::vector<float> all;
  if (auto st = agg.allgather(o.part_ranks, mine, all, nullptr, sync_options(o)); !st)
    return st.err().message;
  if (leader) return "";
  auto& p = m.params();
  auto* s = m.optimizer_state();
  const std::size_t want = p.size() + (s ? s->size() : 0) + 2;
  if (all.size() != want)
    return "the copy's leader sent " + std::to_string(all.size()) + " values, expected " +
           std::to_string(want);
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(p.size()), p.begin());
  if (s) std::copy(all.begin() + static_cast<std::ptrdiff_t>(p.size()), all.end() - 2, s->begin());
  m.set_step(read_step(all.data() + all.size() - 2));
  return "";
}

/// Merges a forked job's copies at the round end (their leaders, through the aggregator),
/// then hands the merged state to the copy's other parts; why it failed, or "".
std::string merge_copies(copy_slot& slot, train::trainable& m, comm::aggregator& agg, bool leader,
                         const copy_hooks& hooks) {
  const auto& o = slot.order;
  std::string why;
  if (leader) {
    if (hooks.before_merge) hooks.before_merge(o, slot.round);
    const auto rule = train::parse_fork_merge_rule(o.merge);
    comm::group leaders(o.fork_ranks.begin(), o.fork_ranks.end());
    std::sort(leaders.begin(), leaders.end());
    if (!rule)
      why = "unknown merge rule '" + o.merge + "' (known: " + train::fork_merge_rule_names() + ")";
    else if (auto st = train::fork_merge(m, {slot.start_step, slot.steps}, *rule, agg, leaders,
                                         sync_options(o));
             !st)
      why = st.err().message;
  }
  if (why.empty() && o.part_ranks.size() > 1) why = share_leader_state(o, m, leader, agg);
  return why;
}

}  // namespace

bool leads_copy(const start_copy& o, std::int32_t rank) {
  return o.part_ranks.size() <= 1 || o.part_ranks.front() == rank;
}

void run_copy_round(copy_slot& slot, const train::trainable_registry& kinds,
                    std::optional<double> speed, double length,
                    const std::function<void(std::int64_t)>& on_started, comm::aggregator* agg,
                    std::int32_t rank, const copy_hooks& hooks) {
  const auto t0 = clock_type::now();
  const auto deadline =
      t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(length));
  const auto& o = slot.order;
  slot.steps = 0;
  slot.finished = false;
  slot.reached_target = false;
  slot.checkpointed = false;
  slot.checkpoint_error.clear();
  slot.fenced = false;
  slot.retry = false;
  slot.error.clear();
  const std::size_t fork = o.fork_ranks.size();
  const bool spread = o.part_ranks.size() > 1;
  const bool leader = leads_copy(o, rank);
  auto fail = [&](const std::string& why, bool sync) {
    if (slot.error.empty()) {
      slot.error = why;
      slot.retry = sync;
    }
  };
  if ((fork > 1 || spread) && !agg)
    fail("job " + std::to_string(o.job) + " is " + (fork > 1 ? "forked" : "spread over nodes") +
             " but this node has no aggregator (that needs the MPI launch)",
         false);
  if (slot.error.empty()) fail(load_state(slot, kinds, hooks.always_load), false);
  if (slot.error.empty()) {
    auto& m = *slot.model;
    slot.start_step = m.step();
    if (on_started) on_started(slot.start_step);
    // A throttled step lasts `pace`; an unthrottled one (real GPUs) what it takes, and there
    // the last step's time tells whether another fits in the round.
    const auto pace =
        speed ? std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(
                    std::max(1, o.task_times) * o.step_time / (*speed * o.speed_share)))
              : clock_type::duration::zero();
    auto last_step = pace;
    // Another step may begin (for the flag of a spread copy: after the one in progress).
    auto can_step = [&](std::int64_t done, std::int64_t at_step, clock_type::time_point from) {
      return at_step < o.total_steps && !slot.stop.load(std::memory_order_relaxed) &&
             (o.step_budget < 0 || done < o.step_budget) && from + last_step <= deadline;
    };
    // A forked copy draws batch start + i * n + c: the copies see disjoint data.
    auto data_step = [&] {
      return fork > 1 ? slot.start_step + slot.steps * static_cast<std::int64_t>(fork) + o.copy
                      : m.step();
    };
    bool go = can_step(0, m.step(), clock_type::now());
    if (spread) {
      const auto why = agree_to_start(o, *agg, m.step(), go, go);
      if (!why.empty()) fail("job " + std::to_string(o.job) + ": " + why, true);
    }
    while (go && slot.error.empty()) {
      const auto begin = clock_type::now();
      if (spread) {
        bool sync = false;
        const auto why = spread_step(
            o, m, *agg, data_step(), begin + pace,
            [&] { return can_step(slot.steps + 1, m.step() + 1, clock_type::now()); }, go, sync);
        if (!why.empty()) {
          fail("job " + std::to_string(o.job) + " step " + std::to_string(m.step()) + ": " + why,
               sync);
          break;
        }
        ++slot.steps;
        if (!speed) last_step = clock_type::now() - begin;
      } else {
        if (auto st = m.train_step_on(o.scale, data_step()); !st) {
          fail(st.err().message, false);
          break;
        }
        ++slot.steps;
        std::this_thread::sleep_until(begin + pace);
        if (!speed) last_step = clock_type::now() - begin;
        go = can_step(slot.steps, m.step(), clock_type::now());
      }
    }
    if (fork > 1 && slot.error.empty())
      if (const auto why = merge_copies(slot, m, *agg, leader, hooks); !why.empty())
        fail("merging the " + std::to_string(fork) + " copies of job " + std::to_string(o.job) +
                 ": " + why,
             true);
    slot.loss = m.loss();
    slot.reached_target = o.target_loss > 0 && slot.loss <= o.target_loss;
    slot.finished = m.step() >= o.total_steps || slot.reached_target;
    if (slot.finished) slot.accuracy = m.held_out_accuracy();
    // Every part of every copy now holds the same state; copy 0's leader writes it. A fenced
    // writer was declared lost: its round is lost, as after a failed synchronisation.
    if (slot.error.empty() && o.copy == 0 && leader)
      if (const auto refused = publish_checkpoint(slot, m, hooks, rank); !refused.empty())
        fail(refused, true);
  }
  // A failed round may leave the model half merged or out of step with the other parts, and
  // an unsaved one is ahead of every checkpoint: the next round loads a checkpoint instead.
  if (!slot.error.empty() || !slot.checkpoint_error.empty()) slot.model.reset();
  slot.end_step = slot.model ? slot.model->step() : o.resume_step;
  slot.busy_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (slot.busy_seconds > 0 && slot.steps > 0) {
    const double rate = slot.steps / slot.busy_seconds;
    slot.ema_throughput = slot.ema_throughput > 0 ? 0.5 * slot.ema_throughput + 0.5 * rate : rate;
  }
}

}  // namespace tessera::actors
