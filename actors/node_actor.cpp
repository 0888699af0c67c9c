#include "actors/node_actor.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include <signal.h>
#include <unistd.h>

#include "runtime/train/checkpoint.hpp"

namespace tessera::actors {

namespace {

using clock_type = std::chrono::steady_clock;

/// Heartbeat timer tick.
using hb_tick_atom = caf::atom_constant<caf::atom("hbtick")>;

std::int64_t slot_key(std::int64_t job, std::int32_t copy) { return job * 1024 + copy; }

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

/// Brings `slot.model` to the state the scheduler expects: kept in memory when its step is
/// the expected one, else loaded from the checkpoint, else fresh (step 0).
std::string load_state(copy_slot& slot, const train::trainable_registry& kinds) {
  const auto& o = slot.order;
  // A model kept from the previous round is current when it is at the step the scheduler
  // saw checkpointed (a forked copy's too: every copy holds the merged state). A round that
  // failed dropped its model.
  if (slot.model && slot.model->step() == o.resume_step) return {};
  train::trainable_config config(o.config.begin(), o.config.end());
  auto fresh = kinds.make(o.kind, o.seed, config);
  if (!fresh) return fresh.err().message;
  std::error_code ec;
  if (std::filesystem::exists(o.checkpoint_path, ec)) {
    auto h = train::load_trainable_checkpoint(o.checkpoint_path, **fresh);
    if (!h) return h.err().message;
    if (h->job != o.job)
      return o.checkpoint_path + ": holds job " + std::to_string(h->job) + ", expected " +
             std::to_string(o.job);
    // A newer checkpoint than the scheduler knew of (written by a node that failed before
    // reporting it) is newer progress, never older; an older one is an error.
    if ((*fresh)->step() < o.resume_step)
      return o.checkpoint_path + ": at step " + std::to_string((*fresh)->step()) +
             ", the scheduler expected step " + std::to_string(o.resume_step);
  } else if (o.resume_step != 0) {
    return "checkpoint " + o.checkpoint_path + " is missing (job " + std::to_string(o.job) +
           " expected at step " + std::to_string(o.resume_step) + ")";
  }
  slot.model = std::move(*fresh);
  return {};
}

}  // namespace

namespace {

/// The round end of a forked copy: merges its state with its sibling copies' through `agg`
/// (train::fork_merge); every copy then holds the merged model, which has made all the copies'
/// steps. Returns "" or what failed.
std::string merge_copies(copy_slot& slot, comm::aggregator& agg) {
  const auto& o = slot.order;
  const auto rule = train::parse_fork_merge_rule(o.merge);
  if (!rule)
    return "unknown merge rule '" + o.merge + "' (known: " + train::fork_merge_rule_names() + ")";
  comm::group members(o.fork_ranks.begin(), o.fork_ranks.end());
  std::sort(members.begin(), members.end());
  comm::reduce_options opt;
  opt.channel = static_cast<std::uint64_t>(o.job);
  opt.timeout = std::chrono::milliseconds(static_cast<long>(o.aggregate_timeout * 1000));
  if (auto st = train::fork_merge(*slot.model, {slot.start_step, slot.steps}, *rule, agg,
                                  members, opt);
      !st)
    return st.err().message;
  return "";
}

}  // namespace

void run_copy_round(copy_slot& slot, const train::trainable_registry& kinds, double speed,
                    double length, const std::function<void(std::int64_t)>& on_started,
                    comm::aggregator* agg) {
  const auto t0 = clock_type::now();
  const auto deadline = t0 + std::chrono::duration_cast<clock_type::duration>(
                                 std::chrono::duration<double>(length));
  const auto& o = slot.order;
  slot.steps = 0;
  slot.finished = false;
  slot.reached_target = false;
  slot.checkpointed = false;
  slot.error.clear();
  const std::size_t fork = o.fork_ranks.size();
  if (fork > 1 && !agg)
    slot.error = "job " + std::to_string(o.job) +
                 " is forked but this node has no aggregator (forking needs the MPI launch)";
  if (slot.error.empty()) slot.error = load_state(slot, kinds);
  if (!slot.error.empty()) {
    slot.busy_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    return;
  }
  auto& m = *slot.model;
  slot.start_step = m.step();
  if (on_started) on_started(slot.start_step);
  const auto step_wall = std::chrono::duration_cast<clock_type::duration>(
      std::chrono::duration<double>(o.step_time / speed));
  while (m.step() < o.total_steps && !slot.stop.load(std::memory_order_relaxed)) {
    if (o.step_budget >= 0 && slot.steps >= o.step_budget) break;
    const auto begin = clock_type::now();
    if (begin + step_wall > deadline) break;
    // A forked copy draws batch start + i * n + c: the copies see disjoint data.
    const auto batch = fork > 1 ? slot.start_step + slot.steps * static_cast<std::int64_t>(fork) +
                                      o.copy
                                : m.step();
    if (auto st = m.train_step_on(o.scale, batch); !st) {
      slot.error = st.err().message;
      break;
    }
    ++slot.steps;
    std::this_thread::sleep_until(begin + step_wall);
  }
  if (fork > 1 && slot.error.empty()) {
    const std::string why = merge_copies(slot, *agg);
    if (!why.empty())
      slot.error = "merging the " + std::to_string(fork) + " copies of job " +
                   std::to_string(o.job) + ": " + why;
  }
  slot.loss = m.loss();
  slot.reached_target = o.target_loss > 0 && slot.loss <= o.target_loss;
  slot.finished = m.step() >= o.total_steps || slot.reached_target;
  if (slot.finished) slot.accuracy = m.held_out_accuracy();
  // Every copy of a fork holds the same merged state; copy 0 writes it.
  if (slot.error.empty() && (fork <= 1 || o.copy == 0)) {
    auto st = train::save_trainable_checkpoint(o.checkpoint_path, o.job, slot.round, m);
    if (st)
      slot.checkpointed = true;
    else
      slot.error = st.err().message;
  }
  // A failed round (e.g. a merge that timed out) may leave the model half merged: the next
  // round loads the checkpoint instead.
  if (!slot.error.empty()) slot.model.reset();
  slot.busy_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (slot.busy_seconds > 0 && slot.steps > 0) {
    const double rate = slot.steps / slot.busy_seconds;
    slot.ema_throughput =
        slot.ema_throughput > 0 ? 0.5 * slot.ema_throughput + 0.5 * rate : rate;
  }
}

node_state::~node_state() {
  for (auto& [key, slot] : slots) {
    slot->stop = true;
    if (slot->worker.joinable()) slot->worker.join();
  }
}

caf::behavior node_actor(caf::stateful_actor<node_state>* self, node_config cfg,
                         caf::actor scheduler) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.scheduler = scheduler;
  self->monitor(scheduler);
  self->set_down_handler([=](caf::down_msg& d) {
    if (d.source != self->state.scheduler.address()) return;
    self->quit(make_run_error(run_errc::unknown_node,
                              "node rank " + std::to_string(self->state.cfg.rank) +
                                  " lost the scheduler: " + describe(self->system(), d.reason)));
  });

  node_hello hello;
  hello.version = st.cfg.version;
  hello.rank = st.cfg.rank;
  hello.name = st.cfg.srv.name;
  hello.gpu_type = st.cfg.srv.gpu_type;
  hello.gpus = st.cfg.srv.gpus;
  hello.speed = st.cfg.srv.speed;
  hello.host = st.cfg.host;
  hello.pid = static_cast<std::int32_t>(::getpid());
  self->request(scheduler, seconds(st.cfg.register_timeout), hello)
      .then(
          [=](const node_welcome& w) {
            self->state.registered = true;
            self->state.heartbeat_interval = w.heartbeat_interval;
            for (std::int64_t k = 0; k < self->state.cfg.flood; ++k)
              self->send(self->state.scheduler, heartbeat{self->state.cfg.rank, -1 - k});
            self->send(self, hb_tick_atom::value);
          },
          [=](caf::error& e) {
            self->quit(make_run_error(run_errc::protocol_mismatch,
                                      "node rank " + std::to_string(self->state.cfg.rank) +
                                          " was refused by the scheduler: " +
                                          describe(self->system(), e)));
          });

  return {
      [=](hb_tick_atom) {
        auto& s = self->state;
        self->send(s.scheduler, heartbeat{s.cfg.rank, s.heartbeat_seq++});
        self->delayed_send(self, seconds(s.heartbeat_interval), hb_tick_atom::value);
      },
      [=](const round_orders& o) {
        auto& s = self->state;
        s.round = o.round;
        // Copies not continued this round are dropped (their state is checkpointed).
        for (auto it = s.slots.begin(); it != s.slots.end();) {
          bool listed = false;
          for (const auto& c : o.copies) listed = listed || slot_key(c.job, c.copy) == it->first;
          if (!listed && !it->second->worker.joinable())
            it = s.slots.erase(it);
          else
            ++it;
        }
        s.pending = static_cast<int>(o.copies.size());
        if (o.round == s.cfg.kill_at_round) {
          // Fault injection: die abruptly half way through this round.
          const double half = o.length / 2;
          std::thread([half] {
            std::this_thread::sleep_for(std::chrono::duration<double>(half));
            ::kill(::getpid(), SIGKILL);
          }).detach();
        }
        for (const auto& c : o.copies) {
          auto& slot = s.slots[slot_key(c.job, c.copy)];
          if (!slot) slot = std::make_shared<copy_slot>();
          if (slot->worker.joinable()) slot->worker.join();  // finished in an earlier round
          slot->order = c;
          slot->round = o.round;
          slot->stop = false;
          auto me = caf::actor_cast<caf::actor>(self);
          auto sched = s.scheduler;
          const auto* kinds = s.cfg.kinds;
          const double speed = s.cfg.srv.speed;
          const auto rank = s.cfg.rank;
          const auto round = o.round;
          const double length = o.length;
          copy_slot* raw = slot.get();
          comm::aggregator* agg = s.cfg.agg.get();
          slot->worker = std::thread([=] {
            run_copy_round(*raw, *kinds, speed, length, [&](std::int64_t step) {
              caf::anon_send(sched, copy_started{rank, round, raw->order.job, raw->order.copy,
                                                 step});
            }, agg);
            caf::anon_send(me, copy_done_atom::value, slot_key(raw->order.job, raw->order.copy),
                           round);
          });
        }
        if (s.pending == 0) self->send(s.scheduler, round_done{s.cfg.rank, o.round});
      },
      [=](copy_done_atom, std::int64_t key, std::int64_t round) {
        auto& s = self->state;
        auto it = s.slots.find(key);
        if (it == s.slots.end()) return;
        auto& slot = *it->second;
        if (slot.worker.joinable()) slot.worker.join();
        progress_report r;
        r.rank = s.cfg.rank;
        r.round = round;
        r.job = slot.order.job;
        r.copy = slot.order.copy;
        r.step = slot.model ? slot.model->step() : slot.order.resume_step;
        r.steps = slot.steps;
        r.busy_seconds = slot.busy_seconds;
        r.throughput = slot.ema_throughput;
        r.loss = slot.loss;
        r.error = slot.error;
        self->send(s.scheduler, r);
        if (slot.checkpointed)
          self->send(s.scheduler, checkpoint_done{s.cfg.rank, round, slot.order.job,
                                                  slot.order.copy, r.step,
                                                  slot.order.checkpoint_path});
        if (slot.finished && slot.error.empty()) {
          if (slot.order.copy == 0)  // one report per job, also when forked
            self->send(s.scheduler, job_finished{s.cfg.rank, slot.order.job, r.step, slot.loss,
                                                 slot.accuracy, slot.reached_target});
          s.slots.erase(it);
        }
        if (round == s.round && --s.pending == 0)
          self->send(s.scheduler, round_done{s.cfg.rank, round});
      },
      [=](const stop_copy& sc) {
        auto it = self->state.slots.find(slot_key(sc.job, sc.copy));
        if (it != self->state.slots.end()) it->second->stop = true;
      },
      [=](shutdown_atom, std::int32_t code) {
        for (auto& [key, slot] : self->state.slots) slot->stop = true;
        if (code == 0)
          self->quit();
        else
          self->quit(make_run_error(run_errc::bad_job,
                                    "the scheduler ended the run with exit code " +
                                        std::to_string(code)));
      },
  };
}

}  // namespace tessera::actors
