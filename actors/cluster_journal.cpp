#include "actors/cluster_journal.hpp"

#include <sys/stat.h>

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
                                    std::int64_t round, double at, const job_history* ended) {
  note(state_record(id, s, step, round, at, ended));
}

void cluster_journal::cancel_requested(std::int64_t id) { note(cancel_record(id)); }

void cluster_journal::checkpointed(std::int64_t id, const checkpoint_file& f, double at) {
  if (f.path.empty()) return note(checkpoint_record(id, f, at));  // a program's own step
  note(checkpoint_record(id, f, at), [this, id, path = f.path] { on_disk(id, path); });
}

std::string cluster_journal::trouble() const {
  if (auto h = file_->health(); !h) return h.err().message;
  return file_->trouble();
}

bool cluster_journal::names(const std::string& path) const {
  std::lock_guard<std::mutex> lk(named_m);
  return named_paths_.count(path) > 0;  // asked per removed file: no scan over the jobs
}

void cluster_journal::named_at_open(const std::vector<restored_job>& jobs) {
  for (const auto& j : jobs)
    for (const auto& f : j.checkpoints)
      if (!f.path.empty()) on_disk(j.spec.spec.id, f.path);
}

void cluster_journal::on_disk(std::int64_t id, const std::string& path) {
  std::lock_guard<std::mutex> lk(named_m);
  auto& paths = named_[id];
  paths.push_back(path);
  named_paths_.insert(path);
  if (paths.size() > 2) {  // replay keeps the last two
    named_paths_.erase(named_paths_.find(paths.front()));
    paths.erase(paths.begin());
  }
}

void cluster_journal::note(std::string record, std::function<void()> on_disk) {
  auto done = [this, on_disk = std::move(on_disk)](const status& s) {
    if (!s) {
      std::cerr << "tessera: a journal record is lost (" << s.err().message
                << "); a resume would miss that change\n";
      return;
    }
    if (in_trouble_.exchange(false))
      std::cerr << "tessera: the journal writes again; the rounds go on\n";
    if (on_disk) on_disk();
  };
  if (auto st = file_->append(std::move(record), done, journal_delivery::wait_for_disk); !st)
    done(st);
  else if (!file_->trouble().empty() && !in_trouble_.exchange(true))
    std::cerr << "tessera: the journal cannot write (" << file_->trouble()
              << "); state changes are held in memory until it can, submissions are refused "
                 "and no round starts\n";
}

result<opened_cluster_journal> open_cluster_journal(const std::string& path, bool resume,
                                                    bool repair) {
  struct stat sb {};
  if (resume && ::lstat(path.c_str(), &sb) != 0 && errno == ENOENT)
    return error{error_kind::invalid_input,
                 "--resume: " + path +
                     " does not exist, so there is nothing to resume (a mistyped --state-dir?); "
                     "drop --resume to start a fresh cluster"};
  journal_options opt;
  opt.drop_corrupt = repair;
  opt.repair = "serve --resume --repair-journal";
  auto opened = journal::open(path, opt);
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
  out.log->named_at_open(out.restored.jobs);
  return out;
}

}  // namespace tessera::actors
