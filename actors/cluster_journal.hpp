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

#include <functional>
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
  /// A job's life changed.
  void state_changed(std::int64_t id, job_state s, std::int64_t step, std::int64_t round);
  /// A client cancelled a job (it takes effect at the round boundary).
  void cancel_requested(std::int64_t id);
  /// The scheduler confirmed a job's checkpoint.
  void checkpointed(std::int64_t id, const checkpoint_file& f);
  /// Counters (records, fsyncs) for the metrics.
  journal_stats stats() const { return file_->stats(); }

 private:
  /// Appends `record` without waiting; a failure is logged once.
  void note(std::string record);
  std::unique_ptr<journal> file_;
};

/// What `tessera serve` starts from: the journal at `path` opened (created when missing) and
/// read back. With `resume`, its jobs are replayed and the file compacted to them; without,
/// a journal holding records is refused (an error telling to pass --resume or use a fresh
/// state directory), so a restart never silently drops a cluster's queue.
struct opened_cluster_journal {
  std::shared_ptr<cluster_journal> log;
  restored_cluster restored;
};
result<opened_cluster_journal> open_cluster_journal(const std::string& path, bool resume);

}  // namespace tessera::actors
