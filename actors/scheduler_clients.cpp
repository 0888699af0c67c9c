// The scheduler's jobs and clients (actors/scheduler_parts.hpp): adding jobs (their job
// actors, entries and arrivals), their snapshots and what a served cluster journals of them,
// and what clients in the scheduler's process ask: submit, cancel, stop.
#include <algorithm>
#include <iostream>
#include <set>

#include "actors/scheduler_parts.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera::actors::sched {

namespace {

/// Writes to the journal what changed between a job's snapshots: its state, a cancel, a newer
/// confirmed checkpoint (a program's step, which has no file of ours); `at` is cluster time.
void journal_changes(scheduler_state& st, const job_snapshot& was, const job_snapshot& now,
                     double at) {
  auto& log = *st.cfg.log;
  if (now.life != was.life) {
    const auto ended = history_of(now.status);
    log.state_changed(now.id, now.life, now.step, st.round, at,
                      is_final(now.life) ? &ended : nullptr);
  }
  if (now.status.state == "cancelling" && was.status.state != "cancelling")
    log.cancel_requested(now.id);
  const auto* newer = now.book.resume();
  const auto* older = was.book.resume();
  if (newer && (!older || newer->path != older->path))
    log.checkpointed(now.id, *newer, at);
  else if (!newer && now.step != was.step)
    log.checkpointed(now.id, {"", st.round, now.step}, at);
}

/// Why a client's job cannot be accepted ("" when it can): the scheduler's own checks, for
/// clients that did not read it through runtime/core/job_file.hpp.
std::string job_refusal(const scheduler_config& cfg, const run_job& rj) {
  if (!rj.is_program() &&
      std::find(cfg.known_kinds.begin(), cfg.known_kinds.end(), rj.kind) == cfg.known_kinds.end())
    return "unknown job kind '" + rj.kind + "'";
  // The job-file bound (runtime/core/input_limits.hpp) also keeps total_steps exact through the
  // double the job spec holds and back to int64 (summarise, dispatch).
  if (!(rj.spec.total_steps > 0) || rj.spec.total_steps > limits::max_total_steps ||
      rj.spec.scale_factor < 1 || !(rj.step_time > 0))
    return "a job needs total_steps in (0, 1e11], scale_factor >= 1 and step_time > 0";
  // As `tessera run` checks its job file: a gang needs a GPU type with its K GPUs, unless
  // the policy stacks tasks (hare).
  if (cfg.pol && !cfg.pol->stacks_tasks() &&
      std::none_of(cfg.cl.types.begin(), cfg.cl.types.end(),
                   [&](const gpu_type& t) { return t.gpus >= rj.spec.scale_factor; }))
    return "scale_factor " + std::to_string(rj.spec.scale_factor) +
           ": no GPU type of the cluster has that many GPUs, so policy " + cfg.pol->name() +
           " cannot place it";
  return "";
}

/// Adds accepted jobs; their ids.
std::vector<std::int64_t> add_jobs(self_ptr self, const std::vector<run_job>& jobs) {
  std::vector<std::int64_t> ids;
  for (const auto& rj : jobs) {
    add_job(self, rj);
    ids.push_back(rj.spec.id);
  }
  return ids;
}

}  // namespace

job_entry* find_job(scheduler_state& st, std::int64_t id) {
  auto it = st.by_id.find(id);
  return it == st.by_id.end() ? nullptr : it->second;
}

/// The job whose actor sent the current message, or null (dropped, counted): only job actors
/// tell the scheduler about jobs.
job_entry* job_sender(self_ptr self) {
  auto& st = self->state;
  ++st.messages;
  auto it = st.by_job_actor.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  if (it != st.by_job_actor.end()) return it->second;
  ++st.dropped;
  return nullptr;
}

/// Keeps a job's latest snapshot; a job that ended changes the job set. What changed goes to
/// a served cluster's journal (not for a job's first snapshot: its submission says it).
void take_snapshot(self_ptr self, job_entry& e, job_snapshot&& snap, bool journal) {
  auto& st = self->state;
  if (!e.ended() && is_final(snap.life)) {
    ++st.job_set_version;
    ++st.ended_jobs;
  }
  if (journal && st.cfg.log) journal_changes(st, e.latest, snap, elapsed(self));
  e.latest = std::move(snap);
}

/// Adds a job: its job actor (which owns it from now on), its entry and its place in the
/// arrival queue.
void add_job(self_ptr self, const run_job& rj, const restored_job* restored) {
  auto& st = self->state;
  st.jobs.emplace_back();
  auto& e = st.jobs.back();
  e.spec = rj;
  st.rates->add(e.spec);  // may rename its job type: the job actor gets the key
  job_config jc;
  jc.spec = e.spec;
  for (const auto& sv : st.cfg.cl.servers) jc.rank_types.push_back(sv.gpu_type);
  jc.round_length = st.cfg.round_length;
  jc.checkpoint_dir = st.cfg.checkpoint_dir;
  jc.epoch_base = st.cfg.epoch_base;
  if (restored) jc.restored = *restored;
  jc.pinned = st.ckpts.pinned;
  take_snapshot(self, e, snapshot_of(make_job_data(jc)), false);
  e.handle = caf::actor_cast<job_scheduler_api>(
      self->spawn(job_actor, std::move(jc), caf::actor_cast<caf::actor>(self)));
  st.by_id[rj.spec.id] = &e;
  st.by_job_actor[e.handle.address()] = &e;
  st.arrivals.push(&e.spec.spec);
}

/// A client's new jobs: checked, given ids, queued for admission; all or none.
caf::result<std::vector<std::int64_t>> submit(self_ptr self, const submit_job& sj) {
  auto& s = self->state;
  ++s.messages;
  if (!local_sender(self)) {
    ++s.dropped;
    return make_run_error(run_errc::unauthenticated, "submit_job from a remote actor");
  }
  std::int64_t next = 0;
  for (const auto& j : s.jobs) next = std::max<std::int64_t>(next, j.spec.spec.id + 1);
  std::set<std::int64_t> taken;  // ids given in this batch, and those of unsynced batches
  for (const auto& rj : sj.jobs)
    if (rj.id_given) taken.insert(rj.spec.id);
  std::set<std::int64_t> waiting;
  for (const auto& [t, batch] : s.unsynced)
    for (const auto& rj : batch.first) waiting.insert(rj.spec.id);
  const std::size_t open = s.jobs.size() - s.ended_jobs + waiting.size();
  if (open + sj.jobs.size() > s.cfg.max_open_jobs)
    return make_run_error(run_errc::too_many,
                          "the cluster holds " + std::to_string(open) +
                              " jobs not ended, at most " + std::to_string(s.cfg.max_open_jobs) +
                              " (--max-open-jobs): submit again once some have ended");
  taken.insert(waiting.begin(), waiting.end());
  std::vector<run_job> accepted;
  for (std::size_t i = 0; i < sj.jobs.size(); ++i) {
    run_job rj = sj.jobs[i];
    const std::string which = "job[" + std::to_string(i) + "]: ";
    if (auto why = job_refusal(s.cfg, rj); !why.empty())
      return make_run_error(run_errc::bad_job, which + why);
    if (rj.id_given && (find_job(s, rj.spec.id) || waiting.count(rj.spec.id)))
      return make_run_error(run_errc::bad_job,
                            which + "job id " + std::to_string(rj.spec.id) + " is taken");
    if (!rj.id_given) {
      next = free_job_id(next, [&](std::int64_t id) { return find_job(s, id) || taken.count(id); });
      if (next < 0) return make_run_error(run_errc::bad_job, which + "no job id is free");
      rj.spec.id = next;
      taken.insert(next++);
    }
    // Arrivals are in cluster time; before the start, from the start (a resume's clock).
    rj.spec.arrival += s.run_started ? elapsed(self) : s.cfg.clock_base;
    rj.id_given = true;
    accepted.push_back(std::move(rj));
  }
  if (!s.cfg.log) {
    auto ids = add_jobs(self, accepted);
    self->send(self, arrival_atom::value);  // an idle cluster starts a round now
    return ids;
  }
  // Durable before acknowledged: the jobs join once their record is on disk (on_synced).
  auto promise = self->make_response_promise<std::vector<std::int64_t>>();
  const auto ticket = s.next_ticket++;
  s.unsynced.emplace(ticket, std::make_pair(accepted, promise));
  s.cfg.log->submitted(accepted, [relay = s.journal_relay, ticket](std::string err) {
    caf::anon_send(relay, journal_ack_atom::value, ticket, std::move(err));
  });
  return promise;
}

/// A submission's journal record is on disk (or failed: `err`): its jobs join, its client
/// gets their ids (or the error).
void on_synced(self_ptr self, std::uint64_t ticket, const std::string& err) {
  auto& s = self->state;
  if (!local_sender(self)) return;
  auto it = s.unsynced.find(ticket);
  if (it == s.unsynced.end()) return;
  auto [jobs, promise] = std::move(it->second);
  s.unsynced.erase(it);
  if (!err.empty()) {
    promise.deliver(make_run_error(run_errc::unavailable, "the journal did not take it: " + err));
    return;
  }
  promise.deliver(add_jobs(self, jobs));
  self->send(self, arrival_atom::value);
}

/// A client's cancel, delegated to the job's actor (which answers): a job not running now is
/// cancelled at once; a running one finishes its round (and checkpoint) and is cancelled at
/// the boundary.
caf::result<cancel_outcome> cancel(self_ptr self, std::int64_t id) {
  auto& s = self->state;
  ++s.messages;
  if (!local_sender(self)) {
    ++s.dropped;
    return make_run_error(run_errc::unauthenticated, "cancel_job from a remote actor");
  }
  auto* e = find_job(s, id);
  if (!e) return cancel_outcome::unknown;
  if (e->ended()) return cancel_outcome::ended;
  self->delegate(e->handle, cancel_job{id});
  return caf::delegated<cancel_outcome>{};
}

/// A client asks the cluster to stop: now when no round is in flight, else at its end.
bool stop(self_ptr self) {
  auto& s = self->state;
  if (!local_sender(self)) {
    ++s.dropped;
    return false;
  }
  s.stopping = true;
  if (!s.run_started || s.pending.empty()) finish(self, true, "stopped by request");
  return true;
}

}  // namespace tessera::actors::sched
