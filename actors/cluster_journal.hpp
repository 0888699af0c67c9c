#pragma once
/// @file cluster_journal.hpp
/// A served cluster's journal as the scheduler uses it: the records of
/// actors/journal_records.hpp written to runtime/service/journal.hpp's file. Thread-safe (the
/// journal is), so any actor of the scheduler's process may note what it owns.
///
/// A submission is acknowledged only once its record is on disk: `submitted` calls back
/// (on the journal's writer thread) when it is, or with the error. State changes, cancels
/// and checkpoints are written the same way but nobody waits for them: group commit puts
/// them in the next batch, and a crash before it loses at most the changes of that moment,
/// which a resume redoes (a job resumes from the checkpoint the journal names).
/// When the disk refuses a write (full), submissions are refused at once (the client gets
/// 503 and may retry) and state changes are held in memory and written, in order, when the
/// disk takes them again; meanwhile writable() is false, and the scheduler starts no round
/// of work (the jobs wait, as for a checkpoint directory that takes no writes), and the
/// checkpoint files the journal names are kept (names()), so a resume finds them.

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "actors/journal_records.hpp"
#include "runtime/service/journal.hpp"

namespace tessera::actors {

class cluster_journal {
 public:
  explicit cluster_journal(std::unique_ptr<journal> file) : file_(std::move(file)) {}

  /// Writes an accepted submission; `done` gets "" once it is on disk, else the error.
  void submitted(const std::vector<run_job>& jobs, std::function<void(std::string)> done);
  /// A job's life changed at cluster time `at`; `ended` for a job that ended.
  void state_changed(std::int64_t id, job_state s, std::int64_t step, std::int64_t round, double at,
                     const job_history* ended);
  /// A client cancelled a job (it takes effect at the round boundary).
  void cancel_requested(std::int64_t id);
  /// The scheduler confirmed a job's checkpoint.
  void checkpointed(std::int64_t id, const checkpoint_file& f, double at);
  /// Counters (records, fsyncs, write errors, held records) for the metrics.
  journal_stats stats() const { return file_->stats(); }
  /// True while writes succeed (and the journal has not failed for good).
  bool writable() const { return file_->trouble().empty() && file_->health(); }
  /// Why not, "" when writable.
  std::string trouble() const;
  /// True when a checkpoint record on disk names `path` (one of a job's last two): a resume
  /// would look for that file, so it must not be removed.
  bool names(const std::string& path) const;
  /// Jobs' checkpoints as a resume read them back (what names() starts from).
  void named_at_open(const std::vector<restored_job>& jobs);

 private:
  /// Appends `record` without waiting; held while the disk refuses it; a loss is logged.
  void note(std::string record, std::function<void()> on_disk = {});
  /// A checkpoint record of job `id` naming `path` is on disk.
  void on_disk(std::int64_t id, const std::string& path);
  std::unique_ptr<journal> file_;
  mutable std::mutex named_m;                               // guards named_
  std::map<std::int64_t, std::vector<std::string>> named_;  // per job, the last two paths
  std::multiset<std::string> named_paths_;                  // the paths of named_, for names()
  std::atomic<bool> in_trouble_{false};                     // a refusal was logged
};

/// What `tessera serve` starts from: the journal at `path` opened (created when missing) and
/// read back. With `resume`, its jobs are replayed and the file compacted to them; without,
/// a journal holding records is refused (an error telling to pass --resume or use a fresh
/// state directory), so a restart never silently drops a cluster's queue.
struct opened_cluster_journal {
  std::shared_ptr<cluster_journal> log;
  restored_cluster restored;
};
/// With `repair`, damage the journal's reader would refuse (a corrupt record, the last one
/// included) is dropped with everything after it, reported on stderr: an operator's choice.
result<opened_cluster_journal> open_cluster_journal(const std::string& path, bool resume,
                                                    bool repair = false);

}  // namespace tessera::actors
