#pragma once
/// @file journal.hpp
/// An append-only journal of opaque records, durable before it acknowledges, for the state a
/// long-running server must get back after its process is killed (`tessera serve --resume`
/// rebuilds its jobs from it; docs/design.md, "Journal").
///
/// File format (all integers little-endian):
///   file header, 16 bytes:
///        0     8  magic "TSRAJRNL"
///        8     4  format version (journal_format_version)
///       12     4  CRC-32 (runtime/core/crc32.hpp) of bytes 0..11
///   then records, back to back, each:
///        0     4  record magic F7 4A 52 31 ("\xF7JR1")
///        4     4  payload length L (at most journal_max_payload)
///        8     4  CRC-32 of bytes 0..7 of the record followed by the payload
///       12     L  payload (opaque to the journal; the server stores one JSON object)
/// Byte F7 never occurs in UTF-8, so a record header is never found inside a JSON payload.
///
/// Reading back (journal::open, scan_journal). Records are read in order until the first bad
/// one: its header cut short, a wrong magic, a length over the limit, its payload cut short, or
/// a checksum mismatch. Then:
/// - No valid record anywhere after it: a torn write (the process or machine stopped while
///   the last batch was being written, or it was never fully on disk). The bad bytes are
///   dropped: open() reports where and why (journal_damage) and truncates the file to the end
///   of the last good record, so a record is never half-applied and appends continue after it.
///   Trailing bytes too short for a header count as torn too.
/// - A valid record later in the file: corruption of data that was once whole (a write
///   never leaves good records after a bad one). open() refuses with an error naming the file,
///   the byte offset and the reason, because dropping the rest would silently lose records
///   acknowledged as durable: an operator decides. journal_options::drop_corrupt (a `--force`)
///   drops everything from the bad record on, reported like a torn write.
///   One case lands here without bit rot: a power loss (not a process kill) while a batch of
///   several pages was written can persist a later page of the batch and not an earlier one.
///   None of that batch was acknowledged, so drop_corrupt loses nothing acknowledged then.
/// - A file header that is missing, cut, of another format or version, or fails its checksum:
///   "not a tessera journal" (never dropped; the file is created whole, so it cannot be torn).
/// - The last record whole (its length reaches the file's end exactly) with a checksum that
///   fails and a last byte that is not zero: damage, not a torn write (a torn write leaves the
///   record cut, or its unwritten pages as zeros). Refused like corruption in the middle: it
///   was acknowledged. A damaged header (magic, length) cannot be told from a torn one and
///   reads as torn.
///
/// Writing (group commit). append() encodes the record and queues it; the journal's writer
/// thread writes every record queued since its last sync with one write and one fdatasync
/// (a batch, at most journal_options::max_batch_bytes unless one record is larger) and only
/// then calls each record's callback, in append order, on the writer thread. A caller that
/// must never block (a CAF actor) uses append(); append_sync() waits for the callback.
/// Failures:
/// - A write or sync error of a batch (a full disk above all) is not final. The writer cuts
///   the file back to the end of the last synced batch, so no byte of the failed batch can be
///   read back, and the journal is in trouble (trouble() says why) until a write succeeds:
///   records appended with journal_delivery::fail_fast (a submission a client waits for)
///   get the error at once and are never written; records appended with wait_for_disk (a
///   state change) are held in memory, in order, and written by a retry every
///   journal_options::retry_seconds, their callbacks called then. While in trouble, append()
///   refuses fail_fast records at once, and any record once the held bytes pass
///   journal_options::max_held_bytes. With nothing held, the writer probes every retry (a
///   page written past the end and cut off again), so the trouble clears once the disk has
///   room even when only submissions were refused. The writer holds the bytes it retries, so a
///   failed fsync (after which the kernel may have dropped dirty pages) costs a rewrite, not data.
/// - A close() while in trouble tries once more, then fails what is still held; a failed
///   compaction after its rename fails the journal for good (health()): append() and
///   compact() refuse from then on.
/// - append() refuses at once, without calling the callback, a payload over
///   journal_max_payload, a closed journal and a failed one.
///
/// Compaction. compact(records) replaces the file by one holding exactly `records` followed
/// by every record appended after the compact() call: the writer writes a temporary file
/// (`<path>.compact`) in the same directory, fsyncs it, renames it over the journal and fsyncs
/// the directory. A crash at any point leaves the old file or the new one, never a mix; a
/// leftover temporary file is removed by the next open(). An error before the rename leaves
/// the old file in use (the journal goes on); an error after it fails the journal.
///
/// One journal per path: open() takes an exclusive lock on `<path>.lock` (flock, kept while
/// the journal is open) and refuses when another journal holds it, in this process or
/// another. Files are created mode 0600 (records hold users' job specifications), and every
/// descriptor is close-on-exec (the server starts programs).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera {

/// The journal format version this build writes and reads.
inline constexpr std::uint32_t journal_format_version = 1;
/// Bytes of the file header.
inline constexpr std::size_t journal_file_header_size = 16;
/// Bytes of a record header.
inline constexpr std::size_t journal_record_header_size = 12;
/// The largest payload a record holds (16 MiB); a format constant, so every reader agrees.
inline constexpr std::size_t journal_max_payload = std::size_t{16} << 20;

/// An I/O step of the journal, for fault injection (journal_options::inject_errno).
enum class journal_step {
  create,            ///< writing a new, empty journal (open() of a missing file)
  append_write,      ///< writing a batch of records
  append_sync,       ///< fdatasync after a batch
  compact_write,     ///< writing a chunk of the temporary file
  compact_sync,      ///< fsync of the temporary file
  compact_rename,    ///< renaming it over the journal
  compact_sync_dir,  ///< fsync of the directory after the rename
};

/// What an appended record does when the disk refuses its batch (see the file comment).
enum class journal_delivery {
  fail_fast,      ///< its callback gets the error at once; it is never written
  wait_for_disk,  ///< held, in order, until a retry writes it
};

/// How a journal is opened and written.
struct journal_options {
  /// Open a journal with a corrupt record followed by valid ones by dropping everything from
  /// the corrupt record on (reported in journal_damage), instead of refusing (see the file
  /// comment). For an operator's `--force`.
  bool drop_corrupt = false;
  /// What refusals name as the way to drop the damage (an operator's flag, e.g.
  /// "--repair-journal").
  std::string repair = "drop_corrupt";
  /// Bytes the writer puts in one batch (one write, one fdatasync) at most; a single larger
  /// record is a batch of its own.
  std::size_t max_batch_bytes = std::size_t{8} << 20;
  /// Seconds between retries of a batch the disk refused.
  double retry_seconds = 1.0;
  /// Bytes of wait_for_disk records held while in trouble at most; beyond, append() refuses.
  std::size_t max_held_bytes = std::size_t{64} << 20;
  /// Tests only: called before each step (on the thread doing it); a non-zero errno value
  /// fails the step as if the system had returned it.
  std::function<int(journal_step)> inject_errno;
};

/// What reading a journal dropped from its end.
struct journal_damage {
  std::uint64_t offset = 0;  ///< where the dropped bytes began: the end of the last good record
  std::uint64_t bytes = 0;   ///< how many bytes were dropped
  bool corrupt = false;      ///< valid records followed (dropped only under drop_corrupt)
  std::string message;       ///< "<path>: byte N: torn record dropped (<why>) ..."
};

/// A journal's bytes read back.
struct journal_scan {
  std::vector<std::string> records;      ///< the good records' payloads, in order
  std::uint64_t good_end = 0;            ///< the offset just after the last good record
  std::optional<journal_damage> damage;  ///< what follows good_end, when anything does
};

/// Reads the journal bytes `bytes` as the file comment says; `path` names the file in
/// messages. Errors (invalid_input, naming the path and byte offset): not a journal; a
/// corrupt record followed by valid ones unless `drop_corrupt`.
result<journal_scan> scan_journal(std::string_view bytes, const std::string& path,
                                  bool drop_corrupt = false,
                                  const std::string& repair = "drop_corrupt");

/// The file header bytes of this format version.
std::string journal_file_header();

/// The bytes of one record holding `payload` (at most journal_max_payload bytes).
std::string encode_journal_record(std::string_view payload);

/// Counters for metrics; each is read atomically, not all together.
struct journal_stats {
  std::uint64_t records = 0;       ///< records appended and synced since open
  std::uint64_t bytes = 0;         ///< their bytes, headers included
  std::uint64_t fsyncs = 0;        ///< fdatasyncs of batches (records / fsyncs: the batching)
  std::uint64_t compactions = 0;   ///< compactions completed since open
  std::uint64_t file_records = 0;  ///< records in the file now (read back + appended)
  std::uint64_t file_bytes = 0;    ///< bytes of the file now
  std::uint64_t write_errors = 0;  ///< batches the disk refused (each retry counts)
  std::uint64_t held_records = 0;  ///< records waiting for the disk now
};

/// Called once per append (or compaction) on the writer thread: ok once the record is on
/// disk, else the error. Must not throw, and must not destroy the journal or wait for it:
/// close(), append_sync() and compact_sync() refuse there (they would wait on the thread
/// running the callback); append() and compact() are fine.
using journal_callback = std::function<void(const status&)>;

struct opened_journal;

/// An open journal file and its writer thread (see the file comment).
class journal {
 public:
  /// Opens the journal at `path`, creating it (written whole, then the directory fsync'd)
  /// when there is none, or reading every record back and cutting off a torn end. Errors name
  /// the path: io (cannot create, lock, read or repair it; its directory is missing),
  /// invalid_input (not a journal; corrupt, see drop_corrupt), and the lock held elsewhere.
  static result<opened_journal> open(const std::string& path, const journal_options& opt = {});

  ~journal();  ///< close()
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// Queues `payload`; `done` is called once it is synced or failed. An error instead (and
  /// `done` never called) for a payload over journal_max_payload, a closed or failed journal,
  /// and while in trouble as the file comment says.
  status append(std::string payload, journal_callback done,
                journal_delivery delivery = journal_delivery::fail_fast);

  /// append() and waits for its callback; the outcome.
  status append_sync(std::string payload);

  /// Queues a compaction: the file becomes `records`, then whatever is appended after this
  /// call. `done` as for append(); the same refusals (a payload over the limit included).
  status compact(std::vector<std::string> records, journal_callback done);

  /// compact() and waits for its callback; the outcome.
  status compact_sync(std::vector<std::string> records);

  /// Writes and syncs everything queued, stops the writer, closes the file and releases the
  /// lock. Returns the failure that stopped the journal, if one did. Further calls return the
  /// same; append() refuses afterwards.
  status close();

  /// Ok, or the error that failed the journal (it then refuses appends).
  status health() const;

  /// "" while writes succeed; else why the last batch was refused (until a retry succeeds).
  std::string trouble() const;

  /// The counters now.
  journal_stats stats() const;

  /// The journal's path.
  const std::string& path() const;

 private:
  struct state;  // the file, the queue and the writer thread (journal.cpp)
  explicit journal(std::unique_ptr<state> s);
  /// Runs `start` with a callback and waits for that callback's outcome.
  status wait_for(const std::function<status(journal_callback)>& start);
  std::unique_ptr<state> s_;
};

/// What journal::open gives back.
struct opened_journal {
  std::unique_ptr<journal> file;         ///< the journal, open for appends
  std::vector<std::string> records;      ///< every good record read back, in order
  std::optional<journal_damage> damage;  ///< what was cut off its end, if anything
};

}  // namespace tessera
