#pragma once
/// @file job_actor.hpp
/// The job actor: one per job, spawned by the scheduler when the job is added (a job of the job
/// set, or a client's submission). It owns the job's truth: its life (actors/job_life.hpp's
/// state machine: an illegal transition is refused and logged), its copies in the current
/// round, its checkpoint book (actors/checkpoints.hpp), restarts, lost rounds, its program's
/// failures, measured rates, GPU time, loss and placement history.
///
/// Its phases are named behaviours:
///   waiting   between rounds (queued, preempted, or its round closed): node reports refused;
///   in_round  placed in a round: it accepts that round's reports from the node actors its
///             assignment lists (by actor address), and no others;
///   ended     finished, failed or cancelled, its last round closed: every report refused.
///
/// A round, as the job sees it (actors/README.md has the whole flow):
///   1. scheduler -> job: (view_atom, round start id). The round boundary: the job closes its
///      round (a cancel a client asked for takes effect now) and answers with (view_atom, the
///      id, its job_snapshot), a message, not a response: CAF 0.17 keeps an actor's pending
///      responses in a flat map (a vector searched and erased in place), so thousands of
///      requests in flight cost quadratic time (10,000 jobs: ~100 ms a round); from which the
///      scheduler builds the policy's view and the dispatch of the job. Every report of the
///      round is in its mailbox ahead of the request: a node sends its reports before its
///      round_done, CAF enqueues a message when it is sent (the middleman delivers one
///      connection's messages in order), and the scheduler asks only after every live node's
///      round_done (or its loss).
///   2. scheduler -> job: job_assignment. Its pieces this round (placed) or none (left out).
///   3. node -> job: copy_started, progress_report, checkpoint_done, job_finished (the node
///      also tells the scheduler its copy_started: dispatch latency, without a hop through
///      the job). Measured rates go to the scheduler as rate_sample, a failed checkpoint write
///      as write_failed_atom.
///   4. scheduler -> job: node_lost_atom when a node of its round is lost: the round's progress
///      is lost and the job's checkpoint writers are fenced.
/// Whenever its state changes (its life: placed after waiting, left out after running,
/// finished, failed, cancelling, cancelled; a node lost) the job pushes a job_snapshot to the
/// scheduler, which keeps the latest one to answer clients
/// without asking every job. Messages a job takes from the scheduler are refused from anyone
/// else; a cancel only from an actor of its own process. The job quits when its scheduler
/// goes down.
///
/// Nothing of a copy's steps goes through a job actor: a copy's parts synchronise directly
/// through the nodes' aggregators (actors/copy_round.hpp).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/checkpoints.hpp"
#include "actors/interfaces.hpp"
#include "actors/job_messages.hpp"
#include "actors/journal_records.hpp"
#include "actors/protocol.hpp"
#include "runtime/core/job_file.hpp"
#include "actors/job_life.hpp"

namespace tessera::actors {

/// Settings of one job actor, from the scheduler.
struct job_config {
  run_job spec;                         ///< the job (its job-type key as run_rates gave it)
  std::vector<std::string> rank_types;  ///< GPU type of each rank of the cluster file
  double round_length = 1;              ///< seconds per round (the slow-start warning)
  std::string checkpoint_dir;           ///< where its fence file is written
  std::uint64_t epoch_base = 0;         ///< its first fencing epoch (scheduler_config)
  /// A resume's record of the job (actors/journal_records.hpp): its state, step, confirmed
  /// checkpoints and a cancel that was waiting. None for a new job.
  std::optional<restored_job> restored;
  checkpoint_pin pinned;  ///< checkpoint files not to remove yet (the journal names them)
};

/// What a job actor knows of its job.
struct job_data {
  run_job spec;                            ///< as submitted
  job_state life = job_state::queued;      ///< actors/job_life.hpp
  bool cancel_requested = false;           ///< takes effect at the next round boundary
  std::string failure;                     ///< the last failure of its program
  int program_failures = 0;                ///< rounds its program failed in
  double startup_sum = 0;                  ///< its program's start-to-hello times, summed
  int startups = 0;                        ///< how many are summed
  bool slow_start_told = false;            ///< the slow-start warning was printed
  std::int64_t step = 0;                   ///< step of its latest checkpoint
  double run_time = 0;                     ///< seconds it held GPUs
  double gpu_seconds = 0;                  ///< GPUs x seconds it held
  int last_type = -1;                      ///< live-cluster type of the last round
  std::uint64_t live_generation = 0;       ///< the live cluster last_type indexes
  int last_rank = -1;                      ///< node of its last round, -1 if never ran
  double last_busy = 0;                    ///< GPU-seconds it ran in its last round
  std::int64_t round = -1;                 ///< round of its latest assignment
  caf::actor_clock::time_point run_start;  ///< when the run started
  int round_rank = -1;                     ///< node running copy 0 this round, -1 if none
  int round_gpus = 0;                      ///< GPUs it holds this round (all copies)
  std::vector<copy_piece> pieces;          ///< this round: its parts, by copy then rank
  int reports_left = 0;                    ///< pieces of this round not reported yet
  bool reported = false;                   ///< this round's progress arrived (every piece)
  bool round_failed = false;               ///< this round's progress is lost
  std::uint32_t sync_epoch = 0;            ///< bumped after a failed synchronisation
  int rounds = 0;                          ///< rounds it was scheduled in
  double first_start = -1;                 ///< seconds after the start of its first round
  int max_copies = 0;                      ///< most copies it ran as in one round
  bool reached_target = false;             ///< finished by reaching its target loss
  double finish = -1;                      ///< seconds after the start
  double loss = 0;                         ///< latest training loss
  double accuracy = 0;                     ///< final held-out accuracy
  int restarts = 0;                        ///< rounds it resumed on another node
  int lost_rounds = 0;                     ///< rounds lost to node failures
  /// Starts before its latest checkpoint; for a program, also rounds whose process resumed
  /// from before the step the round ordered (its own checkpoint was older: work redone).
  int regressions = 0;
  std::int64_t round_step = 0;             ///< `step` when the current round was assigned
  std::vector<double> planned;             ///< per rank: planned GPU-seconds
  std::vector<double> busy;                ///< per rank: GPU-seconds it ran
  std::vector<double> throughput;          ///< per rank: last measured steps/s
  std::map<std::string, double> measured;  ///< per GPU type: measured steps/s
  job_checkpoints ckpt;                    ///< its checkpoints and their counters
  std::deque<placement> history;           ///< its parts in its last 100 rounds
  double round_rate = 0;                   ///< steps/s of copy 0 in its latest round
};

/// A fresh job of `cfg` (queued, no checkpoint).
job_data make_job_data(const job_config& cfg);

/// The state a client sees: the job's life, or "cancelling" while a cancel waits for the round
/// boundary.
std::string shown_state(const job_data& j);

/// The job as clients see it (docs/api.md, "job"), its placements with `placements`.
job_status status_of(const job_data& j, bool placements = true);

/// What the scheduler keeps of the job (see job_snapshot).
job_snapshot snapshot_of(const job_data& j);

/// Adds a part of a round to a job's placement history, which keeps its last 100 rounds.
void note_placement(std::deque<placement>& history, const placement& p);

/// How the job ended (or where it stands): the one place a job_summary is built. Without
/// `per_rank` its per-rank vectors stay empty (what clients are shown).
job_summary summary_of(const job_data& j, bool per_rank = true);

/// Records the round of `a` in `j` (pieces, restarts, planned time, history, counters) and
/// moves its life (placed or left out). False, changing nothing, when the transition is
/// illegal (an ended job); the refusal is logged to `log`.
bool apply_assignment(job_data& j, const job_assignment& a, std::ostream& log);

/// A job actor's phases, each a behaviour (see the file comment).
struct job_phases {
  caf::behavior waiting, in_round, ended;
};

/// Mutable state of a job actor.
struct job_actor_state {
  job_config cfg;                            ///< settings
  scheduler_job_api scheduler;               ///< its scheduler: assignments come from it only
  job_data job;                              ///< the job
  std::map<caf::actor_addr, int> reporters;  ///< node actors of its open round -> rank
  std::int64_t dropped = 0;                  ///< reports refused (not from a node of its round)
  job_phases phases;                         ///< its behaviours, built once
  static inline const char* name = "tessera.job";  ///< actor name for logs
};

/// The job actor's behaviour (waiting until its first assignment).
caf::behavior job_actor(caf::stateful_actor<job_actor_state>* self, job_config cfg,
                        caf::actor scheduler);

}  // namespace tessera::actors
