#pragma once
/// @file scheduler_state.hpp
/// The scheduler actor's settings and state (actors/scheduler_actor.hpp describes the actor).
/// Its functions live in one file per concern: scheduler_nodes.cpp (registration, attribution,
/// heartbeats, loss), scheduler_rounds.cpp (a round from its start to its orders),
/// scheduler_clients.cpp (jobs added, submissions, cancels, stops), scheduler_ending.cpp (the
/// run's end) and scheduler_actor.cpp (the phases as behaviours).

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
#include "actors/interfaces.hpp"
#include "actors/job_actor.hpp"
#include "actors/job_life.hpp"
#include "actors/liveness.hpp"
#include "actors/protocol.hpp"
#include "actors/run_rates.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/records.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/timeline.hpp"

namespace tessera::actors {

/// Hooks into the scheduler for tests (fault injection); a production run leaves them empty.
struct scheduler_hooks {
  /// Asked when the scheduler probes the checkpoint directory after `round`: a non-zero errno
  /// fails the probe as the system would (a full or read-only directory).
  std::function<int(std::int64_t round)> checkpoint_probe_errno;
};

/// Settings of the scheduler, passed down from the launcher.
struct scheduler_config {
  cluster cl;                   ///< the configured cluster; rank = server index
  std::vector<run_job> jobs;    ///< the job set
  std::shared_ptr<policy> pol;  ///< the policy (from the registry)
  /// Co-location ratios of the live rate model (run_rates); null: no job pairs.
  std::shared_ptr<const throughput_table> colocation;
  std::vector<std::string> known_kinds;  ///< trainable kinds every node can build
  double round_length = 1.0;             ///< seconds per round
  std::string checkpoint_dir;            ///< shared directory for job checkpoints
  double register_timeout = 20;          ///< seconds to wait for the first node and between nodes
  /// With fewer nodes than the cluster file's registered when the registration time-out
  /// passes, start anyway when at least this many did (0: every node is needed); the others
  /// may join later.
  int min_nodes = 0;
  double heartbeat_interval = 0.5;  ///< seconds between node heartbeats
  liveness_settings liveness;       ///< when a silent node is lost (actors/liveness.hpp)
  double report_grace = 10;         ///< seconds past a round's length to report
  double max_seconds = 0;           ///< give up after this long (0 = no limit)
  bool verbose = false;             ///< one line per round on stderr
  /// A cluster that stays up (`tessera serve`): no end when no job is left; it ends on a
  /// stop request (stop_atom) after the round in flight.
  bool serve = false;
  /// A served cluster's journal (actors/cluster_journal.hpp): submissions are acknowledged
  /// once on disk, state changes, cancels and checkpoints are recorded. Null: none.
  std::shared_ptr<cluster_journal> log;
  /// Jobs a resume brings back from the journal (with their states and checkpoints).
  std::vector<restored_job> restored;
  std::int64_t first_round = 0;  ///< the first round's number (a resume goes on counting)
  /// Cluster time at the start (s): a resume's clock goes on from the journal's newest
  /// record, so times before and after it compare (actors/journal_records.hpp).
  double clock_base = 0;
  /// Jobs not ended (queued, running, preempted, and submissions on their way to the
  /// journal) the scheduler holds at most; a submission past it is refused (429).
  std::size_t max_open_jobs = 100000;
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
  run_job spec;                      ///< as registered (its job-type key from run_rates)
  job_scheduler_api handle;          ///< its job actor
  bool arrived = false;              ///< admitted to the active set
  job_snapshot latest;               ///< pushed by the job or its answer to a view request
  std::deque<placement> placements;  ///< its parts in its last 100 rounds (for clients)
  std::vector<copy_piece> pieces;    ///< its parts in the current round, as planned
  /// Its view must be asked for at the next round start even if it did not run: it never gave
  /// one, or it was told of a lost node (it fences its writers: the view must follow that).
  bool view_due = true;
  /// Asked for its view at the current round start: it ran in the round that ended, or its
  /// view is due. A job that waited needs no question: its latest push is its view.
  bool asked_view = false;
  bool ended() const { return is_final(latest.life); }  ///< finished, failed or cancelled
};

/// A round's start while the job actors' views are asked for (start_round, then plan_round).
struct round_start {
  std::uint64_t id = 0;  ///< answers to an older start are ignored
  double now = 0;        ///< the round's start, seconds after the run's start
  std::chrono::steady_clock::time_point wall0;  ///< when planning began (plan_seconds)
  std::vector<job_entry*> asked;                ///< the active jobs, in submission order (planned)
  std::vector<job_entry*> viewing;              ///< those asked for a view (asked_view)
  std::set<std::int64_t> answered;              ///< ids of the jobs that answered (or timed out)
  std::set<std::int64_t> silent;                ///< ids of the jobs that timed out: left out
  std::size_t left = 0;                         ///< answers still missing (or timed out)
  caf::actor_clock::time_point since;           ///< when the views were asked for
  bool open = false;                            ///< views are being collected
};

/// One node as the scheduler sees it.
struct node_record {
  node_api handle;                         ///< its actor
  bool registered = false;                 ///< accepted
  bool alive = false;                      ///< registered and not lost
  node_hello hello;                        ///< what it said at registration
  caf::actor_clock::time_point last_seen;  ///< latest message from it
  heartbeat_gaps gaps;                     ///< its heartbeats' gaps: its loss bound
  bool leaving = false;                    ///< asked to leave after the current round
};

/// The scheduler's phases after registration, each a behaviour (see the file comment).
struct scheduler_phases {
  caf::behavior idle, starting, settling, running, draining;
};

/// Mutable state of the scheduler actor.
struct scheduler_state {
  scheduler_config cfg;                      ///< settings
  caf::actor listener;                       ///< receives the run_summary
  caf::actor_clock::time_point t0;           ///< when the run started (every node registered)
  caf::actor_clock::time_point created;      ///< when the scheduler started
  double registration_seconds = -1;          ///< created -> the run started (-1 before)
  std::deque<job_entry> jobs;                ///< every job, in submission order
  std::map<std::int64_t, job_entry*> by_id;  ///< every job by id (deque: stable pointers)
  std::map<caf::actor_addr, job_entry*> by_job_actor;  ///< every job by its actor
  scheduler_phases phases;                             ///< its behaviours, built once
  round_start starting;                                ///< the round being started
  arrival_queue arrivals;                      ///< jobs not yet admitted (point into `jobs`)
  std::vector<node_record> nodes;              ///< by rank
  std::map<caf::actor_addr, int> by_addr;      ///< rank of each live node's actor
  std::set<caf::actor_addr> fenced;            ///< actors of nodes declared lost
  challenge_book<caf::actor_addr> challenges;  ///< registrations under way
  bool run_started = false;                    ///< every node registered; rounds may run
  /// The last sign of registration progress (a challenge answered, a node accepted): the
  /// registration time-out counts from it, so a slow start that keeps moving is waited for.
  caf::actor_clock::time_point registration_progress;
  caf::actor_clock::time_point last_scan;  ///< the heartbeat scan's previous run
  bool scanned = false;                    ///< last_scan is set
  double stalled = 0;       ///< seconds the scheduler's own scans ran late, not held against nodes
  int late_waits = 0;       ///< deadline extensions granted this round to late but live nodes
  std::int64_t round = -1;  ///< current round, -1 before the first
  std::set<int> pending;    ///< ranks yet to report the current round
  /// Ranks whose last round_done said they keep processes with unsaved state (round_done::
  /// unsaved); before a round's orders go out, those asked to settle and not yet answered;
  /// and the orders waiting for them.
  std::set<int> unsaved, settling;
  std::map<int, round_orders> settle_orders;
  bool holding_orders = false;              ///< settle_orders wait for `settling`
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
  std::vector<double> plan_seconds;         ///< per round: start -> orders out, seconds
  std::vector<round_record> round_records;  ///< per round, as runtime/core/metrics.hpp reads them
  std::int64_t messages = 0;                ///< messages handled
  std::int64_t dropped = 0;                 ///< messages from actors not live nodes
  int refused = 0;                          ///< registrations refused
  int joins = 0;                            ///< registrations after the run started
  bool stopping = false;                    ///< a stop was asked: end at the round boundary
  std::deque<round_status> recent_rounds;   ///< the last rounds, for clients (status_views)
  /// Submissions waiting for their journal record to reach the disk, by ticket.
  std::map<std::uint64_t, std::pair<std::vector<run_job>, caf::response_promise>> unsynced;
  std::uint64_t next_ticket = 0;           ///< the next submission's ticket
  caf::actor journal_relay;                ///< brings the journal's acknowledgements back
  latency_histogram plan_histogram;        ///< seconds to plan and lay out each round
  latency_histogram dispatch_histogram;    ///< seconds from orders to every copy running
  std::shared_ptr<run_rates> rates;        ///< per-server throughput model with measurements
  run_checkpoints ckpts;                   ///< the checkpoint directory and its health
  std::size_t ended_jobs = 0;              ///< jobs finished, failed or cancelled
  bool journal_waiting = false;            ///< the jobs wait: the journal cannot write
  std::int64_t journal_paused_rounds = 0;  ///< rounds the jobs waited for the journal
  static inline const char* name = "tessera.scheduler";  ///< actor name for logs
};

}  // namespace tessera::actors
