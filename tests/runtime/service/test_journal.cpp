// Tests of the journal (runtime/service/journal.hpp): round trip, torn ends cut at every byte, bit
// flips, corruption in the middle, group commit under concurrent appenders, I/O errors, and
// compaction that a crash at any point leaves old or new.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/core/crc32.hpp"
#include "runtime/service/journal.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::file_contents;
using tessera::test::has;
using tessera::test::scratch_dir;

namespace {

/// Opens `path`; fails the test when it cannot.
opened_journal open_ok(const std::string& path, const journal_options& opt = {}) {
  auto r = journal::open(path, opt);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  return std::move(*r);
}

/// The error of opening `path`; fails the test when it opens.
error open_error(const std::string& path, const journal_options& opt = {}) {
  auto r = journal::open(path, opt);
  REQUIRE_FALSE(r);
  INFO(r.err().message);
  CHECK(r.err().message.rfind(path + ": ", 0) == 0);  // names the file first
  return r.err();
}

/// Replaces the file at `path` with `bytes`.
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

/// A job-like JSON text of `n` bytes (n >= 2) made from `seed`.
std::string json_of_size(std::size_t n, std::uint64_t seed) {
  std::string s = "{\"id\":" + std::to_string(seed) + ",\"pad\":\"";
  std::mt19937_64 rng(seed);
  while (s.size() + 2 < n) s.push_back(static_cast<char>('a' + rng() % 26));
  s += "\"}";
  return s.size() > n ? s.substr(s.size() - n) : s;
}

/// `n` payloads of random sizes in [0, max_size], from `seed`.
std::vector<std::string> random_payloads(std::size_t n, std::size_t max_size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t size = rng() % (max_size + 1);
    out.push_back(size < 2 ? std::string(size, 'x') : json_of_size(size, rng()));
  }
  return out;
}

/// The journal file holding `records`, and where each record starts in it.
struct journal_bytes {
  std::string bytes;
  std::vector<std::size_t> starts;
};

journal_bytes build(const std::vector<std::string>& records) {
  journal_bytes out{journal_file_header(), {}};
  for (const auto& r : records) {
    out.starts.push_back(out.bytes.size());
    out.bytes += encode_journal_record(r);
  }
  return out;
}

/// A scratch directory, the journal's path in it, random records and their file's bytes.
struct journal_case {
  journal_case(const std::string& name, std::size_t n, std::size_t max_size, std::uint64_t seed)
      : dir(name),
        path(dir.file("journal")),
        records(random_payloads(n, max_size, seed)),
        whole(build(records)) {}
  scratch_dir dir;
  std::string path;
  std::vector<std::string> records;
  journal_bytes whole;
};

/// Writes `records` through a journal at `path` (which must not exist), one append_sync each.
void append_all(const std::string& path, const std::vector<std::string>& records) {
  auto j = open_ok(path);
  REQUIRE(j.records.empty());
  for (const auto& r : records) REQUIRE(j.file->append_sync(r));
  REQUIRE(j.file->close());
}

/// The first `n` of `v`.
std::vector<std::string> first(const std::vector<std::string>& v, std::size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

/// Opens the journal at `path`, appends `extra` and checks that a second open reads
/// `expected` followed by `extra`.
void check_appends_land(const std::string& path, std::vector<std::string> expected) {
  {
    auto j = open_ok(path);
    CHECK(j.records == expected);
    CHECK_FALSE(j.damage);  // already repaired
    REQUIRE(j.file->append_sync("{\"after\":\"reopen\"}"));
  }
  expected.push_back("{\"after\":\"reopen\"}");
  auto again = open_ok(path);
  CHECK(again.records == expected);
  CHECK_FALSE(again.damage);
}

/// What open() should report after cutting a damaged end off the journal at `path`.
struct expected_drop {
  std::size_t offset;  ///< where the dropped bytes began (the file's size afterwards)
  std::size_t bytes;   ///< how many were dropped
  bool corrupt;        ///< valid records followed (only opened under drop_corrupt)
};

/// Opens the journal at `path` (with `opt`) and checks that it reads back `kept` and reports
/// the drop `drop`, and that the file was cut back to `drop.offset`.
void check_dropped(const std::string& path, const std::vector<std::string>& kept,
                   const expected_drop& drop, const journal_options& opt = {}) {
  auto j = open_ok(path, opt);
  CHECK(j.records == kept);
  REQUIRE(j.damage);
  CHECK(j.damage->offset == drop.offset);
  CHECK(j.damage->bytes == drop.bytes);
  CHECK(j.damage->corrupt == drop.corrupt);
  CHECK(has(j.damage->message, path + ": byte " + std::to_string(drop.offset) + ": " +
                                   (drop.corrupt ? "corrupt record" : "torn record")));
  CHECK(std::filesystem::file_size(path) == drop.offset);
}

/// Sets RLIMIT_FSIZE for the process while alive (SIGXFSZ ignored, so a write past it fails
/// with EFBIG instead of killing the process): a real write error without a full disk.
class file_size_limit {
 public:
  explicit file_size_limit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  file_size_limit(const file_size_limit&) = delete;
  file_size_limit& operator=(const file_size_limit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_{};
};

/// Runs `child` in a forked process that ends with its return value (or dies in it); returns
/// the pid. The child uses no Catch2 macro.
template <class F>
pid_t fork_child(F child) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(child());
  return pid;
}

/// Waits for `pid`; its wait status.
int wait_child(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("a journal round-trips its records and appends after reopening", "[journal]") {
  scratch_dir dir("journal_roundtrip");
  const auto path = dir.file("journal");
  const std::vector<std::string> records = {"{\"id\":1}", "", std::string("bin\0ary\xF7JR1", 11),
                                            json_of_size(300, 7), "{}"};
  {
    auto j = open_ok(path);
    CHECK(j.records.empty());
    CHECK_FALSE(j.damage);
    CHECK(std::filesystem::file_size(path) == journal_file_header_size);
    using std::filesystem::perms;
    CHECK((std::filesystem::status(path).permissions() & (perms::group_all | perms::others_all)) ==
          perms::none);  // records hold users' job specifications
    for (const auto& r : records) REQUIRE(j.file->append_sync(r));
    const auto st = j.file->stats();
    CHECK(st.records == records.size());
    CHECK(st.fsyncs == records.size());  // one at a time: nothing to batch
    CHECK(st.bytes == build(records).bytes.size() - journal_file_header_size);
    CHECK(st.file_records == records.size());
    CHECK(st.file_bytes == build(records).bytes.size());
    REQUIRE(j.file->close());
    CHECK_FALSE(j.file->append_sync("late"));  // closed
  }
  CHECK(file_contents(path) == build(records).bytes);
  auto again = open_ok(path);
  CHECK(again.records == records);
  CHECK_FALSE(again.damage);
  CHECK(again.file->stats().file_records == records.size());
  REQUIRE(again.file->close());
  check_appends_land(path, records);
}

TEST_CASE("the journal read back after truncation at every byte offset of its last record",
          "[journal]") {
  scratch_dir dir("journal_cut");
  const auto path = dir.file("journal");
  auto records = random_payloads(4, 400, 11);
  records.push_back(json_of_size(200, 12));  // a job's JSON; 213 cuts, each one reopened twice
  const auto whole = build(records);
  const std::size_t last = whole.starts.back();
  for (std::size_t cut = last; cut <= whole.bytes.size(); ++cut) {
    INFO("cut at byte " << cut << " of " << whole.bytes.size());
    write_bytes(path, whole.bytes.substr(0, cut));
    const bool complete = cut == whole.bytes.size();
    const auto expected = first(records, complete ? records.size() : records.size() - 1);
    if (cut != last && !complete) {
      // Cut back to the last good record before anything is appended.
      check_dropped(path, expected, {last, cut - last, false});
    } else {
      auto j = open_ok(path);
      CHECK(j.records == expected);
      CHECK_FALSE(j.damage);
      CHECK(std::filesystem::file_size(path) == cut);
    }
    check_appends_land(path, expected);
  }
}

TEST_CASE(
    "a bit flip in the last record's magic or length reads as torn, in its checksum or payload "
    "as damage, refused unless repaired",
    "[journal]") {
  // Before: a whole last record with a bad checksum was cut off as torn, silently losing an
  // acknowledged record; a torn write never leaves a whole record with a non-zero end.
  const journal_case c("journal_flip_last", 4, 200, 5);
  const auto& [dir, path, records, whole] = c;
  const std::size_t last = whole.starts.back();
  journal_options named;  // refusals name the operator's flag
  named.repair = "--repair-journal";
  for (std::size_t at = last; at < whole.bytes.size(); ++at) {
    INFO("bit " << at % 8 << " of byte " << at << " flipped");
    auto bytes = whole.bytes;
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << (at % 8)));
    write_bytes(path, bytes);
    const auto kept = first(records, records.size() - 1);
    if (at < last + 8) {  // magic or length: cannot be told from a torn header
      check_dropped(path, kept, {last, bytes.size() - last, false});
      continue;
    }
    const error e = open_error(path, named);
    CHECK(has(e.message, "byte " + std::to_string(last) + ": corrupt record (checksum mismatch"));
    CHECK(has(e.message, "not torn"));
    CHECK(has(e.message, "--repair-journal drops bytes " + std::to_string(last)));
    CHECK(file_contents(path) == bytes);  // refused: nothing touched
  }
  // Repaired: dropped and reported as corrupt, not torn.
  auto bytes = whole.bytes;
  char& end = bytes.back();  // in the checksum or the payload, whatever the payload's size
  end = static_cast<char>(end ^ ((end ^ 4) != 0 ? 4 : 8));
  write_bytes(path, bytes);
  journal_options force;
  force.drop_corrupt = true;
  check_dropped(path, first(records, records.size() - 1), {last, bytes.size() - last, true}, force);
}

TEST_CASE("a whole last record whose end reads as zeros is a torn write", "[journal]") {
  // Unwritten pages of a crash read back as zeros: torn, not damage.
  const journal_case c("journal_zero_tail", 3, 300, 8);
  const auto& [dir, path, records, whole] = c;
  const std::size_t last = whole.starts.back();
  auto bytes = whole.bytes;
  for (std::size_t i = bytes.size() - 40; i < bytes.size(); ++i) bytes[i] = '\0';
  write_bytes(path, bytes);
  check_dropped(path, first(records, records.size() - 1), {last, bytes.size() - last, false});
}

TEST_CASE(
    "a bad record followed by good ones is refused, naming the file and byte, and "
    "drop_corrupt drops from there",
    "[journal]") {
  const journal_case c("journal_corrupt", 5, 120, 9);
  const auto& [dir, path, records, whole] = c;
  const std::size_t k = 2, start = whole.starts[k], end = whole.starts[k + 1];
  for (std::size_t at = start; at < end; ++at) {
    INFO("byte " << at << " flipped");
    auto bytes = whole.bytes;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
    write_bytes(path, bytes);
    const error e = open_error(path);
    CHECK(e.kind == error_kind::invalid_input);
    CHECK(has(e.message, "byte " + std::to_string(start) + ": corrupt record"));
    CHECK(has(e.message, "valid record at byte " + std::to_string(end)));
    CHECK(file_contents(path) == bytes);  // refused: nothing touched

    journal_options force;
    force.drop_corrupt = true;
    check_dropped(path, first(records, k), {start, whole.bytes.size() - start, true}, force);
  }
  check_appends_land(path, first(records, k));
}

TEST_CASE("trailing zeros or garbage after the last record are cut off as a torn write",
          "[journal]") {
  const journal_case c("journal_trailing", 3, 80, 3);
  const auto& [dir, path, records, whole] = c;
  for (const std::string& tail : {std::string(4096, '\0'), std::string("\xF7JR"),
                                  std::string(11, 'z'), std::string("\xF7JR1") + "garbage"}) {
    write_bytes(path, whole.bytes + tail);
    check_dropped(path, records, {whole.bytes.size(), tail.size(), false});
  }
}

TEST_CASE("a file that is not a journal is refused and left alone", "[journal]") {
  scratch_dir dir("journal_not");
  const auto path = dir.file("journal");
  // A well-formed header of version 2.
  std::string other_version = "TSRAJRNL";
  other_version += std::string("\x02\0\0\0", 4);
  const std::uint32_t crc = tessera::crc32(other_version.data(), other_version.size());
  for (int i = 0; i < 4; ++i) other_version.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {other_version, "unsupported journal format version 2"},
      {"", "the file holds 0 bytes"},
      {journal_file_header().substr(0, 10), "the file holds 10 bytes"},
      {"{\"not\": \"a journal\"}", "bad magic"},
      {std::string("TSRAJRNL\x01\0\0\0\0\0\0\0", 16), "file header checksum mismatch"},
  };
  for (const auto& [bytes, why] : cases) {
    write_bytes(path, bytes);
    const error e = open_error(path);
    CHECK(e.kind == error_kind::invalid_input);
    CHECK(has(e.message, why));
    CHECK(file_contents(path) == bytes);
  }
}

TEST_CASE("property: any cut or bit flip reads back a prefix of the records, never a bad one",
          "[journal]") {
  scratch_dir dir("journal_property");
  const auto path = dir.file("journal");
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 60; ++round) {
    // Sizes from 0 to 5000 bytes, and now and then one of 70000 (several pages).
    auto records = random_payloads(1 + rng() % 8, 5000, rng());
    if (round % 10 == 0) records.push_back(json_of_size(70000, rng()));
    const auto whole = build(records);
    const std::size_t at =
        journal_file_header_size + rng() % (whole.bytes.size() - journal_file_header_size);
    // The record holding byte `at`.
    std::size_t k = 0;
    while (k + 1 < whole.starts.size() && whole.starts[k + 1] <= at) ++k;
    const bool last = k + 1 == records.size();
    INFO("round " << round << ": byte " << at << " of " << whole.bytes.size() << ", record " << k);

    write_bytes(path, whole.bytes.substr(0, at));  // cut at `at`
    {
      auto j = open_ok(path);
      CHECK(j.records == first(records, k));
      CHECK(j.damage.has_value() == (at != whole.starts[k]));
    }
    auto flipped = whole.bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (rng() % 8)));
    write_bytes(path, flipped);
    auto r = journal::open(path);
    // In the last record's magic or length: torn; in its checksum or payload (whole, so
    // written): damage; before it: corruption. Damage and corruption are refused.
    CHECK(r.ok() == (last && at < whole.starts[k] + 8));
    if (r) {
      CHECK(r->records == first(records, k));
      CHECK(r->damage->offset == whole.starts[k]);
    } else {
      CHECK(has(r.err().message, ": byte " + std::to_string(whole.starts[k]) + ": corrupt"));
    }
  }
}

TEST_CASE("concurrent appenders: every callback once, every record back, fsyncs batched",
          "[journal]") {
  scratch_dir dir("journal_concurrent");
  const auto path = dir.file("journal");
  constexpr int threads = 16, per_thread = 50;
  journal_options opt;
  // A sync that takes a millisecond, as on a disk, so records queue behind it.
  opt.inject_errno = [](journal_step step) {
    if (step == journal_step::append_sync)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 0;
  };
  std::vector<std::atomic<int>> calls(threads * per_thread);
  std::atomic<int> failures{0};
  {
    auto j = open_ok(path, opt);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          const int id = t * per_thread + i;
          const std::string payload =
              "{\"thread\":" + std::to_string(t) + ",\"i\":" + std::to_string(i) + "}";
          if (t % 2 == 0) {  // waits for each ack, as an HTTP submitter
            if (!j.file->append_sync(payload)) ++failures;
            ++calls[id];
          } else {  // queues and moves on, as an actor
            auto st = j.file->append(payload, [&calls, &failures, id](const status& s) {
              if (!s) ++failures;
              ++calls[id];
            });
            if (!st) ++failures;
          }
        }
      });
    for (auto& th : pool) th.join();
    REQUIRE(j.file->close());  // waits for the queued ones
    const auto st = j.file->stats();
    INFO("fsyncs " << st.fsyncs << " for " << st.records << " records");
    CHECK(st.records == threads * per_thread);
    CHECK(st.fsyncs < st.records);
    CHECK(st.fsyncs > 0);
  }
  CHECK(failures == 0);
  for (std::size_t id = 0; id < calls.size(); ++id) CHECK(calls[id] == 1);
  auto back = open_ok(path);
  REQUIRE(back.records.size() == threads * per_thread);
  // Each thread's records in its own order, none missing or repeated.
  std::vector<int> next(threads, 0);
  for (const auto& r : back.records) {
    int t = -1, i = -1;
    REQUIRE(std::sscanf(r.c_str(), "{\"thread\":%d,\"i\":%d}", &t, &i) == 2);
    REQUIRE(t >= 0);
    REQUIRE(t < threads);
    CHECK(i == next[t]++);
  }
  for (int t = 0; t < threads; ++t) CHECK(next[t] == per_thread);
}

TEST_CASE("close() writes what is queued, and a callback may append but not wait or close",
          "[journal]") {
  scratch_dir dir("journal_close");
  const auto path = dir.file("journal");
  std::atomic<int> acked{0};
  status from_callback_sync, from_callback_close, from_callback_append = error{};
  {
    auto j = open_ok(path);
    journal* jp = j.file.get();
    for (int i = 0; i < 100; ++i)
      REQUIRE(j.file->append(std::to_string(i), [&acked](const status& s) { acked += s.ok(); }));
    std::promise<void> chained;
    REQUIRE(j.file->append("first", [&](const status&) {
      from_callback_sync = jp->append_sync("never");
      from_callback_close = jp->close();
      from_callback_append =
          jp->append("second", [&chained](const status&) { chained.set_value(); });
    }));
    chained.get_future().wait();
    REQUIRE(j.file->close());
    CHECK(acked == 100);  // every callback ran before close() returned
  }
  CHECK_FALSE(from_callback_sync);
  CHECK(has(from_callback_sync.err().message, "cannot wait"));
  CHECK_FALSE(from_callback_close);
  CHECK(from_callback_append);
  auto back = open_ok(path);
  REQUIRE(back.records.size() == 102);
  CHECK(back.records[99] == "99");
  CHECK(back.records[100] == "first");
  CHECK(back.records[101] == "second");
}

TEST_CASE("a payload over the limit is refused at once, one at the limit is kept", "[journal]") {
  scratch_dir dir("journal_oversized");
  const auto path = dir.file("journal");
  bool called = false;
  {
    auto j = open_ok(path);
    const auto st = j.file->append(std::string(journal_max_payload + 1, 'x'),
                                   [&called](const status&) { called = true; });
    REQUIRE_FALSE(st);
    CHECK(st.err().kind == error_kind::invalid_input);
    CHECK(has(st.err().message, path + ": a journal record holds at most 16777216 bytes"));
    CHECK_FALSE(j.file->compact_sync({"ok", std::string(journal_max_payload + 1, 'y')}));
    REQUIRE(j.file->append_sync(std::string(journal_max_payload, 'z')));
    REQUIRE(j.file->health());  // a refusal does not fail the journal
    REQUIRE(j.file->append_sync("after"));
  }
  CHECK_FALSE(called);
  auto back = open_ok(path);
  REQUIRE(back.records.size() == 2);
  CHECK(back.records[0] == std::string(journal_max_payload, 'z'));
  CHECK(back.records[1] == "after");
}

TEST_CASE("a journal that cannot be opened says why, naming the path", "[journal]") {
  scratch_dir dir("journal_open_errors");
  SECTION("its directory is missing") {
    const auto path = dir.file("missing/journal");
    const error e = open_error(path);
    CHECK(e.kind == error_kind::io);
    CHECK(has(e.message, "No such file or directory"));
  }
  SECTION("the path is a directory") {
    std::filesystem::create_directory(dir.file("adir"));
    const error e = open_error(dir.file("adir"));
    CHECK(has(e.message, "Is a directory"));
  }
  SECTION("creating it fails (injected: a full disk)") {
    const auto path = dir.file("journal");
    journal_options opt;
    opt.inject_errno = [](journal_step s) { return s == journal_step::create ? ENOSPC : 0; };
    const error e = open_error(path, opt);
    CHECK(e.kind == error_kind::io);
    CHECK(has(e.message, "No space left on device"));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_FALSE(std::filesystem::exists(path + ".compact"));
  }
  SECTION("it is open already, in this process or another") {
    const auto path = dir.file("journal");
    {
      auto j = open_ok(path);
      CHECK(has(open_error(path).message, "open elsewhere"));
      REQUIRE(j.file->close());
    }
    open_ok(path);  // the lock went with the close
    // Another process holds it. The child opens it, not the parent: a fork while this
    // process's journal writer thread runs can leave the child stuck on a lock that thread
    // held (under ASan, the allocator's), so the parent forks with no journal open.
    int opened[2], release[2];
    REQUIRE(::pipe(opened) == 0);
    REQUIRE(::pipe(release) == 0);
    const pid_t pid = fork_child([&] {
      auto j = journal::open(path);
      const char ok = j ? 'y' : 'n';
      if (::write(opened[1], &ok, 1) != 1) return 4;
      char go = 0;
      return ::read(release[0], &go, 1) == 1 && j ? 0 : 3;  // holds the journal until told
    });
    char ok = 0;
    REQUIRE(::read(opened[0], &ok, 1) == 1);
    CHECK(ok == 'y');
    CHECK(has(open_error(path).message, "open elsewhere"));
    REQUIRE(::write(release[1], "x", 1) == 1);
    const int status = wait_child(pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    for (const int fd : {opened[0], opened[1], release[0], release[1]}) ::close(fd);
    open_ok(path);  // the lock went with the process
  }
}

/// Options whose appends fail with ENOSPC while `full` is set (a disk full on demand; `full`
/// must outlive the journal), retried every 10 ms.
journal_options full_on_demand(const std::atomic<bool>& full) {
  journal_options opt;
  opt.retry_seconds = 0.01;
  opt.inject_errno = [&full](journal_step step) {
    return step == journal_step::append_write && full.load() ? ENOSPC : 0;
  };
  return opt;
}

/// Waits until `pred` holds, for at most `seconds` (scaled); its last value.
bool wait_until(const std::function<bool()>& pred, double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(seconds * tessera::test::time_scale());
  while (!pred() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return pred();
}

TEST_CASE(
    "a full disk: the refused batch is cut off, submissions are refused, state changes are held "
    "and written once the disk takes them",
    "[journal][full]") {
  // Before: one write error failed the journal for good; every later record was refused
  // until a restart (and the cluster went on without recording).
  const journal_case c("journal_write_error", 3, 100, 1);
  const auto& [dir, path, records, whole] = c;
  append_all(path, records);
  const auto size = std::filesystem::file_size(path);
  journal_options opt;
  opt.retry_seconds = 0.02;
  auto j = open_ok(path, opt);
  std::atomic<int> held_done{0};
  status held_outcome;
  {
    // A real EFBIG from the kernel: the file may not grow past its size + 200, so 200 bytes
    // of the 312-byte record land before the write fails.
    file_size_limit limit(size + 200);
    const status refused = j.file->append_sync(json_of_size(300, 1));
    REQUIRE_FALSE(refused);
    CHECK(refused.err().kind == error_kind::io);
    CHECK(has(refused.err().message, path + ": cannot write 312 bytes at offset " +
                                         std::to_string(size) + ": File too large"));
    CHECK(std::filesystem::file_size(path) == size);  // its 200 bytes are cut off
    CHECK(has(j.file->trouble(), "File too large"));
    CHECK(j.file->health());  // not failed for good
    // A submission is refused at once while the disk refuses writes.
    const status submit = j.file->append("{}", [](const status&) { FAIL("never called"); });
    REQUIRE_FALSE(submit);
    CHECK(has(submit.err().message, "not accepted now: the journal cannot write"));
    // A state change too large for the limit is held, retried, and not yet acknowledged.
    REQUIRE(j.file->append(
        json_of_size(300, 2),
        [&](const status& st) {
          held_outcome = st;
          held_done.fetch_add(1);
        },
        journal_delivery::wait_for_disk));
    CHECK(wait_until([&] { return j.file->stats().write_errors >= 3; }, 10));
    CHECK(held_done.load() == 0);
    CHECK(j.file->stats().held_records == 1);
  }  // the disk takes writes again
  REQUIRE(wait_until([&] { return held_done.load() == 1; }, 10));
  CHECK(held_outcome);
  CHECK(j.file->trouble().empty());
  CHECK(j.file->stats().held_records == 0);
  REQUIRE(j.file->append_sync("{\"after\":1}"));  // submissions are taken again
  REQUIRE(j.file->close());
  auto back = open_ok(path);
  auto expected = records;
  expected.push_back(json_of_size(300, 2));
  expected.push_back("{\"after\":1}");
  CHECK(back.records == expected);
  CHECK_FALSE(back.damage);
}

TEST_CASE(
    "failed fsyncs (injected): a batch's submissions fail and never read back, its state "
    "changes are written in order by the retry",
    "[journal][full]") {
  // A real fdatasync failure needs a failing device (dm-error, a yanked disk); the hook
  // fails the call as if the kernel had returned EIO. The batch's bytes did reach the file,
  // so this also checks that they are cut off before the retry.
  scratch_dir dir("journal_fsync_error");
  const auto path = dir.file("journal");
  std::atomic<int> syncs{0};
  journal_options opt;
  opt.retry_seconds = 0.01;
  opt.inject_errno = [&syncs](journal_step step) {
    if (step != journal_step::append_sync) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const int n = ++syncs;
    return n == 2 || n == 3 ? EIO : 0;
  };
  auto j = open_ok(path, opt);
  REQUIRE(j.file->append_sync("one"));
  std::mutex m;
  std::vector<std::pair<std::string, status>> outcomes;  // in callback order
  std::vector<std::string> appended;                     // accepted, in append order
  int refused_now = 0;                                   // submissions refused at append
  for (int i = 0; i < 40; ++i) {
    const bool submission = i % 2 == 0;
    const std::string rec = (submission ? "s" : "w") + std::to_string(i);
    auto st = j.file->append(
        rec,
        [&, rec](const status& s) {
          std::lock_guard<std::mutex> lk(m);
          outcomes.emplace_back(rec, s);
        },
        submission ? journal_delivery::fail_fast : journal_delivery::wait_for_disk);
    if (st) {
      appended.push_back(rec);
    } else {
      CHECK(submission);  // refused at once only while in trouble, and only a submission
      ++refused_now;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  // The retry after the second failure succeeds; a close before it would fail what is held.
  REQUIRE(wait_until([&] { return syncs.load() >= 4 && j.file->trouble().empty(); }, 10));
  REQUIRE(j.file->close());
  REQUIRE(outcomes.size() == appended.size());
  std::vector<std::string> expected{"one"};
  int failed = 0;
  for (const auto& rec : appended) {
    const auto it = std::find_if(outcomes.begin(), outcomes.end(),
                                 [&](const auto& o) { return o.first == rec; });
    REQUIRE(it != outcomes.end());
    if (rec[0] == 'w') CHECK(it->second);  // a state change is never lost
    if (it->second) {
      expected.push_back(rec);
    } else {
      ++failed;
      CHECK(has(it->second.err().message, path + ": fdatasync failed: Input/output error"));
    }
  }
  CHECK(failed + refused_now >= 1);  // in the failed batch, or refused while in trouble
  CHECK(j.file->stats().write_errors == 2);
  auto back = open_ok(path);
  CHECK(back.records == expected);  // every acknowledged record, in order; no refused one
  CHECK_FALSE(back.damage);
}

TEST_CASE("trouble with nothing held clears once the disk has room again", "[journal][full]") {
  // Before: a refused submission held nothing, so nothing was retried and the journal stayed
  // in trouble for good: every later submission refused, every round waiting.
  scratch_dir dir("journal_probe");
  const auto path = dir.file("journal");
  std::atomic<bool> full{false};
  journal_options opt = full_on_demand(full);
  auto j = open_ok(path, opt);
  REQUIRE(j.file->append_sync("kept"));
  full = true;
  REQUIRE_FALSE(j.file->append_sync("refused"));
  CHECK_FALSE(j.file->trouble().empty());
  CHECK(wait_until([&] { return j.file->stats().write_errors >= 3; }, 10));  // probes fail
  CHECK_FALSE(j.file->trouble().empty());
  full = false;
  REQUIRE(wait_until([&] { return j.file->trouble().empty(); }, 10));
  REQUIRE(j.file->append_sync("after"));
  REQUIRE(j.file->close());
  auto back = open_ok(path);
  CHECK(back.records == std::vector<std::string>{"kept", "after"});
  CHECK_FALSE(back.damage);
}

TEST_CASE("held records past the cap are refused, and a close in trouble fails what is held",
          "[journal][full]") {
  scratch_dir dir("journal_held_cap");
  const auto path = dir.file("journal");
  std::atomic<bool> full{false};
  journal_options opt = full_on_demand(full);
  opt.max_held_bytes = 100;
  auto j = open_ok(path, opt);
  REQUIRE(j.file->append_sync("kept"));
  full = true;
  std::atomic<int> failed{0};
  auto count_failure = [&](const status& s) {
    if (!s) failed.fetch_add(1);
  };
  REQUIRE(j.file->append("{\"held\":0}", count_failure, journal_delivery::wait_for_disk));
  REQUIRE(wait_until([&] { return !j.file->trouble().empty(); }, 10));
  CHECK(has(j.file->trouble(), "No space left on device"));
  int accepted = 1;
  status refused;
  for (int i = 1; i < 20 && refused; ++i) {
    refused = j.file->append("{\"held\":" + std::to_string(i) + "}", count_failure,
                             journal_delivery::wait_for_disk);
    if (refused) ++accepted;
  }
  REQUIRE_FALSE(refused);
  CHECK(has(refused.err().message, "already holds"));
  CHECK(accepted == 4);  // 22 bytes each (12 of header): 88 of the 100 held
  const status closed = j.file->close();
  REQUIRE_FALSE(closed);
  CHECK(has(closed.err().message, "No space left on device"));
  CHECK(failed.load() == accepted);
  auto back = open_ok(path);
  CHECK(back.records == std::vector<std::string>{"kept"});
}

TEST_CASE("compaction: the file becomes the given records, then what was appended after",
          "[journal]") {
  scratch_dir dir("journal_compact");
  const auto path = dir.file("journal");
  append_all(path, random_payloads(50, 300, 4));
  const auto before = std::filesystem::file_size(path);
  {
    auto j = open_ok(path);
    std::atomic<int> ok{0};
    auto count = [&ok](const status& s) { ok += s.ok(); };
    REQUIRE(j.file->append("superseded", count));  // written to the old file, then replaced
    REQUIRE(j.file->compact({"{\"job\":1}", "{\"job\":2}"}, count));
    REQUIRE(j.file->append("{\"job\":3}", count));
    REQUIRE(j.file->close());
    CHECK(ok == 3);
    CHECK(j.file->stats().compactions == 1);
    CHECK(j.file->stats().file_records == 3);
    CHECK(j.file->stats().file_bytes == std::filesystem::file_size(path));
  }
  CHECK(std::filesystem::file_size(path) < before);
  CHECK_FALSE(std::filesystem::exists(path + ".compact"));
  auto back = open_ok(path);
  CHECK(back.records == std::vector<std::string>{"{\"job\":1}", "{\"job\":2}", "{\"job\":3}"});
}

TEST_CASE(
    "a compaction that fails before its rename leaves the old file in use, after it "
    "the journal fails",
    "[journal]") {
  const journal_case c("journal_compact_error", 5, 100, 8);
  const auto& [dir, path, old_records, old_bytes] = c;
  append_all(path, old_records);
  for (const auto step :
       {journal_step::compact_write, journal_step::compact_sync, journal_step::compact_rename}) {
    journal_options opt;
    opt.inject_errno = [step](journal_step s) { return s == step ? ENOSPC : 0; };
    auto j = open_ok(path, opt);
    const status st = j.file->compact_sync({"new"});
    REQUIRE_FALSE(st);
    CHECK(has(st.err().message, "No space left on device"));
    CHECK_FALSE(std::filesystem::exists(path + ".compact"));
    REQUIRE(j.file->health());
    REQUIRE(j.file->append_sync("kept"));
    REQUIRE(j.file->close());
    auto back = open_ok(path);
    CHECK(back.records.back() == "kept");
    back.records.pop_back();
    CHECK(back.records == old_records);
    REQUIRE(back.file->close());
    write_bytes(path, old_bytes.bytes);
  }
  journal_options opt;
  opt.inject_errno = [](journal_step s) { return s == journal_step::compact_sync_dir ? EIO : 0; };
  auto j = open_ok(path, opt);
  const status st = j.file->compact_sync({"new"});
  REQUIRE_FALSE(st);
  CHECK(has(st.err().message, "replaced, but cannot fsync its directory"));
  CHECK_FALSE(j.file->health());
  CHECK_FALSE(j.file->append_sync("refused"));
  REQUIRE_FALSE(j.file->close());
  CHECK(open_ok(path).records == std::vector<std::string>{"new"});
}

TEST_CASE("a crash at any step of a compaction leaves the old file or the new one", "[journal]") {
  scratch_dir dir("journal_compact_crash");
  const auto path = dir.file("journal");
  const auto old_records = random_payloads(20, 2000, 21);
  // Three records of 600 kB: the temporary file is written in two chunks.
  const std::vector<std::string> new_records = {json_of_size(600000, 1), json_of_size(600000, 2),
                                                json_of_size(600000, 3)};
  struct crash_point {
    journal_step step;
    int nth;  // crash before the nth time the step is reached
    bool expect_new;
  };
  const crash_point points[] = {{journal_step::compact_write, 1, false},
                                {journal_step::compact_write, 2, false},
                                {journal_step::compact_sync, 1, false},
                                {journal_step::compact_rename, 1, false},
                                {journal_step::compact_sync_dir, 1, true}};
  for (const auto& p : points) {
    INFO("crash before step " << static_cast<int>(p.step) << " #" << p.nth);
    write_bytes(path, build(old_records).bytes);
    const pid_t pid = fork_child([&] {
      int seen = 0;
      journal_options opt;
      opt.inject_errno = [&](journal_step s) {
        if (s == p.step && ++seen == p.nth) ::_exit(42);  // the process dies here
        return 0;
      };
      auto j = journal::open(path, opt);
      if (!j) return 1;
      j->file->compact_sync(new_records);
      return 2;  // the crash point was never reached
    });
    const int status = wait_child(pid);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 42);
    auto back = open_ok(path);
    CHECK_FALSE(back.damage);
    CHECK(back.records == (p.expect_new ? new_records : old_records));
    CHECK_FALSE(std::filesystem::exists(path + ".compact"));  // the leftover is removed
  }
}

TEST_CASE("a process killed at random times while compacting leaves the old or the new file",
          "[journal]") {
  scratch_dir dir("journal_compact_kill");
  const auto path = dir.file("journal");
  const auto a = random_payloads(300, 1500, 31);
  const auto b = random_payloads(120, 4000, 32);
  write_bytes(path, build(a).bytes);
  std::mt19937 rng(7);
  int saw_a = 0, saw_b = 0;
  for (int round = 0; round < 16; ++round) {
    const pid_t pid = fork_child([&] {
      auto j = journal::open(path);
      if (!j) return 1;
      for (;;) {  // until killed
        if (!j->file->compact_sync(b) || !j->file->compact_sync(a)) return 2;
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 40000));
    ::kill(pid, SIGKILL);
    const int status = wait_child(pid);
    REQUIRE(WIFSIGNALED(status));
    auto back = open_ok(path);
    CHECK_FALSE(back.damage);
    const bool is_a = back.records == a, is_b = back.records == b;
    CHECK((is_a || is_b));
    saw_a += is_a;
    saw_b += is_b;
  }
  INFO("old " << saw_a << ", new " << saw_b);
  CHECK(saw_a + saw_b == 16);
}

TEST_CASE("a journal, its lock or its temporary file planted as a link is never written through",
          "[journal][state]") {
  scratch_dir dir("journal_links");
  const std::string victim = dir.write("victim", "keep\n");
  const std::string path = dir.file("journal");
  // The journal itself a link: refused, the target untouched.
  REQUIRE(::symlink(victim.c_str(), path.c_str()) == 0);
  const auto e = open_error(path);
  CHECK(has(e.message, "cannot open the journal"));
  CHECK(file_contents(victim) == "keep\n");
  ::unlink(path.c_str());
  ::unlink((path + ".lock").c_str());  // made by the open above
  // Its lock file a link: refused before anything is written.
  REQUIRE(::symlink(victim.c_str(), (path + ".lock").c_str()) == 0);
  open_error(path);
  CHECK(file_contents(victim) == "keep\n");
}
