// The run's end (actors/scheduler_parts.hpp): the `ending` behaviour collects every job
// actor's summary (a job that does not answer in time ends with its last known state), then
// shuts the live nodes down, sends the run summary to the listener and quits. It carries what
// it collects; nothing else of the scheduler's phases runs after `finish`.
#include <iostream>
#include <map>
#include <memory>

#include "actors/scheduler_parts.hpp"
#include "actors/status_views.hpp"

namespace tessera::actors::sched {

namespace {

/// What the end collects: the summary, its jobs filled in as their actors answer.
struct run_end {
  run_summary sum;                ///< the run's summary
  std::vector<job_final> finals;  ///< in job-set order
  std::vector<bool> answered;     ///< per job: its final is in (or stood in for)
  std::size_t left = 0;           ///< answers missing
};
using end_ptr = std::shared_ptr<run_end>;

/// A job's end as far as the scheduler knows it (its latest snapshot), for a job actor that
/// did not answer.
job_final final_from(const job_entry& e) {
  job_final f;
  f.summary = e.latest.status.summary;
  f.book = e.latest.book;
  return f;
}

/// Ends the run once every job's summary is in: shuts the live nodes down, sends the
/// summary, quits.
void complete_end(self_ptr self, run_end& end) {
  auto& st = self->state;
  auto& sum = end.sum;
  std::string failed;
  for (const auto& f : end.finals)
    if (f.summary.failed) failed += (failed.empty() ? "" : ", ") + std::to_string(f.summary.id);
  // A served cluster's jobs fail alone: stopping it is a success whatever they did.
  if (sum.ok && !failed.empty() && !st.stopping) {
    sum.ok = false;
    sum.error = "job(s) " + failed + " failed (see each job's failure)";
  }
  std::int64_t refused_reports = 0;
  std::map<std::int64_t, const checkpoint_book*> books;
  for (const auto& f : end.finals) {
    sum.jobs.push_back(f.summary);
    sum.checkpoint_fallbacks += f.summary.checkpoint_fallbacks;
    sum.restarts_from_scratch += f.summary.restarts_from_scratch;
    refused_reports += f.dropped;
    books[f.summary.id] = &f.book;
  }
  sum.messages = st.messages;
  sum.dropped = st.dropped + refused_reports;
  sum.checkpoint_pauses = st.ckpts.health.pauses();
  before_round(st.ckpts, st.round, books, std::cerr);  // last strays
  // A failed program is the job's failure, not the run's: the nodes end normally.
  const std::int32_t code = sum.ok || !failed.empty() ? 0 : 1;
  for (auto& n : st.nodes)
    if (n.alive) self->send(n.handle, shutdown_atom::value, code);
  if (st.listener) self->send(st.listener, std::move(sum));
  self->quit();
}

/// Job `i`'s summary is in; the run ends with the last one.
void take_final(self_ptr self, const end_ptr& end, std::size_t i, job_final&& f) {
  if (end->answered[i]) return;
  end->answered[i] = true;
  end->finals[i] = std::move(f);
  if (--end->left == 0) complete_end(self, *end);
}

/// Job `i` gave no summary (`why`): its last known state stands in.
void final_missing(self_ptr self, const end_ptr& end, std::size_t i, const std::string& why) {
  const auto& e = self->state.jobs[i];
  if (end->answered[i]) return;
  std::cerr << "tessera: job " << e.spec.spec.id << " did not give its summary (" << why
            << "); its last known state is used\n";
  take_final(self, end, i, final_from(e));
}

/// After the end, what no handler takes is set aside: the nodes still send heartbeats and
/// reports until they are shut down, and the scheduler's own timers of the phases before
/// still fire. Requests among them are answered with an error; nothing is counted as dropped.
caf::result<caf::message> after_end(caf::scheduled_actor* self, caf::message_view&) {
  if (self->current_message_id().is_request()) return caf::make_error(caf::sec::unexpected_message);
  return caf::make_message();
}

/// The run's end: the job summaries' time-out, what jobs still tell (a cancel taking effect
/// at the boundary is journaled), journal acknowledgements of submissions in flight, and
/// clients' queries.
caf::behavior ending(self_ptr self, end_ptr end) {
  return {
      [=](finals_due_atom) {
        for (std::size_t i = 0; i < end->answered.size(); ++i)
          if (!end->answered[i]) final_missing(self, end, i, "no answer within the job time-out");
      },
      [=](job_snapshot& snap) {
        if (auto* e = job_sender(self)) take_snapshot(self, *e, std::move(snap));
      },
      [=](view_atom, std::uint64_t, job_snapshot& snap) {  // a view the round start outlived
        if (auto* e = job_sender(self)) take_snapshot(self, *e, std::move(snap));
      },
      [=](summary_atom, std::uint64_t i, job_final& f) {
        // Only job i's own actor answers for it.
        if (i < end->answered.size() && job_sender(self) == &self->state.jobs[i])
          take_final(self, end, i, std::move(f));
      },
      [=](journal_ack_atom, std::uint64_t ticket, const std::string& err) {
        on_synced(self, ticket, err);
      },
      [=](jobs_atom, std::int64_t id, bool placements) {
        return job_statuses(client_view_of(self->state), id, placements);
      },
      [=](job_page_atom, std::int64_t after, std::int32_t count, const std::string& state) {
        return job_page(client_view_of(self->state), after, count, state);
      },
      [=](nodes_atom) { return node_statuses(client_view_of(self->state), self->clock().now()); },
      [=](rounds_atom, std::int32_t limit) {
        return round_statuses(client_view_of(self->state), limit);
      },
      [=](cluster_atom) { return cluster_of(client_view_of(self->state), elapsed(self)); },
  };
}

}  // namespace

void finish(self_ptr self, bool ok, std::string why, bool at_boundary) {
  auto& st = self->state;
  auto end = std::make_shared<run_end>();
  auto& sum = end->sum;
  sum.ok = ok;
  sum.error = std::move(why);
  sum.rounds = st.round + 1;
  sum.seconds = elapsed(self);
  sum.failed_ranks = st.failed_ranks;
  sum.dispatch_latency = st.dispatch_latency;
  sum.plan_seconds = st.plan_seconds;
  sum.round_records = st.round_records;
  sum.refused = st.refused;
  sum.joins = st.joins;
  sum.registration_seconds = st.registration_seconds;
  sum.stalled_seconds = st.stalled;
  st.starting.open = false;  // a view still on its way changes nothing
  self->set_default_handler(after_end);
  self->set_down_handler([](caf::down_msg&) {});  // nodes going away now are not lost
  self->become(ending(self, end));
  end->finals.resize(st.jobs.size());
  end->answered.assign(st.jobs.size(), false);
  end->left = st.jobs.size();
  if (end->left == 0) return complete_end(self, *end);
  // Messages, not requests (actors/job_actor.hpp: CAF's pending responses cost quadratic time
  // at thousands of jobs), and one timer for every answer (finals_due_atom): a timeout per
  // request costs a clock entry each.
  std::uint64_t i = 0;
  for (auto& e : st.jobs) self->send(e.handle, summary_atom::value, at_boundary, i++);
  self->delayed_send(self, seconds(st.cfg.job_timeout), finals_due_atom::value);
}

}  // namespace tessera::actors::sched
