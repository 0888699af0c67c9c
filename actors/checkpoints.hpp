#pragma once
/// @file checkpoints.hpp
/// The scheduler's side of job checkpoints, as plain functions and small types (no actors), so
/// the rules are unit-tested on their own:
/// - file names: one file per job and round (`job-<id>.r<round>.ckpt`), a fence file per job
///   (`job-<id>.fence`); a run owns these names for its jobs in its checkpoint directory;
/// - `checkpoint_book`, per job: the last two checkpoints the scheduler confirmed (through
///   checkpoint_done), which one a copy resumes from and which it falls back to, the job's
///   fencing epoch;
/// - `stray_files`: what else of the run's jobs lies in the directory (unconfirmed files, files
///   no longer kept, temporary files of interrupted writes), to remove;
/// - `checkpoint_dir_health`: whether the directory takes writes (a failed write pauses every
///   job; a successful probe resumes them);
/// - what the scheduler does on each event (a copy's start, a confirmed or failed write, a lost
///   writer, a new round), on `job_checkpoints` and `run_checkpoints`, logging to a stream.
/// Why per-round names and fences: a writer declared lost may wake up and finish its write
/// later; under its own round's name it can never replace a newer file, and the fence makes it
/// give up before publishing at all (docs/design.md, "Checkpoint fencing and fallback").

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "actors/protocol.hpp"

namespace tessera::actors {

/// The checkpoint file of job `job` written at the end of round `round` in `dir`.
std::string checkpoint_file_path(const std::string& dir, std::int64_t job, std::int64_t round);

/// The directory a program job (kind "program") keeps its own checkpoints in:
/// "<dir>/job-<id>" (never taken for a stray file: it has no ".r<round>.ckpt" tail).
std::string program_checkpoint_dir(const std::string& dir, std::int64_t job);

/// The fence file of job `job` in `dir` (runtime/node/train/checkpoint.hpp, check_fence).
std::string fence_file_path(const std::string& dir, std::int64_t job);

/// A checkpoint the scheduler confirmed.
struct checkpoint_file {
  std::string path;         ///< where it is
  std::int64_t round = -1;  ///< round at whose end it was written
  std::int64_t step = 0;    ///< the job's step counter in it
};

/// What the scheduler knows of one job's checkpoints. Invariants: at most two files are kept,
/// newest first, with strictly decreasing rounds; every kept file was confirmed and not found
/// bad since.
class checkpoint_book {
 public:
  /// A book whose fencing epochs start at `epoch` (a run's base: see scheduler_config).
  explicit checkpoint_book(std::uint64_t epoch = 0) : epoch_(epoch) {}

  /// `f` is on disk (checkpoint_done). Kept when newer than every kept file, else ignored (a
  /// late or repeated report). Returns the paths no longer kept, to remove.
  std::vector<std::string> confirm(const checkpoint_file& f);

  /// A node found `path` unusable (corrupt, truncated, missing): it is no longer kept. True
  /// when it was kept (so a report from several parts of a copy counts once).
  bool forget(const std::string& path);

  /// The newest kept file (a copy resumes from it), null when none.
  const checkpoint_file* resume() const { return kept_.empty() ? nullptr : &kept_[0]; }
  /// The one before (a copy falls back to it when the newest is unusable), null when none.
  const checkpoint_file* fallback() const { return kept_.size() < 2 ? nullptr : &kept_[1]; }
  /// The step a copy resumes from: the newest kept file's, 0 when none.
  std::int64_t step() const { return kept_.empty() ? 0 : kept_[0].step; }
  /// True when `path` is kept.
  bool keeps(const std::string& path) const;

  /// The epoch this round's writers get.
  std::uint64_t epoch() const { return epoch_; }
  /// A writer of the job was declared lost: writers from now on get a newer epoch, returned
  /// (to be written to the job's fence file, so the lost one cannot publish).
  std::uint64_t fence() { return ++epoch_; }

 private:
  std::vector<checkpoint_file> kept_;  // newest first
  std::uint64_t epoch_ = 0;
};

/// True while something durable names checkpoint file `path` (a served cluster's journal: a
/// resume would look for it), so it is not removed yet; a later round's sweep removes it once
/// nothing does. Empty: nothing pins files.
using checkpoint_pin = std::function<bool(const std::string& path)>;

/// The names among `names` (entries of the checkpoint directory) to remove: checkpoint files
/// of a job in `books` that its book does not keep, and temporary files of interrupted writes
/// of those jobs' checkpoints or fences. Files of other jobs and other names are left alone.
std::vector<std::string> stray_files(const std::string& dir, const std::vector<std::string>& names,
                                     const std::map<std::int64_t, const checkpoint_book*>& books);

/// `paths` without those `pinned` holds (all of them when it is empty).
std::vector<std::string> unpinned(std::vector<std::string> paths, const checkpoint_pin& pinned);

/// Removes `paths` (a path already gone is fine). Returns what failed, "" when nothing did.
std::string remove_files(const std::vector<std::string>& paths);

/// The entry names of directory `dir` (none when it cannot be listed).
std::vector<std::string> list_directory(const std::string& dir);

/// Whether the checkpoint directory takes writes, as the scheduler last saw it.
class checkpoint_dir_health {
 public:
  /// A write or probe failed for `why`. True when this pauses the jobs (it was healthy).
  bool failed(const std::string& why);
  /// A probe succeeded. True when this resumes the jobs (it was paused).
  bool recovered();
  /// Jobs wait: the directory does not take writes.
  bool paused() const { return paused_; }
  /// Why it was paused (the first failure's text).
  const std::string& reason() const { return reason_; }
  /// How many times it was paused.
  int pauses() const { return pauses_; }

 private:
  bool paused_ = false;
  std::string reason_;
  int pauses_ = 0;
};

/// The checkpoint side of one job as the scheduler tracks it.
struct job_checkpoints {
  checkpoint_book book;                    ///< its confirmed files and epoch
  checkpoint_pin pinned{};                 ///< files not to remove yet
  std::int32_t fallbacks = 0;              ///< starts from the fallback: the newest was unusable
  std::int32_t restarts_from_scratch = 0;  ///< starts at step 0: no file was usable
  std::int32_t write_failures = 0;         ///< rounds whose checkpoint could not be written
  std::int32_t paused_rounds = 0;          ///< rounds it waited for the directory
};

/// The checkpoint directory of a run as the scheduler tracks it.
struct run_checkpoints {
  std::string dir;               ///< the shared checkpoint directory
  checkpoint_dir_health health;  ///< whether it takes writes
  /// Fault injection for tests (scheduler_hooks): asked at each probe after `round`; a
  /// non-zero errno fails the probe as the system would.
  std::function<int(std::int64_t round)> probe_errno;
  checkpoint_pin pinned{};  ///< stray files not to remove yet
};

/// A copy of job `job` started from `source`, having found `bad_files` unusable (`why`). On a
/// fallback or a restart from scratch the files are forgotten and removed, and the first
/// report of them is counted and logged. Returns true when the job's state went back to an
/// older checkpoint (or to step 0) this round.
bool note_start(job_checkpoints& jc, std::int64_t job, state_source source,
                const std::vector<std::string>& bad_files, const std::string& why,
                std::ostream& log);

/// Job `job`'s checkpoint `f` is on disk (checkpoint_done): kept, and the file no longer kept
/// removed unless pinned (the round sweep of before_round removes it later).
void note_confirmed(job_checkpoints& jc, std::int64_t job, const checkpoint_file& f,
                    std::ostream& log);

/// Job `job`'s round checkpoint could not be written (`why`): counted; the directory pauses
/// every job (logged once, naming the directory and the system's reason).
void note_write_failure(job_checkpoints& jc, run_checkpoints& rc, std::int64_t job,
                        const std::string& why, std::ostream& log);

/// Job `job`'s round checkpoint could not be written (`why`): the directory pauses every job
/// (logged once, naming the directory and the system's reason). The job counts its own
/// failure (job_checkpoints::write_failures).
void note_dir_failure(run_checkpoints& rc, std::int64_t job, const std::string& why,
                      std::ostream& log);

/// A node running job `job` was declared lost: its writers from now on get a newer epoch,
/// written to the job's fence file so the lost one cannot publish (logged when that fails).
void fence_job(job_checkpoints& jc, const run_checkpoints& rc, std::int64_t job, std::ostream& log);

/// Before planning the round after `round`: while the directory is paused, probes it and
/// resumes the jobs when it takes a file again (logged once); removes the stray files of the
/// jobs in `books` that nothing pins. Returns true when the jobs must still wait.
bool before_round(run_checkpoints& rc, std::int64_t round,
                  const std::map<std::int64_t, const checkpoint_book*>& books, std::ostream& log);

}  // namespace tessera::actors
