#include "actors/cluster_journal.hpp"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <iostream>

namespace tessera::actors {

void cluster_journal::submitted(const std::vector<run_job>& jobs,
                                std::function<void(std::string)> done) {
  auto st = file_->append(submit_record(jobs),
                          [done](const status& s) { done(s ? std::string() : s.err().message); });
  if (!st) done(st.err().message);
}

void cluster_journal::state_changed(std::int64_t id, job_state s, std::int64_t step,
                                    std::int64_t round) {
  note(state_record(id, s, step, round));
}

void cluster_journal::cancel_requested(std::int64_t id) { note(cancel_record(id)); }

void cluster_journal::checkpointed(std::int64_t id, const checkpoint_file& f) {
  note(checkpoint_record(id, f));
}

void cluster_journal::note(std::string record) {
  static std::atomic<bool> told{false};
  auto tell = [](const status& s) {
    if (!s && !told.exchange(true))
      std::cerr << "tessera: the journal takes no more records (" << s.err().message
                << "); a resume would miss the changes from now on\n";
  };
  if (auto st = file_->append(std::move(record), tell); !st) tell(st);
}

result<opened_cluster_journal> open_cluster_journal(const std::string& path, bool resume) {
  struct stat sb {};
  if (resume && ::lstat(path.c_str(), &sb) != 0 && errno == ENOENT)
    return error{error_kind::invalid_input,
                 "--resume: " + path +
                     " does not exist, so there is nothing to resume (a mistyped --state-dir?); "
                     "drop --resume to start a fresh cluster"};
  auto opened = journal::open(path);
  if (!opened) return opened.err();
  if (opened->damage) std::cerr << "tessera: " << opened->damage->message << '\n';
  opened_cluster_journal out;
  if (!opened->records.empty() && !resume)
    return error{error_kind::invalid_input,
                 path + " holds a cluster's jobs (" + std::to_string(opened->records.size()) +
                     " records): pass --resume to carry on with them, or use a fresh "
                     "--state-dir"};
  if (resume) {
    auto replayed = replay_journal(opened->records);
    if (!replayed) return error{error_kind::invalid_input, path + ": " + replayed.err().message};
    out.restored = std::move(*replayed);
    if (auto st = opened->file->compact_sync(compacted_records(out.restored)); !st) return st.err();
  }
  out.log = std::make_shared<cluster_journal>(std::move(opened->file));
  return out;
}

}  // namespace tessera::actors
