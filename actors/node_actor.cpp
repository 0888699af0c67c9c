#include "actors/node_actor.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include <unistd.h>

#include "actors/admission.hpp"
#include "actors/program_round.hpp"
#include "runtime/node/gpu/devices.hpp"
#include "runtime/node/train/checkpoint.hpp"

namespace tessera::actors {

namespace {

/// Heartbeat timer tick.
using hb_tick_atom = caf::atom_constant<caf::atom("hbtick")>;

using self_ptr = caf::stateful_actor<node_state>*;

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

}  // namespace

node_state::~node_state() {
  for (auto& [key, slot] : slots) {
    slot->stop = true;
    slot->abort = true;
    if (slot->worker.joinable()) slot->worker.join();
  }
  for (auto& [t, done] : releasing) t.join();
}

namespace {

/// Ends the node with a run error of `code` and `text`, stopping its copies.
void fail(self_ptr self, run_errc code, const std::string& text) {
  for (auto& [key, slot] : self->state.slots) slot->stop = slot->abort = true;
  self->quit(
      make_run_error(code, "node rank " + std::to_string(self->state.cfg.rank) + " " + text));
}

/// The hello this node sends, with its proof over the exchange's nonces.
node_hello make_hello(const node_config& cfg, const nonce_pair& n) {
  node_hello hello;
  hello.version = cfg.version;
  hello.rank = cfg.rank;
  hello.name = cfg.srv.name;
  hello.gpu_type = cfg.srv.gpu_type;
  hello.gpus = cfg.srv.gpus;
  hello.speed = cfg.srv.speed;
  hello.host = cfg.host;
  hello.pid = static_cast<std::int32_t>(::getpid());
  hello.proof = proof_of(cfg.secret, hello_proof_parts(hello, n));
  return hello;
}

caf::behavior serving(self_ptr self);

/// Sends the hello once the scheduler proved the secret; serving once welcomed.
void send_hello(self_ptr self, const nonce_pair& n) {
  const auto& cfg = self->state.cfg;
  self->request(self->state.scheduler, seconds(cfg.register_timeout), make_hello(cfg, n))
      .then(
          [=](const node_welcome& w) {
            self->state.registered = true;
            self->state.heartbeat_interval = w.heartbeat_interval;
            if (const auto& hook = self->state.cfg.hooks.on_registered)
              hook(self, caf::actor_cast<caf::actor>(self->state.scheduler));
            self->send(self, hb_tick_atom::value);
            self->become(serving(self));
          },
          [=](caf::error& e) {
            fail(self, run_errc::protocol_mismatch,
                 "was refused by the scheduler: " + describe(self->system(), e));
          });
}

/// Asks the scheduler for its challenge, then sends the hello. On a busy host the exchange's
/// first request can go unanswered (seen at load 40 with 64 nodes: one request timed out while
/// 63 nodes registered in under a second), so a request unanswered within 5 s is sent again,
/// with a fresh nonce, until `until`; a refusal or any other error ends the node at once.
void ask_challenge(self_ptr self, caf::actor_clock::time_point until) {
  auto nonce = random_bytes(nonce_bytes);
  if (!nonce) return fail(self, run_errc::unauthenticated, nonce.err().message);
  const auto left = std::chrono::duration_cast<caf::timespan>(until - self->clock().now());
  const auto wait = std::max(caf::timespan{0}, std::min<caf::timespan>(left, seconds(5)));
  self->request(self->state.scheduler, wait, auth_request{*nonce})
      .then(
          [=](const auth_challenge& c) {
            const nonce_pair n{*nonce, c.nonce};
            if (!same_proof(c.proof, proof_of(self->state.cfg.secret, scheduler_proof_parts(n))) &&
                !self->state.cfg.hooks.skip_scheduler_check)
              return fail(self, run_errc::unauthenticated,
                          "refuses the scheduler: it did not prove the cluster secret");
            if (const auto& hook = self->state.cfg.hooks.before_hello) hook();
            send_hello(self, n);
          },
          [=](caf::error& e) {
            if (e == caf::sec::request_timeout && self->clock().now() < until) {
              std::cerr << "tessera: node rank " << self->state.cfg.rank
                        << ": no answer to its registration within 5 s; asking again\n";
              return ask_challenge(self, until);
            }
            fail(self, run_errc::unauthenticated,
                 "could not open its registration: " + describe(self->system(), e));
          });
}

/// Registering: the auth exchange (actors/auth.hpp), then the hello.
caf::behavior registering(self_ptr self) {
  ask_challenge(self, self->clock().now() + seconds(self->state.cfg.register_timeout));
  return {
      [=](shutdown_atom, std::int32_t) { self->quit(); },
      [=](leave_atom) { self->quit(); },
  };
}

/// Starts the worker thread of one copy of round `o`: a built-in trainable's executor, or a
/// user's program's (kind "program") on the copy's devices (slot.devices). Throttled by the
/// server's speed factor only on a node without real GPUs.
void start_worker(self_ptr self, copy_slot& slot, const round_orders& o) {
  auto& s = self->state;
  auto me = caf::actor_cast<caf::actor>(self);
  auto sched = s.scheduler;
  const auto* kinds = s.cfg.kinds;
  const std::optional<double> speed =
      s.cfg.gpus.real() ? std::nullopt : std::optional<double>(s.cfg.srv.speed);
  const auto rank = s.cfg.rank;
  const auto round = o.round;
  const double length = o.length;
  copy_slot* raw = &slot;
  comm::aggregator* agg = s.cfg.agg.get();
  const copy_hooks* hooks = &s.cfg.hooks.copy;  // the state outlives its workers
  program_context pc;
  pc.leases = s.cfg.leases.get();
  pc.speed = speed.value_or(1.0);
  pc.rank = rank;
  pc.devices = slot.devices;
  pc.node_visible = s.cfg.gpus.visible;
  slot.worker = std::thread([=] {
    auto started = [&](std::int64_t step) {
      // As the node actor (reports are attributed to their sender): to the scheduler, which
      // waits for every start (first: the round's dispatch latency), and to the job's actor,
      // which keeps its checkpoint book.
      const copy_started c{round,
                           raw->order.job,
                           raw->order.copy,
                           step,
                           static_cast<std::int32_t>(raw->source),
                           raw->bad_files,
                           raw->source_why};
      caf::send_as(me, sched, c);
      caf::send_as(me, caf::actor_cast<job_node_api>(raw->order.job_actor), c);
    };
    if (raw->order.is_program())
      run_program_round(*raw, pc, length, started, agg);
    else
      run_copy_round(*raw, *kinds, speed, length, started, agg, rank, *hooks);
    caf::anon_send(me, copy_done_atom::value, raw->order.job, raw->order.copy, round);
  });
}

/// The device indices of the round's copies, in order (each holds its order's `gpus`, the two
/// copies of a pair the same ones: gpu::assign_devices); an
/// error when they ask for more than the node's GPUs (a plan the scheduler's validation
/// should have refused). The same on a node without real GPUs, whose indices are not used.
result<std::vector<std::vector<int>>> round_devices(const node_config& cfg, const round_orders& o) {
  std::vector<std::int32_t> want;
  std::vector<int> partner(o.copies.size(), -1);  // a pair: the other copy's index
  for (std::size_t i = 0; i < o.copies.size(); ++i) {
    want.push_back(o.copies[i].gpus);
    for (std::size_t k = 0; k < o.copies.size() && o.copies[i].partner >= 0; ++k)
      if (o.copies[k].job == o.copies[i].partner) partner[i] = static_cast<int>(k);
  }
  auto d = gpu::assign_devices(want, partner, cfg.srv.gpus);
  if (!d) return error{d.err().kind, "round " + std::to_string(o.round) + ": " + d.err().message};
  return d;
}

/// Ends a copy's round before it starts, failed with `why`: reported as a lost round (the
/// job resumes from its checkpoint), without a worker.
void fail_unstarted(self_ptr self, copy_slot& slot, const std::string& why) {
  slot.error = why;
  slot.retry = true;
  slot.steps = 0;
  slot.finished = slot.checkpointed = false;
  slot.checkpoint_error.clear();
  slot.end_step = slot.order.resume_step;
  slot.model.reset();
  self->send(self, copy_done_atom::value, slot.order.job, slot.order.copy, slot.round);
}

/// Lets go of parked programs (`warm`: each told `exit`, reaped) on a thread of its own, which
/// calls `then` when they are gone.
void release_warm(node_state& s, std::vector<std::shared_ptr<warm_program>> warm,
                  std::function<void()> then = {}) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  s.releasing.emplace_back(std::thread([w = std::move(warm), done, then]() mutable {
                             w.clear();
                             *done = true;
                             if (then) then();
                           }),
                           done);
}

/// Joins the release threads that are done.
void join_released(node_state& s) {
  for (auto it = s.releasing.begin(); it != s.releasing.end();) {
    if (!*it->second) {
      ++it;
      continue;
    }
    it->first.join();
    it = s.releasing.erase(it);
  }
}

/// Before a round's orders `o` go out to any node (settle_atom): the processes parked here
/// with state newer than their checkpoint that `o` does not continue are told `exit` (they
/// checkpoint, then exit), and the scheduler hears `settled` once they are gone; so a copy
/// that moves starts elsewhere from its latest state, not an older checkpoint.
void settle(self_ptr self, const round_orders& o) {
  auto& s = self->state;
  const auto devices = round_devices(s.cfg, o);
  std::vector<std::shared_ptr<warm_program>> go;
  for (auto& [id, slot] : s.slots) {
    if (slot->worker.joinable() || !warm_unsaved(*slot)) continue;
    bool kept = false;
    for (std::size_t i = 0; i < o.copies.size() && devices; ++i)
      if (o.copies[i].id() == id)
        kept = warm_continues(*slot, o.copies[i],
                              s.cfg.gpus.real() ? (*devices)[i] : std::vector<int>{});
    if (!kept) go.push_back(std::move(slot->warm));
  }
  const auto sched = s.scheduler;
  const auto round = o.round;
  if (go.empty()) return self->send(sched, settled_atom::value, round);
  auto me = caf::actor_cast<caf::actor>(self);
  release_warm(s, std::move(go),
               [me, sched, round] { caf::send_as(me, sched, settled_atom::value, round); });
}

/// Processes parked here with state newer than their checkpoint (round_done::unsaved).
std::int32_t unsaved_slots(const node_state& s) {
  std::int32_t n = 0;
  for (const auto& [id, slot] : s.slots) n += !slot->worker.joinable() && warm_unsaved(*slot);
  return n;
}

/// Starts the copies of a round's orders, each on its worker thread; copies the orders do
/// not list are dropped (their state is checkpointed).
void run_orders(self_ptr self, const round_orders& o) {
  auto& s = self->state;
  s.round = o.round;
  // Copies not continued this round are dropped (their state is checkpointed); programs
  // parked on a warm lease for them are let go on a thread of their own.
  for (auto it = s.slots.begin(); it != s.slots.end();) {
    bool listed = false;
    for (const auto& c : o.copies) listed = listed || c.id() == it->first;
    if (!listed && !it->second->worker.joinable()) {
      if (auto warm = std::move(it->second->warm)) release_warm(s, {std::move(warm)});
      it = s.slots.erase(it);
    } else {
      ++it;
    }
  }
  join_released(s);
  s.pending = static_cast<int>(o.copies.size());
  if (s.cfg.hooks.on_round_start) s.cfg.hooks.on_round_start(o.round, o.length);
  const auto devices = round_devices(s.cfg, o);
  for (std::size_t i = 0; i < o.copies.size(); ++i) {
    const auto& c = o.copies[i];
    auto& slot = s.slots[c.id()];
    if (!slot) slot = std::make_shared<copy_slot>();
    if (slot->worker.joinable()) slot->worker.join();  // finished in an earlier round
    slot->order = c;
    slot->round = o.round;
    slot->stop = false;
    if (!devices) {
      fail_unstarted(self, *slot, devices.err().message);
      continue;
    }
    slot->devices = s.cfg.gpus.real() ? (*devices)[i] : std::vector<int>{};
    start_worker(self, *slot, o);
  }
  if (s.pending == 0) self->send(s.scheduler, round_done{o.round, unsaved_slots(s)});
}

/// Reports a copy whose round is over to its job's actor: progress, checkpoint, completion;
/// then the node's round_done to the scheduler when it was the round's last copy. The
/// scheduler asks the job actors for their views only after every round_done, so sending the
/// reports first puts them in the job's mailbox ahead of that request.
void report_copy(self_ptr self, std::int64_t job, std::int32_t copy, std::int64_t round) {
  auto& s = self->state;
  auto it = s.slots.find(copy_id{job, copy});
  if (it == s.slots.end()) return;
  auto& slot = *it->second;
  if (slot.worker.joinable()) slot.worker.join();
  progress_report r;
  r.round = round;
  r.job = slot.order.job;
  r.copy = slot.order.copy;
  r.step = slot.end_step;
  r.steps = slot.steps;
  r.busy_seconds = slot.busy_seconds;
  r.throughput = slot.ema_throughput;
  r.loss = slot.loss;
  r.error = slot.error;
  r.retry = slot.retry;
  r.task_times = slot.order.task_times;
  r.checkpoint_error = slot.checkpoint_error;
  r.program_failed = slot.program_failed;
  r.startup_seconds = slot.startup_seconds;
  const auto job_actor = caf::actor_cast<job_node_api>(slot.order.job_actor);
  self->send(job_actor, r);
  if (slot.checkpointed)
    self->send(job_actor, checkpoint_done{round, slot.order.job, slot.order.copy, r.step,
                                          slot.order.checkpoint_path});
  // A job is finished once its final state is on disk.
  if (slot.finished && slot.error.empty() && slot.checkpoint_error.empty()) {
    // One report per job, also when forked or spread over nodes.
    if (slot.order.copy == 0 && leads_copy(slot.order, s.cfg.rank))
      self->send(job_actor, job_finished{slot.order.job, r.step, slot.loss, slot.accuracy,
                                         slot.reached_target});
    s.slots.erase(it);
  }
  if (round == s.round && --s.pending == 0)
    self->send(s.scheduler, round_done{round, unsaved_slots(s)});
}

/// What the scheduler and the job actors send a node: rounds, stops, its fence, the end.
node_api::behavior_type from_cluster(self_ptr self) {
  return {
      [=](const round_orders& o) { run_orders(self, o); },
      [=](settle_atom, const round_orders& o) { settle(self, o); },
      [=](const stop_copy& sc) {
        auto it = self->state.slots.find(sc.id());
        if (it != self->state.slots.end()) it->second->stop = true;
      },
      [=](fenced_atom, const std::string& why) {
        fail(self, run_errc::fenced, "was fenced by the scheduler (" + why + ")");
      },
      [=](shutdown_atom, std::int32_t code) {
        for (auto& [key, slot] : self->state.slots) slot->stop = true;
        if (code == 0)
          self->quit();
        else
          self->quit(
              make_run_error(run_errc::bad_job,
                             "the scheduler ended the run with exit code " + std::to_string(code)));
      },
  };
}

/// Serving: heartbeats and rounds until the scheduler ends the run (or fences the node).
caf::behavior serving(self_ptr self) {
  return caf::message_handler{
      [=](hb_tick_atom) {
        auto& s = self->state;
        self->send(s.scheduler, heartbeat{s.heartbeat_seq++});
        self->delayed_send(self, seconds(s.heartbeat_interval), hb_tick_atom::value);
      },
      [=](copy_done_atom, std::int64_t job, std::int32_t copy, std::int64_t round) {
        report_copy(self, job, copy, round);
      },
      [=](leave_atom) { self->send(self->state.scheduler, leave_atom::value); },
  }
      .or_else(handlers_of(from_cluster(self)));
}

}  // namespace

caf::behavior node_actor(caf::stateful_actor<node_state>* self, node_config cfg,
                         caf::actor scheduler) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.scheduler = caf::actor_cast<scheduler_node_api>(scheduler);
  self->monitor(scheduler);
  self->set_down_handler([=](caf::down_msg& d) {
    if (d.source != self->state.scheduler.address()) return;
    fail(self, run_errc::unknown_node, "lost the scheduler: " + describe(self->system(), d.reason));
  });
  return registering(self);
}

}  // namespace tessera::actors
