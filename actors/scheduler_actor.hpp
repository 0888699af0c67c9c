#pragma once
/// @file scheduler_actor.hpp
/// The scheduler actor: registers the nodes, then runs rounds on a timer. Each round goes
/// through the shared round loop (runtime/core/round_loop.hpp: admission, the policy's snapshot,
/// plan validation, exactly as in the simulator), then actors/dispatch.hpp turns the plan
/// into each live node's round_orders.
///
/// Its life is a sequence of named states, each a behaviour switched with `become`:
///   registering  until every node of the cluster file has registered (or the time-out);
///   starting     the round's start: the active job actors' views are being collected;
///   running      a round's orders are out and its time is not up;
///   draining     its time is up; waiting for the nodes' reports, then the next round;
///   idle         no active job; waiting for the next arrival.
/// The run ends (job summaries collected, summary sent, nodes shut down, actor gone) from any
/// state: every job finished (not when serving: a served cluster waits for submissions), a
/// stop request (at the next round boundary), a policy error, every node lost, a refused node
/// or the run's time-out.
///
/// Jobs are owned by job actors (actors/job_actor.hpp), one per job, spawned here when a job
/// is added: each keeps its job's life (actors/job_life.hpp's state machine), copies,
/// checkpoint book, restarts and measured rates, and takes its copies' reports from the nodes
/// directly (start_copy::job_actor). At a round's start the scheduler asks every active job
/// for its view (a job that does not answer within `job_timeout` is left out of the round,
/// logged), plans with plan_round exactly as before, then tells each job its assignment and
/// each node its orders. It keeps every job's latest job_snapshot (sent with each view and
/// whenever the job's state changes) to plan, dispatch and answer clients without asking the
/// jobs; it hears from them which copies started (dispatch latency), measured rates
/// (run_rates) and failed checkpoint writes (the directory's health); it tells them when a
/// node of their round is lost, and collects their summaries at the end. A copy's steps never
/// pass through an actor: its parts synchronise through the nodes' aggregators
/// (actors/copy_round.hpp). Clients in the scheduler's process (the control API) submit,
/// cancel (forwarded to the job), stop and query it (actors/protocol.hpp, "clients");
/// actors/status_views.hpp builds their answers. Time is read from the actor system's clock,
/// so tests drive it with CAF's test coordinator.
///
/// Trust (actors/auth.hpp, actors/protocol.hpp): a node registers by proving the cluster
/// secret; a registration without a valid proof, or for a rank a live node holds, is refused
/// and logged without ending the run. After registration each message is attributed to the
/// actor that sent it (`by_addr`), never to a rank it claims; messages from other actors are
/// dropped and counted, and a node declared lost is fenced: it is told so once and its later
/// reports are refused. A lost or new node may register again while the run goes on (a
/// join) and gets work from the next round; a node that asks to leave (leave_atom) finishes
/// its round and is shut down with exit code 0.
///
/// Failures: a node is lost when its actor goes down (its process died or its connection
/// timed out; CAF's heartbeats and connection timeout are configured by the launcher), when it
/// sends no heartbeat for `heartbeat_timeout`, or when it does not report a round within the
/// round's length plus `report_grace`. Its copies' progress of the current round is lost; they
/// are planned again from their last checkpoint (the previous round boundary) on the nodes
/// left, so no job is lost and at most one round of progress is. Its jobs are fenced, so if it
/// was only stalled its late checkpoint writes are refused.
///
/// Checkpoints (actors/checkpoints.hpp): a job resumes from the newest checkpoint the scheduler
/// confirmed and falls back to the one before (or step 0) when a node finds it unusable; a
/// checkpoint directory that does not take writes pauses every job until a probe succeeds.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/admission.hpp"
#include "actors/auth.hpp"
#include "actors/checkpoints.hpp"
#include "actors/cluster_journal.hpp"
#include "actors/job_actor.hpp"
#include "actors/protocol.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/job_file.hpp"
#include "actors/job_life.hpp"
#include "runtime/core/records.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "actors/run_rates.hpp"

namespace tessera::actors {

/// Hooks into the scheduler for tests (fault injection); a production run leaves them empty.
struct scheduler_hooks {
  /// Asked when the scheduler probes the checkpoint directory after `round`: a non-zero errno
  /// fails the probe as the system would (a full or read-only directory).
  std::function<int(std::int64_t round)> checkpoint_probe_errno;
};

/// Settings of the scheduler, passed down from the launcher.
struct scheduler_config {
  cluster cl;                               ///< the configured cluster; rank = server index
  std::vector<run_job> jobs;                ///< the job set
  std::shared_ptr<policy> pol;              ///< the policy (from the registry)
  /// Co-location ratios of the live rate model (run_rates); null: no job pairs.
  std::shared_ptr<const throughput_table> colocation;
  std::vector<std::string> known_kinds;     ///< trainable kinds every node can build
  double round_length = 1.0;                ///< seconds per round
  std::string checkpoint_dir;               ///< shared directory for job checkpoints
  double register_timeout = 20;             ///< seconds for every node to register
  double heartbeat_interval = 0.5;          ///< seconds between node heartbeats
  double heartbeat_timeout = 5;             ///< a node silent this long is lost
  double report_grace = 10;                 ///< seconds past a round's length to report
  double max_seconds = 0;                   ///< give up after this long (0 = no limit)
  bool verbose = false;                     ///< one line per round on stderr
  /// A cluster that stays up (`tessera serve`): no end when no job is left; it ends on a
  /// stop request (stop_atom) after the round in flight.
  bool serve = false;
  /// A served cluster's journal (actors/cluster_journal.hpp): submissions are acknowledged
  /// once on disk, state changes, cancels and checkpoints are recorded. Null: none.
  std::shared_ptr<cluster_journal> log;
  /// Jobs a resume brings back from the journal (with their states and checkpoints).
  std::vector<restored_job> restored;
  std::int64_t first_round = 0;  ///< the first round's number (a resume goes on counting)
  /// The nodes have aggregators (the MPI launch, or one process with the local backend): they
  /// can merge forked copies and step a copy spread over nodes. Without them the policy sees
  /// copy_limit = 1 and a spread copy runs on one node.
  bool can_sync = false;
  secret_key secret;  ///< the cluster secret nodes must prove (actors/auth.hpp)
  /// First fencing epoch of every job: a run's epochs start above any earlier run's in the
  /// same directory when it grows with time (the launcher uses the wall clock in ms).
  std::uint64_t epoch_base = 0;
  /// First MASTER_PORT of program copies (dispatch_context::master_port_base); the launcher
  /// draws it per run so that runs sharing a host rarely meet.
  int master_port_base = 29500;
  /// Seconds a job actor has to answer a view or summary request; a job that does not is
  /// left out of that round (logged).
  double job_timeout = 1.0;
  /// Records every round's plan (runtime/core/timeline.hpp); null: none.
  std::shared_ptr<timeline_recorder> timeline;
  scheduler_hooks hooks;  ///< tests only
};

/// A job as the scheduler sees it: its job actor (actors/job_actor.hpp) owns the job; the
/// scheduler keeps what it planned for it and the job's latest snapshot.
struct job_entry {
  run_job spec;                     ///< as registered (its job-type key from run_rates)
  caf::actor handle;                ///< its job actor
  bool arrived = false;             ///< admitted to the active set
  job_snapshot latest;              ///< pushed by the job or its answer to a view request
  std::deque<placement> placements;  ///< its parts in its last 100 rounds (for clients)
  std::vector<copy_piece> pieces;   ///< its parts in the current round, as planned
  bool ended() const { return is_final(latest.life); }  ///< finished, failed or cancelled
};

/// A round's start while the job actors' views are asked for (start_round, then plan_round).
struct round_start {
  std::uint64_t id = 0;             ///< answers to an older start are ignored
  double now = 0;                   ///< the round's start, seconds after the run's start
  std::chrono::steady_clock::time_point wall0;  ///< when planning began (plan_seconds)
  std::vector<job_entry*> asked;    ///< the jobs asked, in submission order
  std::set<std::int64_t> answered;  ///< ids of the jobs that answered (or timed out)
  std::set<std::int64_t> silent;    ///< ids of the jobs that timed out: left out
  std::size_t left = 0;             ///< answers still missing (or timed out)
  caf::actor_clock::time_point since;  ///< when the views were asked for
  bool open = false;                ///< views are being collected
};

/// The end of the run while the job actors' summaries are collected.
struct run_end {
  run_summary sum;                  ///< the summary, its jobs filled in as they answer
  std::vector<job_final> finals;    ///< in job-set order
  std::vector<bool> answered;       ///< per job: its final is in (or stood in for)
  std::size_t left = 0;             ///< answers missing
};

/// One node as the scheduler sees it.
struct node_record {
  caf::actor handle;                        ///< its actor
  bool registered = false;                  ///< accepted
  bool alive = false;                       ///< registered and not lost
  node_hello hello;                         ///< what it said at registration
  caf::actor_clock::time_point last_seen;   ///< latest message from it
  bool leaving = false;                     ///< asked to leave after the current round
};

/// The scheduler's phases after registration, each a behaviour (see the file comment).
struct scheduler_phases {
  caf::behavior idle, starting, running, draining;
};

/// Mutable state of the scheduler actor.
struct scheduler_state {
  scheduler_config cfg;                     ///< settings
  caf::actor listener;                      ///< receives the run_summary
  caf::actor_clock::time_point t0;          ///< when the run started (every node registered)
  std::deque<job_entry> jobs;               ///< every job, in submission order
  std::map<std::int64_t, job_entry*> by_id;    ///< every job by id (deque: stable pointers)
  std::map<caf::actor_addr, job_entry*> by_job_actor;  ///< every job by its actor
  scheduler_phases phases;                  ///< its behaviours, built once
  round_start starting;                     ///< the round being started
  run_end ending;                           ///< the run's end, once done
  arrival_queue arrivals;                   ///< jobs not yet admitted (point into `jobs`)
  std::vector<node_record> nodes;           ///< by rank
  std::map<caf::actor_addr, int> by_addr;   ///< rank of each live node's actor
  std::set<caf::actor_addr> fenced;         ///< actors of nodes declared lost
  challenge_book<caf::actor_addr> challenges;  ///< registrations under way
  bool run_started = false;                 ///< every node registered; rounds may run
  std::int64_t round = -1;                  ///< current round, -1 before the first
  std::set<int> pending;                    ///< ranks yet to report the current round
  int expected_starts = 0;                  ///< copies of the current round
  int started = 0;                          ///< copy_started received this round
  double round_t0 = 0;                      ///< when the current round began (s)
  double round_deadline = 0;                ///< seconds after round_t0 every report is due
  std::uint64_t job_set_version = 0;        ///< bumped on arrivals, completions, failures
  std::vector<int> live_ranks;              ///< rank of each live-cluster server
  cluster live;                             ///< the cluster of live nodes
  std::uint64_t live_generation = 0;        ///< bumped when the live cluster changes
  round_plan last_plan;                     ///< previous plan (live-cluster indices)
  bool have_last = false;                   ///< last_plan is valid for `live`
  std::vector<std::int32_t> failed_ranks;   ///< lost nodes
  std::vector<double> dispatch_latency;     ///< per round, seconds
  std::vector<round_record> round_records;  ///< per round, as runtime/core/metrics.hpp reads them
  std::int64_t messages = 0;                ///< messages handled
  std::int64_t dropped = 0;                 ///< messages from actors not live nodes
  int refused = 0;                          ///< registrations refused
  int joins = 0;                            ///< registrations after the run started
  bool done = false;                        ///< the run is ending: summaries asked or sent
  bool stopping = false;                    ///< a stop was asked: end at the round boundary
  std::deque<round_status> recent_rounds;   ///< the last rounds, for clients (status_views)
  /// Submissions waiting for their journal record to reach the disk, by ticket.
  std::map<std::uint64_t, std::pair<std::vector<run_job>, caf::response_promise>> unsynced;
  std::uint64_t next_ticket = 0;            ///< the next submission's ticket
  caf::actor journal_relay;                 ///< brings the journal's acknowledgements back
  latency_histogram plan_histogram;         ///< seconds to plan and lay out each round
  latency_histogram dispatch_histogram;     ///< seconds from orders to every copy running
  std::shared_ptr<run_rates> rates;         ///< per-server throughput model with measurements
  run_checkpoints ckpts;                    ///< the checkpoint directory and its health
  static inline const char* name = "tessera.scheduler";  ///< actor name for logs
};

/// The scheduler actor's behaviour. `listener` receives one run_summary when the run ends
/// (every job finished: ok; a policy error, every node lost, a refused node or a time-out:
/// not ok, with the reason); then the scheduler quits after telling the nodes to shut down.
/// Rounds begin once every node of the cluster has registered.
caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, scheduler_config cfg,
                              caf::actor listener);

}  // namespace tessera::actors
