#pragma once
/// @file journal_records.hpp
/// What a served cluster writes to its journal (runtime/service/journal.hpp), one JSON object per
/// record, and how `tessera serve --resume` reads its jobs back. Plain functions: the
/// scheduler calls them, the tests call them without actors.
///
/// Records ("t" is the type):
///   {"t":"submit","jobs":{"job":[...]}}   an accepted submission, in the job file's own
///                                          shape (runtime/core/job_file.hpp reads it back), every
///                                          id given; acknowledged to the client only once
///                                          on disk
///   {"t":"state","id":3,"state":"finished","step":400,"round":12,"at":95.2,"end":{...}}
///                                          a job's life changed (actors/job_life.hpp); a
///                                          job that ended carries what it ended with (JCT's
///                                          finish, loss, accuracy, restarts: job_history)
///   {"t":"cancel","id":3}                  a client's cancel, before its round boundary
///   {"t":"ckpt","id":3,"path":"...","round":12,"step":400,"at":95.2}
///                                          a checkpoint the scheduler confirmed
/// "at" is cluster time: seconds the cluster has run, summed over its resumes (a resumed
/// scheduler's clock starts at the newest "at"), so arrivals, finishes and JCTs written before a
/// crash stay comparable with those after it.
/// Replaying them in order gives each job its spec, its last state, a pending cancel and its
/// last two confirmed checkpoints: a job queued, running or preempted at the crash comes
/// back queued (or preempted, when it has a checkpoint) and resumes from that checkpoint; a
/// finished, failed or cancelled job comes back ended, as it ended, and never runs again.
/// Replay trusts what was accepted: the file system is not consulted for ended jobs, and one
/// job that cannot come back (its record no longer reads; its program's workdir is gone)
/// comes back failed with the reason, never stopping the others.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/checkpoints.hpp"
#include "runtime/core/job_file.hpp"
#include "actors/job_life.hpp"
#include "actors/protocol.hpp"
#include "runtime/core/result.hpp"

namespace tessera::actors {

/// What a job ended with, kept so that a resumed cluster shows it as it was (job_summary's
/// fields of the same names; times in cluster time).
struct job_history {
  double first_start = -1;   ///< start of its first round (s)
  double finish = -1;        ///< when it ended (s)
  std::int64_t steps = 0;    ///< its final step
  double run_time = 0;       ///< seconds it held GPUs
  double gpu_seconds = 0;    ///< GPUs x seconds it held
  double loss = 0;           ///< final training loss
  double accuracy = 0;       ///< final held-out accuracy
  int restarts = 0;          ///< rounds it resumed on another node
  int lost_rounds = 0;       ///< rounds lost to node failures
  int rounds = 0;            ///< rounds it was scheduled in
  int max_copies = 0;        ///< most copies in one round
  int program_failures = 0;  ///< rounds its program failed in
  bool reached_target = false;
  std::string failure;  ///< why it failed ("" unless it did)
};

/// The history of a job's status (the snapshot the scheduler journals when a job ends).
job_history history_of(const job_status& s);

/// A job as a journal gives it back.
struct restored_job {
  run_job spec;                              ///< as submitted (its arrival in cluster time)
  job_state life = job_state::queued;        ///< its last state
  bool cancel_requested = false;             ///< a cancel waited for its round boundary
  std::int64_t step = 0;                     ///< step of its newest confirmed checkpoint
  std::vector<checkpoint_file> checkpoints;  ///< its last two confirmed, oldest first
  std::optional<job_history> ended;          ///< what it ended with (ended jobs)
  /// Its submission as written, when it no longer reads back (it came back failed).
  std::string unreadable;
};

/// A journal read back.
struct restored_cluster {
  std::vector<restored_job> jobs;             ///< in submission order
  std::int64_t last_round = -1;               ///< the newest round any record names
  double clock = 0;                           ///< the newest cluster time any record names (s)
  std::vector<std::string> failed_at_replay;  ///< jobs that came back failed, and why
};

std::string submit_record(const std::vector<run_job>& jobs);
/// A job's new state at cluster time `at`; `ended` for a job that ended.
std::string state_record(std::int64_t id, job_state s, std::int64_t step, std::int64_t round,
                         double at = 0, const job_history* ended = nullptr);
std::string cancel_record(std::int64_t id);
std::string checkpoint_record(std::int64_t id, const checkpoint_file& f, double at = 0);

/// Replays `records` (a journal's payloads, in order); an error naming the record's index
/// for one that is not a record of this file's kinds, or names a job never submitted. A job
/// of a submission that no longer reads back, and an open program job whose workdir is gone,
/// come back failed (listed in failed_at_replay).
result<restored_cluster> replay_journal(const std::vector<std::string>& records);

/// The records that stand for `c` alone (a submission per job, its state, its cancel and
/// checkpoints): what a journal is compacted to at a resume.
std::vector<std::string> compacted_records(const restored_cluster& c);

}  // namespace tessera::actors
