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
///   {"t":"state","id":3,"state":"finished","step":400,"round":12}
///                                          a job's life changed (actors/job_life.hpp)
///   {"t":"cancel","id":3}                  a client's cancel, before its round boundary
///   {"t":"ckpt","id":3,"path":"...","round":12,"step":400}
///                                          a checkpoint the scheduler confirmed
/// Replaying them in order gives each job its spec, its last state, a pending cancel and its
/// last two confirmed checkpoints: a job queued, running or preempted at the crash comes
/// back queued (or preempted, when it has a checkpoint) and resumes from that checkpoint; a
/// finished, failed or cancelled job comes back ended and never runs again.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/checkpoints.hpp"
#include "runtime/core/job_file.hpp"
#include "actors/job_life.hpp"
#include "runtime/core/result.hpp"

namespace tessera::actors {

/// A job as a journal gives it back.
struct restored_job {
  run_job spec;                              ///< as submitted (arrival 0: it is there at once)
  job_state life = job_state::queued;        ///< its last state
  bool cancel_requested = false;             ///< a cancel waited for its round boundary
  std::int64_t step = 0;                     ///< step of its newest confirmed checkpoint
  std::vector<checkpoint_file> checkpoints;  ///< its last two confirmed, oldest first
};

/// A journal read back.
struct restored_cluster {
  std::vector<restored_job> jobs;  ///< in submission order
  std::int64_t last_round = -1;    ///< the newest round any record names
};

std::string submit_record(const std::vector<run_job>& jobs);
std::string state_record(std::int64_t id, job_state s, std::int64_t step, std::int64_t round);
std::string cancel_record(std::int64_t id);
std::string checkpoint_record(std::int64_t id, const checkpoint_file& f);

/// Replays `records` (a journal's payloads, in order); an error naming the record's index
/// for one that is not a record of this file's kinds, or names a job never submitted.
result<restored_cluster> replay_journal(const std::vector<std::string>& records);

/// The records that stand for `c` alone (a submission per job, its state, its cancel and
/// checkpoints): what a journal is compacted to at a resume.
std::vector<std::string> compacted_records(const restored_cluster& c);

}  // namespace tessera::actors
