#include "actors/checkpoints.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "runtime/node/train/checkpoint.hpp"

namespace tessera::actors {

namespace {

/// The job id of a name "job-<id>.<rest>" with `rest` accepted by `tail`, or -1.
template <class Tail>
std::int64_t job_of_name(const std::string& name, Tail tail) {
  static const std::string head = "job-";
  if (name.rfind(head, 0) != 0) return -1;
  const char* begin = name.data() + head.size();
  const char* end = name.data() + name.size();
  std::int64_t id = -1;
  const auto r = std::from_chars(begin, end, id);
  if (r.ec != std::errc() || r.ptr == begin || r.ptr == end || *r.ptr != '.') return -1;
  return tail(std::string(r.ptr + 1, end)) ? id : -1;
}

/// "r<digits>.ckpt": the tail of a checkpoint file name.
bool checkpoint_tail(const std::string& t) {
  static const std::string ext = ".ckpt";
  if (t.size() <= 1 + ext.size() || t[0] != 'r' ||
      t.compare(t.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  const auto digits = t.substr(1, t.size() - 1 - ext.size());
  return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The tail of a temporary file of a checkpoint or fence write: "<name>.tmp.<suffix>".
bool temporary_tail(const std::string& t) {
  const auto at = t.find(".tmp.");
  if (at == std::string::npos) return false;
  const auto base = t.substr(0, at);
  return base == "fence" || checkpoint_tail(base);
}

}  // namespace

std::string checkpoint_file_path(const std::string& dir, std::int64_t job, std::int64_t round) {
  return (std::filesystem::path(dir) /
          ("job-" + std::to_string(job) + ".r" + std::to_string(round) + ".ckpt"))
      .string();
}

std::string program_checkpoint_dir(const std::string& dir, std::int64_t job) {
  return (std::filesystem::path(dir) / ("job-" + std::to_string(job))).string();
}

std::string fence_file_path(const std::string& dir, std::int64_t job) {
  return (std::filesystem::path(dir) / ("job-" + std::to_string(job) + ".fence")).string();
}

std::vector<std::string> checkpoint_book::confirm(const checkpoint_file& f) {
  if (!kept_.empty() && f.round <= kept_[0].round) return {};
  kept_.insert(kept_.begin(), f);
  std::vector<std::string> dropped;
  while (kept_.size() > 2) {
    dropped.push_back(kept_.back().path);
    kept_.pop_back();
  }
  return dropped;
}

bool checkpoint_book::forget(const std::string& path) {
  const auto it = std::find_if(kept_.begin(), kept_.end(),
                               [&](const checkpoint_file& f) { return f.path == path; });
  if (it == kept_.end()) return false;
  kept_.erase(it);
  return true;
}

bool checkpoint_book::keeps(const std::string& path) const {
  return std::any_of(kept_.begin(), kept_.end(),
                     [&](const checkpoint_file& f) { return f.path == path; });
}

std::vector<std::string> stray_files(const std::string& dir, const std::vector<std::string>& names,
                                     const std::map<std::int64_t, const checkpoint_book*>& books) {
  std::vector<std::string> out;
  for (const auto& name : names) {
    const bool hidden = !name.empty() && name[0] == '.';
    const std::string bare = hidden ? name.substr(1) : name;
    const std::int64_t job =
        hidden ? job_of_name(bare, temporary_tail) : job_of_name(bare, checkpoint_tail);
    const auto book = books.find(job);
    if (book == books.end()) continue;
    const std::string path = (std::filesystem::path(dir) / name).string();
    if (hidden || !book->second->keeps(path)) out.push_back(path);
  }
  return out;
}

std::vector<std::string> unpinned(std::vector<std::string> paths, const checkpoint_pin& pinned) {
  if (pinned) paths.erase(std::remove_if(paths.begin(), paths.end(), pinned), paths.end());
  return paths;
}

std::string remove_files(const std::vector<std::string>& paths) {
  std::string failed;
  for (const auto& p : paths)
    if (::unlink(p.c_str()) != 0 && errno != ENOENT)
      failed += (failed.empty() ? "" : "; ") + p + ": " + std::strerror(errno);
  return failed;
}

std::vector<std::string> list_directory(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  return names;
}

bool checkpoint_dir_health::failed(const std::string& why) {
  if (paused_) return false;
  paused_ = true;
  reason_ = why;
  ++pauses_;
  return true;
}

bool checkpoint_dir_health::recovered() {
  if (!paused_) return false;
  paused_ = false;
  return true;
}

bool note_start(job_checkpoints& jc, std::int64_t job, state_source source,
                const std::vector<std::string>& bad_files, const std::string& why,
                std::ostream& log) {
  if (source != state_source::fallback && source != state_source::scratch) return false;
  int newly = 0;
  for (const auto& p : bad_files) newly += jc.book.forget(p) ? 1 : 0;
  remove_files(bad_files);      // never to be loaded again; a failure leaves a stray for later
  if (newly == 0) return true;  // another part of the job reported it first
  if (source == state_source::fallback) {
    ++jc.fallbacks;
    log << "tessera: job " << job << ": " << why << "; resumed from its previous checkpoint "
        << (jc.book.resume() ? jc.book.resume()->path : std::string("?")) << " at step "
        << jc.book.step() << '\n';
  } else {
    ++jc.restarts_from_scratch;
    log << "tessera: job " << job << ": " << why
        << "; no usable checkpoint is left, it restarts from step 0\n";
  }
  return true;
}

void note_confirmed(job_checkpoints& jc, std::int64_t job, const checkpoint_file& f,
                    std::ostream& log) {
  const auto failed = remove_files(unpinned(jc.book.confirm(f), jc.pinned));
  if (!failed.empty())
    log << "tessera: job " << job << ": cannot remove an old checkpoint (" << failed
        << "); it is retried each round\n";
}

void note_write_failure(job_checkpoints& jc, run_checkpoints& rc, std::int64_t job,
                        const std::string& why, std::ostream& log) {
  ++jc.write_failures;
  note_dir_failure(rc, job, why, log);
}

void note_dir_failure(run_checkpoints& rc, std::int64_t job, const std::string& why,
                      std::ostream& log) {
  if (rc.health.failed(why))
    log << "tessera: checkpoint directory " << rc.dir << " does not take writes (job " << job
        << ": " << why << "); every job waits until it does, probed each round\n";
}

void fence_job(job_checkpoints& jc, const run_checkpoints& rc, std::int64_t job,
               std::ostream& log) {
  const auto epoch = jc.book.fence();
  if (auto st = train::write_fence(fence_file_path(rc.dir, job), epoch); !st)
    log << "tessera: job " << job << ": cannot fence its lost writer (" << st.err().message
        << "); per-round file names still keep its late write from replacing a newer one\n";
}

bool before_round(run_checkpoints& rc, std::int64_t round,
                  const std::map<std::int64_t, const checkpoint_book*>& books, std::ostream& log) {
  if (rc.health.paused()) {
    train::write_options opt;
    if (rc.probe_errno) opt.inject_errno = [&] { return rc.probe_errno(round); };
    if (train::probe_directory(rc.dir, opt) && rc.health.recovered())
      log << "tessera: checkpoint directory " << rc.dir << " takes writes again; the jobs resume\n";
  }
  // Stray files of interrupted or refused writes; a failure is retried next round.
  remove_files(unpinned(stray_files(rc.dir, list_directory(rc.dir), books), rc.pinned));
  return rc.health.paused();
}

}  // namespace tessera::actors
