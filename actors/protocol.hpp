#pragma once
/// @file protocol.hpp
/// The messages between the scheduler, the nodes and clients (those between the scheduler and
/// its job actors are actors/job_messages.hpp); `register_protocol` registers each type for
/// serialisation, so every process of a run must call it on its actor_system_config.
///
/// Who sends which message to whom, and what it answers, is actors/interfaces.hpp: the
/// protocol's table as typed actor interfaces, which the compiler checks at every send and in
/// every receiver's handlers. The node -> scheduler, scheduler -> node and node -> job
/// messages cross processes (serialised, each with its `inspect` below); those between the
/// scheduler, its job actors and clients stay in the scheduler's process. The scheduler sends
/// its listener one run_summary when the run ends.
///
/// A node is a server of the cluster file, identified by its rank (its index in the file).
/// Trust: a node proves the cluster secret when it registers; from then on the scheduler
/// attributes every message to the actor (hence the connection) it came from, never to a rank
/// the message claims, so node -> scheduler messages carry no rank; a job actor likewise
/// accepts a report only from a node actor its assignment for the round lists. Messages from
/// actors that are not live registered nodes are dropped (and counted); clients must run in
/// the scheduler's own process. Every process of a run must call register_protocol.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/wire.hpp"
#include "actors/histogram.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/records.hpp"

namespace tessera {

/// Serialises round_record (runtime/core/records.hpp), carried in run_summary.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, round_record& x) {
  return actors::wire::fields(f, "round_record", x.start, x.busy_gpus, x.idle_gpus, x.active_jobs,
                              x.waiting_jobs);
}

}  // namespace tessera

namespace tessera::actors {

/// The protocol version this build speaks; a node speaking another is refused at
/// registration. Bump it whenever a message below changes.
constexpr std::uint32_t protocol_version = 10;

/// Ends the run: `shutdown_atom, int32 exit code` (scheduler -> node).
using shutdown_atom = caf::atom_constant<caf::atom("shutdown")>;
/// A node asks to leave after the current round (drain; node -> scheduler).
using leave_atom = caf::atom_constant<caf::atom("leave")>;
/// The node was declared lost and may no longer report: `fenced_atom, std::string reason`
/// (scheduler -> node).
using fenced_atom = caf::atom_constant<caf::atom("fenced")>;
/// Scheduler -> node before a round's orders go out: let go of the processes parked with
/// unsaved state that these orders do not continue, then answer (settled_atom, round).
using settle_atom = caf::atom_constant<caf::atom("settle")>;
using settled_atom = caf::atom_constant<caf::atom("settled")>;

/// Opens a registration: the node's fresh nonce (actors/auth.hpp).
struct auth_request {
  std::vector<std::uint8_t> nonce;  ///< nonce_bytes random bytes
};

/// The scheduler's answer: its fresh nonce and its proof of the secret over both nonces.
struct auth_challenge {
  std::vector<std::uint8_t> nonce;  ///< nonce_bytes random bytes
  std::vector<std::uint8_t> proof;  ///< proof_of(secret, {"scheduler", client, server nonce})
};

/// Registration: who a node is and what it has.
struct node_hello {
  std::uint32_t version = protocol_version;  ///< protocol version the node speaks
  std::int32_t rank = 0;                     ///< index of its server in the cluster file
  std::string name;                          ///< server name from the cluster file
  std::string gpu_type;                      ///< GPU type of the server
  std::int32_t gpus = 0;                     ///< GPUs on the server
  double speed = 1.0;                        ///< speed factor throttling its executor
  std::string host;                          ///< host name of the node process
  std::int32_t pid = 0;                      ///< process id of the node process
  /// proof_of(secret, hello_proof_parts(...)) over the nonces of its auth exchange.
  std::vector<std::uint8_t> proof;
};

/// Accepted registration.
struct node_welcome {
  std::int32_t rank = 0;          ///< the rank accepted
  double round_length = 0;        ///< seconds per round
  double heartbeat_interval = 0;  ///< seconds between the node's heartbeats
};

/// A node is alive (sent every heartbeat interval).
struct heartbeat {
  std::int64_t seq = 0;  ///< counts up from 0
};

/// How a node runs a copy of a job of kind "program" (runtime/core/job_file.hpp program_spec,
/// docs/lease-protocol.md): one process per task of the part it runs here.
struct program_order {
  std::vector<std::string> command;        ///< argv
  std::string workdir;                     ///< where the processes run
  std::map<std::string, std::string> env;  ///< added to the node's environment
  double grace = 30;                       ///< seconds the node waits for the program
  /// Steps of the lease when the copy has several processes (all must stop at the same
  /// step, as torch.distributed needs), -1 when it has one (its lease is the round's time).
  std::int64_t lease_steps = -1;
  std::string master_addr;       ///< MASTER_ADDR: host of the copy's first part
  std::int32_t master_port = 0;  ///< MASTER_PORT of the copy's process group
  /// How often a process kept warm checkpoints (program_spec::checkpoint_every): every
  /// `checkpoint_rounds` leases, or every `checkpoint_seconds` when that is > 0.
  std::int32_t checkpoint_rounds = 1;
  double checkpoint_seconds = 0;
};

/// Start (or continue) one copy of a job on a node for one round.
struct start_copy {
  std::int64_t job = 0;                  ///< job id
  std::int32_t copy = 0;                 ///< copy index (0 unless forked)
  std::string kind;                      ///< trainable kind
  std::uint64_t seed = 0;                ///< trainable seed
  std::map<std::string, double> config;  ///< trainable configuration
  std::int32_t scale = 1;                ///< tasks per step (K)
  std::int32_t gpus = 1;                 ///< GPUs the copy holds on this node
  std::int64_t total_steps = 0;          ///< steps at which the job is finished
  std::int64_t resume_step = 0;          ///< step of resume_path (0 when there is none)
  std::int64_t step_budget = -1;         ///< most steps to run this round, -1 = no cap
  double step_time = 0.05;               ///< seconds per step on a speed-1.0 server
  /// Space sharing: the job sharing this copy's GPUs on this node (-1 = none) and the
  /// copy's rate beside it relative to its rate alone, (0, 1]; a throttled node steps the
  /// copy at speed x speed_share, and gives both copies of the pair the same device indices.
  std::int64_t partner = -1;
  double speed_share = 1.0;
  std::string checkpoint_path;  ///< where this round's checkpoint is written
  /// Leader rank of every copy of the job this round, indexed by copy; empty (or one rank) when
  /// the job is not forked. Forked copies draw disjoint batches and at the round end merge their
  /// states under `merge` through the node's aggregator (channel = job id,
  /// runtime/node/train/fork_merge.hpp); copy 0 writes the merged checkpoint.
  std::vector<std::int32_t> fork_ranks;
  double aggregate_timeout = 10;  ///< seconds a copy waits for the others to merge
  double target_loss = 0;         ///< done when the round-end loss is this low (0 = off)
  std::string merge = "mean";     ///< forked copies' merge rule (train::fork_merge_rule)
  /// Ranks holding a part of this copy (increasing; actors/task_layout.hpp), empty or one rank
  /// when the copy runs on this node alone. Parts step together: each computes its shards,
  /// the parts gather all K shard gradients through the aggregator and each applies their
  /// sum in shard order, so every part holds the same state. The first rank is the copy's
  /// leader: it merges with the other copies of a forked job and writes the checkpoint.
  std::vector<std::int32_t> part_ranks;
  std::int32_t shard_begin = 0;  ///< first shard this node computes
  std::int32_t shards = 0;       ///< shards it computes per step (0 = all K)
  std::int32_t task_times = 1;   ///< task-times per step on its busiest GPU
  std::uint64_t channel = 0;     ///< aggregator channel of the job's collectives
  /// The newest checkpoint the scheduler confirmed ("" = none: the job starts at step 0).
  std::string resume_path;
  std::string fallback_path;       ///< the one before, used when resume_path is unusable
  std::int64_t fallback_step = 0;  ///< step of fallback_path
  std::uint64_t epoch = 0;         ///< this round's writer epoch (checkpoint fencing)
  std::string fence_path;          ///< the job's fence file, checked before publishing
  program_order program;           ///< kind "program" only
  /// The job's actor in the scheduler's process: the copy's copy_started, progress_report,
  /// checkpoint_done and job_finished go to it (round_done still goes to the scheduler).
  caf::actor job_actor;
  /// True for a user's program (kind "program").
  bool is_program() const { return kind == "program"; }
  /// The job copy it starts.
  copy_id id() const { return {job, copy}; }
};

/// One node's part of a round plan.
struct round_orders {
  std::int64_t round = 0;          ///< round number, from 0
  double length = 0;               ///< seconds the copies run
  std::vector<start_copy> copies;  ///< copies to run; anything else is stopped
};

/// Stop a copy before its round ends (its state is checkpointed as at a round end).
struct stop_copy {
  std::int64_t round = 0;  ///< round the copy runs in
  std::int64_t job = 0;    ///< job id
  std::int32_t copy = 0;   ///< copy index
  /// The job copy to stop.
  copy_id id() const { return {job, copy}; }
};

/// Where a copy's state came from at the start of a round (copy_started::source).
enum class state_source : std::int32_t {
  fresh = 0,  ///< step 0: the job has no checkpoint yet
  memory,     ///< the model the node kept from the previous round
  resume,     ///< start_copy::resume_path
  fallback,   ///< start_copy::fallback_path: resume_path was unusable
  scratch,    ///< step 0: no checkpoint the job had was usable
};

/// A copy has loaded its state and is stepping.
struct copy_started {
  std::int64_t round = 0;              ///< round
  std::int64_t job = 0;                ///< job id
  std::int32_t copy = 0;               ///< copy index
  std::int64_t step = 0;               ///< step it starts from
  std::int32_t source = 0;             ///< a state_source
  std::vector<std::string> bad_files;  ///< checkpoints it found unusable, in the order tried
  std::string why;                     ///< why each was unusable ("" when none was)
};

/// What a copy did in one round.
struct progress_report {
  std::int64_t round = 0;   ///< round
  std::int64_t job = 0;     ///< job id
  std::int32_t copy = 0;    ///< copy index
  std::int64_t step = 0;    ///< step counter after the round
  std::int64_t steps = 0;   ///< steps made this round
  double busy_seconds = 0;  ///< wall seconds the copy held its GPUs
  double throughput = 0;    ///< moving average of measured steps/s on this node
  double loss = 0;          ///< training loss after the round
  std::string error;        ///< non-empty when the copy failed (e.g. unknown kind)
  /// The failure was in a synchronisation with other nodes (a member never came, a timeout):
  /// the round's progress is lost and the job resumes from its checkpoint; the run goes on.
  bool retry = false;
  std::int32_t task_times = 1;  ///< task-times per step the node ran (for the rate model)
  /// Non-empty when the round ran but its checkpoint could not be written (e.g. the
  /// directory is full): the round's progress is lost and the run goes on.
  std::string checkpoint_error;
  /// The user's program failed (a non-zero exit, a signal, a protocol error, silence past
  /// its grace; `error` says which, with the tail of its stderr): the round's progress is
  /// lost, the job restarts from its checkpoint, and the failure counts against its
  /// max_restarts. The run goes on.
  bool program_failed = false;
  /// A program's seconds from its start to its first contact (hello); 0 for a trainable.
  double startup_seconds = 0;
};

/// A copy's state is saved at a round boundary.
struct checkpoint_done {
  std::int64_t round = 0;  ///< round at whose end it was written
  std::int64_t job = 0;    ///< job id
  std::int32_t copy = 0;   ///< copy index
  std::int64_t step = 0;   ///< step counter saved
  std::string path;        ///< checkpoint file
};

/// A job reached its total steps (its final state is checkpointed).
struct job_finished {
  std::int64_t job = 0;         ///< job id
  std::int64_t step = 0;        ///< final step counter
  double loss = 0;              ///< final training loss
  double accuracy = 0;          ///< final held-out accuracy
  bool reached_target = false;  ///< ended by reaching its target loss
};

/// A node has reported every copy of a round.
struct round_done {
  std::int64_t round = 0;  ///< round
  /// Processes parked on a warm lease on this node whose state is newer than their checkpoint
  /// (program_order::checkpoint_rounds > 1): the scheduler lets such a node release the ones
  /// the next round moves (settle_atom) before any other node starts them elsewhere.
  std::int32_t unsaved = 0;
};

// ---- clients in the scheduler's process (the control API, `tessera run`) ------------------
// These messages never cross a process: the scheduler answers only senders of its own actor
// system, so they are neither serialised nor registered.

/// Submit jobs (reply: their ids, in order, or an error naming the job). A job whose id was
/// not given (run_job::id_given) gets the next free one; a given id must be free. Arrivals
/// count from the submission.
struct submit_job {
  std::vector<run_job> jobs;  ///< as runtime/core/job_file.hpp reads them
};

/// Cancel a job at the next round boundary, its checkpoint kept (reply: a cancel_reply).
struct cancel_job {
  std::int64_t job = 0;  ///< job id
};

/// What a cancel did.
enum class cancel_outcome : std::int32_t {
  accepted = 0,  ///< the job stops at the next round boundary (or stopped now: not running)
  unknown,       ///< no such job
  ended,         ///< it had already finished, failed or been cancelled
};

/// One part of a job copy in one round.
struct placement {
  std::int64_t round = 0;  ///< round
  std::int64_t job = 0;    ///< job id
  std::int32_t copy = 0;   ///< copy index
  std::int32_t rank = 0;   ///< node
  std::int32_t gpus = 0;   ///< GPUs it held there
};

/// How one job ended (or where it stands): built by summary_of (actors/job_actor.hpp) only.
struct job_summary {
  std::int64_t id = 0;                         ///< job id
  std::string kind;                            ///< trainable kind
  std::string job_type;                        ///< job type (the throughput-table key)
  std::int32_t scale = 1;                      ///< scale factor
  std::int64_t total_steps = 0;                ///< steps to train
  bool finished = false;                       ///< reached its total steps
  bool canceled = false;                       ///< cancelled by a client
  double arrival = 0;                          ///< seconds after the run started
  double first_start = -1;                     ///< start of its first round (s), -1 if never
  double finish = -1;                          ///< seconds after the run started, -1 if not
  double jct = -1;                             ///< finish - arrival, -1 if not finished
  std::int64_t steps = 0;                      ///< final step counter
  double run_time = 0;                         ///< seconds it held GPUs
  double loss = 0;                             ///< final training loss
  double accuracy = 0;                         ///< final held-out accuracy
  std::int32_t restarts = 0;                   ///< rounds it resumed on another node
  std::int32_t lost_rounds = 0;                ///< rounds whose progress a node failure lost
  std::int32_t regressions = 0;                ///< starts from before its last checkpoint (0)
  std::vector<double> planned_gpu_seconds;     ///< per rank: GPUs x round length planned
  std::vector<double> busy_gpu_seconds;        ///< per rank: GPUs x seconds it actually ran
  std::vector<double> throughput;              ///< per rank: last measured steps/s (0 = never)
  std::int32_t final_rank = -1;                ///< node of its last round, -1 if it never ran
  double final_round_busy = 0;                 ///< GPU-seconds it ran in that last round
  std::int32_t rounds = 0;                     ///< rounds it was scheduled in
  std::int32_t max_copies = 0;                 ///< most copies it ran as in one round
  bool reached_target = false;                 ///< finished by reaching its target loss
  std::int32_t checkpoint_fallbacks = 0;       ///< resumed from the previous checkpoint
  std::int32_t restarts_from_scratch = 0;      ///< restarted at step 0: no usable checkpoint
  std::int32_t checkpoint_write_failures = 0;  ///< rounds whose checkpoint was not written
  std::int32_t paused_rounds = 0;              ///< rounds it waited for the checkpoint directory
  std::string checkpoint;                      ///< its newest confirmed checkpoint ("" = none)
  bool failed = false;                         ///< its program failed past max_restarts
  std::string failure;                         ///< why (the last failure, with stderr's tail)
  std::int32_t program_failures = 0;           ///< rounds its program failed in
  double startup_seconds = 0;                  ///< its program's mean start-to-hello time (s)
  std::string state;                           ///< actors/job_life.hpp state at the end
};

/// A job as the control API shows it (docs/api.md, "job"): its summary as summary_of
/// (actors/job_actor.hpp) builds it, without the per-rank vectors, and what only a live job
/// has.
struct job_status {
  job_summary summary;                ///< how it stands; summary.state is its life
  std::string state;                  ///< as clients see it: the life, or "cancelling"
  double steps_per_second = 0;        ///< measured, over its parts, in its latest round
  std::int32_t copies = 0;            ///< copies in the current round
  double gpu_seconds = 0;             ///< GPUs x seconds it held (attained service)
  std::vector<placement> placements;  ///< recent rounds' parts (only when asked)
};

/// A node as the control API shows it (docs/api.md, "node").
struct node_status {
  std::int32_t rank = 0;
  std::string name, gpu_type, host;
  std::int32_t gpus = 0, pid = 0;
  double speed = 1;
  std::string state;                  ///< waiting, alive, lost, left
  std::vector<placement> assignment;  ///< its parts in the current round
  /// Seconds since the scheduler last heard from it, and the silence at which it would be
  /// lost (its adaptive bound, actors/liveness.hpp); both -1 unless alive.
  double silence = -1, loss_bound = -1;
};

/// A round as the control API shows it (docs/api.md, "round").
struct round_status {
  std::int64_t round = 0;
  double start = 0, length = 0;
  std::int32_t busy_gpus = 0, idle_gpus = 0, active_jobs = 0, waiting_jobs = 0;
  double plan_seconds = 0;       ///< policy and layout (wall time of start_round)
  double dispatch_latency = -1;  ///< orders out -> every copy running; -1 until known
  std::vector<placement> assignments;
};

/// The cluster as the control API shows it (docs/api.md, "cluster"), with the counters the
/// metrics scrape needs.
/// A served cluster's journal as clients see it (docs/api.md, "cluster").
struct journal_health {
  bool present = false;            ///< the cluster keeps one (`tessera serve`)
  bool writable = true;            ///< writes succeed
  std::string error;               ///< why not ("" when they do)
  std::int64_t held_records = 0;   ///< state changes waiting for the disk
  std::int64_t write_errors = 0;   ///< batches the disk refused since the start
  std::int64_t paused_rounds = 0;  ///< rounds the jobs waited for it
  std::int64_t records = 0;        ///< records in the file
  std::int64_t bytes = 0;          ///< bytes of the file
};

struct cluster_status {
  std::string policy;
  std::int64_t round = -1;
  double round_length = 0, uptime = 0;
  std::int32_t nodes = 0, gpus = 0;
  std::map<std::string, std::int32_t> nodes_by_state;  ///< waiting, alive, lost, left
  std::map<std::string, std::int32_t> jobs;            ///< by state
  std::map<std::string, double> utilisation;           ///< per GPU type, current round
  std::int64_t rounds_total = 0;                       ///< rounds planned
  latency_histogram round_seconds;     ///< planning time of each round (policy and layout)
  latency_histogram dispatch_seconds;  ///< orders out -> every copy running
  std::int64_t steps_total = 0;        ///< confirmed steps over all jobs
  double throughput = 0;               ///< steps/s over running jobs
  bool shutting_down = false;
  journal_health journal;  ///< its journal (present only under `tessera serve`)
};

/// Client queries, each `(atom, args...)`:
///   jobs_atom, int64 id (-1 = all), bool placements  -> std::vector<job_status>
///   job_page_atom, int64 after, int32 count, string state -> std::vector<job_status>: the
///                jobs with an id above `after`, in id order, in `state` ("" = any), at most
///                `count` (the API's paginated list)
///   nodes_atom                                       -> std::vector<node_status>
///   rounds_atom, int32 limit                         -> std::vector<round_status> (oldest first)
///   cluster_atom                                     -> cluster_status
///   stop_atom -> bool: shut down after the round in flight (checkpoints written); the
///                listener gets the run_summary as at any end
using jobs_atom = caf::atom_constant<caf::atom("jobs")>;
using job_page_atom = caf::atom_constant<caf::atom("jobpage")>;
using nodes_atom = caf::atom_constant<caf::atom("nodes")>;
using rounds_atom = caf::atom_constant<caf::atom("rounds")>;
using cluster_atom = caf::atom_constant<caf::atom("cluster")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;

/// The end of a run.
struct run_summary {
  bool ok = false;                          ///< every job finished (or was cancelled)
  std::string error;                        ///< why not, when !ok
  std::int64_t rounds = 0;                  ///< rounds planned
  double seconds = 0;                       ///< wall time of the run
  std::vector<job_summary> jobs;            ///< in job-set order
  std::vector<std::int32_t> failed_ranks;   ///< nodes lost during the run
  std::vector<double> dispatch_latency;     ///< per round: start -> every copy running (s)
  std::vector<double> plan_seconds;         ///< per round: start -> orders out (s)
  std::vector<round_record> round_records;  ///< per round: GPUs busy and idle, jobs waiting
  std::int64_t messages = 0;                ///< messages the scheduler handled
  std::int64_t dropped = 0;                 ///< messages from actors that are not live nodes
  std::int32_t refused = 0;                 ///< registrations refused
  std::int32_t joins = 0;                   ///< nodes that registered after the run started
  std::int32_t checkpoint_fallbacks = 0;    ///< over all jobs
  std::int32_t restarts_from_scratch = 0;   ///< over all jobs
  std::int32_t checkpoint_pauses = 0;       ///< times the checkpoint directory paused the jobs
  double registration_seconds = -1;  ///< scheduler's start -> rounds began (-1: they never did)
  double stalled_seconds = 0;        ///< the scheduler's own lateness, not held against nodes
};

// ---- serialisation ------------------------------------------------------------------------
// Every inspect goes through wire::fields (actors/wire.hpp), which sends doubles as their bit
// patterns: CAF 0.17's own packing hangs on an infinity.

/// Serialises auth_request.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, auth_request& x) {
  return wire::fields(f, "auth_request", x.nonce);
}
/// Serialises auth_challenge.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, auth_challenge& x) {
  return wire::fields(f, "auth_challenge", x.nonce, x.proof);
}
/// Serialises node_hello.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_hello& x) {
  return wire::fields(f, "node_hello", x.version, x.rank, x.name, x.gpu_type, x.gpus, x.speed,
                      x.host, x.pid, x.proof);
}
/// Serialises node_welcome.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_welcome& x) {
  return wire::fields(f, "node_welcome", x.rank, x.round_length, x.heartbeat_interval);
}
/// Serialises heartbeat.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat& x) {
  return wire::fields(f, "heartbeat", x.seq);
}
/// Serialises program_order.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, program_order& x) {
  return wire::fields(f, "program_order", x.command, x.workdir, x.env, x.grace, x.lease_steps,
                      x.master_addr, x.master_port, x.checkpoint_rounds, x.checkpoint_seconds);
}
/// Serialises start_copy.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, start_copy& x) {
  return wire::fields(f, "start_copy", x.job, x.copy, x.kind, x.seed, x.config, x.scale, x.gpus,
                      x.total_steps, x.resume_step, x.step_budget, x.step_time, x.partner,
                      x.speed_share, x.checkpoint_path, x.fork_ranks, x.aggregate_timeout,
                      x.target_loss, x.merge, x.part_ranks, x.shard_begin, x.shards, x.task_times,
                      x.channel, x.resume_path, x.fallback_path, x.fallback_step, x.epoch,
                      x.fence_path, x.program, x.job_actor);
}
/// Serialises round_orders.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, round_orders& x) {
  return wire::fields(f, "round_orders", x.round, x.length, x.copies);
}
/// Serialises stop_copy.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_copy& x) {
  return wire::fields(f, "stop_copy", x.round, x.job, x.copy);
}
/// Serialises copy_started.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, copy_started& x) {
  return wire::fields(f, "copy_started", x.round, x.job, x.copy, x.step, x.source, x.bad_files,
                      x.why);
}
/// Serialises progress_report.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, progress_report& x) {
  return wire::fields(f, "progress_report", x.round, x.job, x.copy, x.step, x.steps, x.busy_seconds,
                      x.throughput, x.loss, x.error, x.retry, x.task_times, x.checkpoint_error,
                      x.program_failed, x.startup_seconds);
}
/// Serialises checkpoint_done.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_done& x) {
  return wire::fields(f, "checkpoint_done", x.round, x.job, x.copy, x.step, x.path);
}
/// Serialises job_finished.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_finished& x) {
  return wire::fields(f, "job_finished", x.job, x.step, x.loss, x.accuracy, x.reached_target);
}
/// Serialises round_done.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, round_done& x) {
  return wire::fields(f, "round_done", x.round, x.unsaved);
}
/// job_summary's fields, listed once: CAF's inspect (below) and the JSON of a run's summary
/// and of the control API (actors/record_json.hpp) walk this list. `Summary` is job_summary
/// or const job_summary.
template <class Summary, class Visit>
decltype(auto) fields_of(Summary& x, Visit&& v) {
  using wire::field;
  return v("job_summary", field("id", x.id), field("kind", x.kind), field("job_type", x.job_type),
           field("scale", x.scale), field("total_steps", x.total_steps),
           field("finished", x.finished), field("canceled", x.canceled),
           field("arrival", x.arrival), field("first_start", x.first_start),
           field("finish", x.finish), field("jct", x.jct), field("steps", x.steps),
           field("run_time", x.run_time), field("loss", x.loss), field("accuracy", x.accuracy),
           field("restarts", x.restarts), field("lost_rounds", x.lost_rounds),
           field("regressions", x.regressions), field("planned_gpu_seconds", x.planned_gpu_seconds),
           field("busy_gpu_seconds", x.busy_gpu_seconds), field("throughput", x.throughput),
           field("final_rank", x.final_rank), field("final_round_busy", x.final_round_busy),
           field("rounds", x.rounds), field("max_copies", x.max_copies),
           field("reached_target", x.reached_target),
           field("checkpoint_fallbacks", x.checkpoint_fallbacks),
           field("restarts_from_scratch", x.restarts_from_scratch),
           field("checkpoint_write_failures", x.checkpoint_write_failures),
           field("paused_rounds", x.paused_rounds), field("checkpoint", x.checkpoint),
           field("failed", x.failed), field("failure", x.failure),
           field("program_failures", x.program_failures),
           field("startup_seconds", x.startup_seconds), field("state", x.state));
}
/// Serialises job_summary (through its field list).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_summary& x) {
  return wire::inspect_fields(f, x);
}
/// Serialises run_summary.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_summary& x) {
  return wire::fields(f, "run_summary", x.ok, x.error, x.rounds, x.seconds, x.jobs, x.failed_ranks,
                      x.dispatch_latency, x.plan_seconds, x.round_records, x.messages, x.dropped,
                      x.refused, x.joins, x.checkpoint_fallbacks, x.restarts_from_scratch,
                      x.checkpoint_pauses, x.registration_seconds, x.stalled_seconds);
}

// ---- errors -------------------------------------------------------------------------------

/// Error codes of the "tessera" caf::error category; the context holds the message text.
enum class run_errc : std::uint8_t {
  protocol_mismatch = 1,  ///< a node speaks another protocol version
  unknown_node,           ///< a node the cluster file does not list, or listed differently
  duplicate_node,         ///< a rank registered twice
  unauthenticated,        ///< no valid proof of the cluster secret
  fenced,                 ///< the node was declared lost
  bad_job,                ///< a submitted job is invalid (e.g. unknown kind)
  unavailable,            ///< the scheduler cannot take it now (its journal failed)
  too_many,               ///< the scheduler holds as many open jobs as it may (429)
};

/// The caf::error category atom of run_errc.
constexpr caf::atom_value run_error_category = caf::atom("tessera");

/// A caf::error of the "tessera" category carrying `message`.
caf::error make_run_error(run_errc code, std::string message);

/// The message text of an error made by make_run_error (else the system's rendering;
/// "normal exit" for an empty error, e.g. the reason of an actor that quit normally).
std::string describe(const caf::actor_system& sys, const caf::error& e);

/// Registers every message type above (and the "tessera" error category) with `cfg`.
void register_protocol(caf::actor_system_config& cfg);

}  // namespace tessera::actors

// The in-process client messages are never serialised (see "clients" above): CAF's way of
// saying so for messages that stay in one actor system.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::submit_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::cancel_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::cancel_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::cluster_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tessera::actors::job_status>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tessera::actors::node_status>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<tessera::actors::round_status>)
