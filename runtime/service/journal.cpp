#include "runtime/service/journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "runtime/core/crc32.hpp"
#include "runtime/core/detail/text.hpp"

namespace tessera {

namespace {

/// The temporary file a compaction writes is the journal's path plus this.
constexpr const char* compact_suffix = ".compact";
/// The lock file is the journal's path plus this.
constexpr const char* lock_suffix = ".lock";
/// How much of a new file is encoded before it is written.
constexpr std::size_t write_chunk = std::size_t{1} << 20;

/// The system's text for errno value `err` (thread-safe, unlike strerror).
std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

/// An io error "<path>: <what>: <reason>".
error io_error(const std::string& path, const std::string& what, int err) {
  return error{error_kind::io, path + ": " + what + ": " + errno_text(err)};
}

/// The errno value the test hook injects before `step`, 0 for none.
int injected(const journal_options& opt, journal_step step) {
  return opt.inject_errno ? opt.inject_errno(step) : 0;
}

/// Writes all of `n` bytes at `offset`, retrying short writes and EINTR; 0 or the errno.
int pwrite_all(int fd, const char* p, std::size_t n, std::uint64_t offset) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
    offset += static_cast<std::uint64_t>(w);
  }
  return 0;
}

/// Reads all of `fd` (a regular file of `size` bytes) into `out`; 0 or the errno.
int read_all(int fd, std::uint64_t size, std::string& out) {
  out.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) break;  // the file shrank meanwhile: read what is there
    done += static_cast<std::size_t>(r);
  }
  out.resize(done);
  return 0;
}

/// fsyncs directory `dir`; 0 or the errno.
int sync_dir(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return errno;
  const int err = ::fsync(dfd) == 0 ? 0 : errno;
  ::close(dfd);
  return err;
}

/// The directory holding `path` ("." for a bare name).
std::string dir_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

/// Closes a descriptor when it goes out of scope, unless released.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

/// A new journal file put in place by write_replacement.
struct replacement {
  int fd = -1;             ///< the new file, open for appends (-1 when it is not in place)
  std::uint64_t size = 0;  ///< its bytes
  status st;               ///< an error, before or after the rename (fd >= 0: after)
};

/// The steps write_replacement injects faults at: creating a journal or compacting one.
struct replace_steps {
  journal_step write, sync, rename, sync_dir;
};

/// Writes a journal of `records` to `<path>.compact`, fsyncs it, renames it over `path` and
/// fsyncs the directory. Before the rename, an error removes the temporary file and leaves
/// `path` as it was; after it, the new file is in place (and returned) but the rename may
/// not be durable.
replacement write_replacement(const std::string& path, const std::vector<std::string>& records,
                              const journal_options& opt, const replace_steps& steps) {
  const std::string tmp = path + compact_suffix;
  replacement out;
  fd_guard fd{::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)};
  if (fd.fd < 0) {
    out.st = io_error(path, "cannot create '" + tmp + "'", errno);
    return out;
  }
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    out.st = io_error(path, what, err);
    return out;
  };
  std::string buf = journal_file_header();
  auto flush = [&]() {
    int err = injected(opt, steps.write);
    if (err == 0) err = pwrite_all(fd.fd, buf.data(), buf.size(), out.size);
    out.size += buf.size();
    buf.clear();
    return err;
  };
  for (const auto& r : records) {
    buf += encode_journal_record(r);
    if (buf.size() >= write_chunk)
      if (const int err = flush(); err != 0) return fail("cannot write '" + tmp + "'", err);
  }
  if (const int err = flush(); err != 0) return fail("cannot write '" + tmp + "'", err);
  int err = injected(opt, steps.sync);
  if (err == 0 && ::fsync(fd.fd) != 0) err = errno;
  if (err != 0) return fail("cannot fsync '" + tmp + "'", err);
  err = injected(opt, steps.rename);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) return fail("cannot rename '" + tmp + "' over it", err);
  out.fd = fd.release();
  err = injected(opt, steps.sync_dir);
  if (err == 0) err = sync_dir(dir_of(path));
  if (err != 0) out.st = io_error(path, "replaced, but cannot fsync its directory", err);
  return out;
}

/// One queued request: an encoded record, or a compaction.
struct request {
  std::string bytes;                                   ///< the record's bytes
  std::optional<std::vector<std::string>> compaction;  ///< the records to compact to
  journal_callback done;
  journal_delivery delivery = journal_delivery::fail_fast;  ///< when the disk refuses it
};

}  // namespace

// ---- the writer --------------------------------------------------------------------------------

struct journal::state {
  state(std::string p, journal_options o) : path(std::move(p)), opt(std::move(o)) {}
  ~state() {
    if (fd >= 0) ::close(fd);
    if (lock_fd >= 0) ::close(lock_fd);
  }

  const std::string path;
  const journal_options opt;
  int lock_fd = -1;       // <path>.lock, flock'd while open
  int fd = -1;            // the journal file (the writer thread's once it runs)
  std::uint64_t end = 0;  // its size (the writer thread's once it runs)
  std::thread writer;

  mutable std::mutex m;  // guards queue, pending_bytes, stopping, failure, trouble_now
  std::condition_variable wake;
  std::deque<request> queue;
  std::size_t pending_bytes = 0;  // bytes of records accepted and not yet written or failed
  bool stopping = false;
  status failure;
  std::string trouble_now;  // why the disk refused the last batch; "" once one is written
  bool dirty_tail = false;  // the writer's: a refused batch's bytes may lie past `end`

  std::mutex close_m;  // serialises close()
  bool closed = false;
  status close_result;

  std::atomic<std::uint64_t> records{0}, bytes{0}, fsyncs{0}, compactions{0};
  std::atomic<std::uint64_t> file_records{0}, file_bytes{0}, write_errors{0};

  status lock();
  status read_back(opened_journal& out);
  status create();
  status enqueue(request r);
  void run();
  std::vector<request> next_batch();
  void write_batch(std::vector<request>& batch);
  void refused(std::vector<request>& batch, const error& e);
  /// In trouble with nothing to write: writes a page past the end and cuts it off again;
  /// the trouble clears when the disk took it.
  void probe();
  void compact_now(request& r);
  void fail(std::vector<request>& batch, const error& e);
  bool on_writer() const { return writer.get_id() == std::this_thread::get_id(); }
};

status journal::state::lock() {
  const std::string lock_path = path + lock_suffix;
  lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0) return io_error(path, "cannot open the lock file '" + lock_path + "'", errno);
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return error{error_kind::io, path + ": the journal is open elsewhere ('" + lock_path +
                                       "' is locked by this or another process)"};
    return io_error(path, "cannot lock '" + lock_path + "'", errno);
  }
  // Only the lock's holder writes the temporary file: one left there is from a crash.
  const std::string tmp = path + compact_suffix;
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT)
    return io_error(path, "cannot remove the leftover '" + tmp + "'", errno);
  return {};
}

status journal::state::create() {
  const replace_steps steps{journal_step::create, journal_step::create, journal_step::create,
                            journal_step::create};
  replacement r = write_replacement(path, {}, opt, steps);
  if (r.fd >= 0) fd = r.fd;
  if (!r.st) return r.st;
  end = r.size;
  return {};
}

status journal::state::read_back(opened_journal& out) {
  fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);  // never through a link
  if (fd < 0) return io_error(path, "cannot open the journal", errno);
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) return io_error(path, "cannot stat the journal", errno);
  if (!S_ISREG(sb.st_mode)) return error{error_kind::invalid_input, path + ": not a regular file"};
  std::string bytes;
  if (const int err = read_all(fd, static_cast<std::uint64_t>(sb.st_size), bytes); err != 0)
    return io_error(path, "cannot read the journal", err);
  auto scan = scan_journal(bytes, path, opt.drop_corrupt, opt.repair);
  if (!scan) return scan.err();
  end = scan->good_end;
  if (scan->damage) {
    // Cut the bad end off for good before any append lands after it.
    if (::ftruncate(fd, static_cast<off_t>(end)) != 0 || ::fsync(fd) != 0)
      return io_error(path, "cannot cut off its damaged end at byte " + std::to_string(end), errno);
  }
  out.records = std::move(scan->records);
  out.damage = std::move(scan->damage);
  return {};
}

status journal::state::enqueue(request r) {
  {
    std::lock_guard<std::mutex> lk(m);
    if (stopping) return error{error_kind::internal, path + ": the journal is closed"};
    if (!failure)
      return error{failure.err().kind,
                   "refused: the journal failed earlier: " + failure.err().message};
    if (!trouble_now.empty() && !r.compaction) {
      if (r.delivery == journal_delivery::fail_fast)
        return error{error_kind::io, "not accepted now: the journal cannot write (" + trouble_now +
                                         "); retried every " +
                                         detail::format_shortest(opt.retry_seconds) + " s"};
      if (pending_bytes + r.bytes.size() > opt.max_held_bytes)
        return error{error_kind::io, "not accepted: the journal cannot write (" + trouble_now +
                                         ") and already holds " + std::to_string(pending_bytes) +
                                         " bytes for the disk"};
    }
    pending_bytes += r.bytes.size();
    queue.push_back(std::move(r));
  }
  wake.notify_one();
  return {};
}

void journal::state::run() {
  for (;;) {
    std::vector<request> batch = next_batch();
    if (batch.empty()) {
      {
        std::lock_guard<std::mutex> lk(m);
        if (stopping) return;
      }
      probe();  // in trouble with nothing held: does the disk take bytes again?
      continue;
    }
    if (batch.front().compaction)
      compact_now(batch.front());
    else
      write_batch(batch);
  }
}

std::vector<request> journal::state::next_batch() {
  std::unique_lock<std::mutex> lk(m);
  const auto ready = [&] { return stopping || !queue.empty(); };
  // In trouble, wake for a probe every retry even when nothing is queued: a refused
  // submission holds nothing, and the trouble must still clear once the disk has room.
  if (trouble_now.empty())
    wake.wait(lk, ready);
  else
    wake.wait_for(lk, std::chrono::duration<double>(opt.retry_seconds), ready);
  std::vector<request> out;
  std::size_t size = 0;
  while (!queue.empty()) {
    request& next = queue.front();
    // A compaction is a batch of its own; records queued after it go to the new file.
    if (next.compaction && !out.empty()) break;
    if (!out.empty() && size + next.bytes.size() > opt.max_batch_bytes) break;
    size += next.bytes.size();
    out.push_back(std::move(next));
    queue.pop_front();
    if (out.back().compaction) break;
  }
  return out;
}

void journal::state::fail(std::vector<request>& batch, const error& e) {
  {
    std::lock_guard<std::mutex> lk(m);
    for (const auto& r : batch) pending_bytes -= r.bytes.size();
    if (failure) failure = error{e.kind, e.message + " (the journal refuses further appends)"};
  }
  for (auto& r : batch) r.done(e);
}

void journal::state::write_batch(std::vector<request>& batch) {
  if (const status h =
          [&] {
            std::lock_guard<std::mutex> lk(m);
            return failure;
          }();
      !h)
    return fail(batch, error{h.err().kind, "not written: " + h.err().message});
  if (dirty_tail && ::ftruncate(fd, static_cast<off_t>(end)) != 0)
    return refused(
        batch,
        io_error(path, "cannot cut a refused batch off at byte " + std::to_string(end), errno));
  dirty_tail = false;
  std::string buf;
  std::size_t size = 0;
  for (const auto& r : batch) size += r.bytes.size();
  buf.reserve(size);
  for (const auto& r : batch) buf += r.bytes;
  int err = injected(opt, journal_step::append_write);
  if (err == 0) err = pwrite_all(fd, buf.data(), buf.size(), end);
  if (err != 0)
    return refused(batch, io_error(path,
                                   "cannot write " + std::to_string(buf.size()) +
                                       " bytes at offset " + std::to_string(end),
                                   err));
  err = injected(opt, journal_step::append_sync);
  if (err == 0 && ::fdatasync(fd) != 0) err = errno;
  if (err != 0) return refused(batch, io_error(path, "fdatasync failed", err));
  {
    std::lock_guard<std::mutex> lk(m);
    trouble_now.clear();
    pending_bytes -= buf.size();
  }
  end += buf.size();
  fsyncs.fetch_add(1);
  records.fetch_add(batch.size());
  bytes.fetch_add(buf.size());
  file_records.fetch_add(batch.size());
  file_bytes.store(end);
  for (auto& r : batch) r.done(status{});
}

void journal::state::probe() {
  const std::string page(4096, '\0');
  int err = injected(opt, journal_step::append_write);
  if (err == 0) err = pwrite_all(fd, page.data(), page.size(), end);
  if (::ftruncate(fd, static_cast<off_t>(end)) != 0 && err == 0) err = errno;
  if (err != 0) {
    write_errors.fetch_add(1);
    return;
  }
  std::lock_guard<std::mutex> lk(m);
  trouble_now.clear();
}

void journal::state::refused(std::vector<request>& batch, const error& e) {
  write_errors.fetch_add(1);
  // No byte of the refused batch may be read back: its fail-fast records were refused.
  dirty_tail = ::ftruncate(fd, static_cast<off_t>(end)) != 0;
  std::vector<request> told, kept;
  for (auto& r : batch)
    (r.delivery == journal_delivery::wait_for_disk ? kept : told).push_back(std::move(r));
  bool closing = false;
  {
    std::lock_guard<std::mutex> lk(m);
    trouble_now = e.message;
    closing = stopping;
    for (const auto& r : told) pending_bytes -= r.bytes.size();
    if (!closing)
      for (auto it = kept.rbegin(); it != kept.rend(); ++it) queue.push_front(std::move(*it));
  }
  for (auto& r : told) r.done(e);
  if (closing) return fail(kept, e);  // close() tried once more: what is held is lost
  std::unique_lock<std::mutex> lk(m);
  wake.wait_for(lk, std::chrono::duration<double>(opt.retry_seconds), [&] { return stopping; });
}

void journal::state::compact_now(request& r) {
  std::vector<request> one;
  one.push_back(std::move(r));
  if (const status h =
          [&] {
            std::lock_guard<std::mutex> lk(m);
            return failure;
          }();
      !h)
    return fail(one, error{h.err().kind, "not compacted: " + h.err().message});
  const auto& records_now = *one.front().compaction;
  const replace_steps steps{journal_step::compact_write, journal_step::compact_sync,
                            journal_step::compact_rename, journal_step::compact_sync_dir};
  replacement repl = write_replacement(path, records_now, opt, steps);
  if (repl.fd < 0) return one.front().done(repl.st);  // the old file goes on
  ::close(fd);
  fd = repl.fd;
  end = repl.size;
  file_records.store(records_now.size());
  file_bytes.store(end);
  if (!repl.st) return fail(one, repl.st.err());
  compactions.fetch_add(1);
  one.front().done(status{});
}

// ---- journal ---------------------------------------------------------------------------------

journal::journal(std::unique_ptr<state> s) : s_(std::move(s)) {
  state* raw = s_.get();
  s_->writer = std::thread([raw] { raw->run(); });
}

journal::~journal() { close(); }

result<opened_journal> journal::open(const std::string& path, const journal_options& opt) {
  auto s = std::make_unique<state>(path, opt);
  if (auto st = s->lock(); !st) return st.err();
  opened_journal out;
  struct stat sb {};
  if (::stat(path.c_str(), &sb) == 0) {
    if (auto st = s->read_back(out); !st) return st.err();
  } else if (errno == ENOENT) {
    if (auto st = s->create(); !st) return st.err();
  } else {
    return io_error(path, "cannot stat the journal", errno);
  }
  s->file_records.store(out.records.size());
  s->file_bytes.store(s->end);
  out.file.reset(new journal(std::move(s)));
  return out;
}

status journal::append(std::string payload, journal_callback done, journal_delivery delivery) {
  if (payload.size() > journal_max_payload)
    return error{error_kind::invalid_input, s_->path + ": a journal record holds at most " +
                                                std::to_string(journal_max_payload) +
                                                " bytes, this one has " +
                                                std::to_string(payload.size())};
  request r;
  r.bytes = encode_journal_record(payload);
  r.done = std::move(done);
  r.delivery = delivery;
  return s_->enqueue(std::move(r));
}

status journal::wait_for(const std::function<status(journal_callback)>& start) {
  if (s_->on_writer())
    return error{error_kind::internal,
                 s_->path + ": a journal callback cannot wait for the journal's own thread"};
  std::promise<status> p;
  auto f = p.get_future();
  if (auto st = start([&p](const status& outcome) { p.set_value(outcome); }); !st) return st;
  return f.get();
}

status journal::append_sync(std::string payload) {
  return wait_for([&](journal_callback cb) { return append(std::move(payload), std::move(cb)); });
}

status journal::compact(std::vector<std::string> records, journal_callback done) {
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].size() > journal_max_payload)
      return error{error_kind::invalid_input,
                   s_->path + ": compaction record " + std::to_string(i) + " has " +
                       std::to_string(records[i].size()) + " bytes, over the limit of " +
                       std::to_string(journal_max_payload)};
  request r;
  r.compaction = std::move(records);
  r.done = std::move(done);
  return s_->enqueue(std::move(r));
}

status journal::compact_sync(std::vector<std::string> records) {
  return wait_for([&](journal_callback cb) { return compact(std::move(records), std::move(cb)); });
}

status journal::close() {
  if (s_->on_writer())
    return error{error_kind::internal, s_->path + ": close() from a journal callback"};
  std::lock_guard<std::mutex> closing(s_->close_m);
  if (s_->closed) return s_->close_result;
  {
    std::lock_guard<std::mutex> lk(s_->m);
    s_->stopping = true;
  }
  s_->wake.notify_one();
  s_->writer.join();
  s_->closed = true;
  s_->close_result = health();
  ::close(std::exchange(s_->fd, -1));
  ::close(std::exchange(s_->lock_fd, -1));  // releases the lock
  return s_->close_result;
}

status journal::health() const {
  std::lock_guard<std::mutex> lk(s_->m);
  return s_->failure;
}

std::string journal::trouble() const {
  std::lock_guard<std::mutex> lk(s_->m);
  return s_->trouble_now;
}

journal_stats journal::stats() const {
  journal_stats out;
  {
    std::lock_guard<std::mutex> lk(s_->m);
    out.held_records = s_->trouble_now.empty() ? 0 : s_->queue.size();  // the retry's included
  }
  out.write_errors = s_->write_errors.load();
  out.records = s_->records.load();
  out.bytes = s_->bytes.load();
  out.fsyncs = s_->fsyncs.load();
  out.compactions = s_->compactions.load();
  out.file_records = s_->file_records.load();
  out.file_bytes = s_->file_bytes.load();
  return out;
}

const std::string& journal::path() const { return s_->path; }

}  // namespace tessera
