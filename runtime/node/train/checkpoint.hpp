#pragma once
/// @file checkpoint.hpp
/// Checkpoint files for a job's training state, written atomically at round boundaries.
///
/// Layout (all integers little-endian):
///   offset  size  field
///        0     8  magic "TSRACKPT"
///        8     4  format version (checkpoint_format_version)
///       12     4  header size (checkpoint_header_size)
///       16     8  job id (signed)
///       24     8  round number (signed)
///       32     8  epoch of the writer (unsigned; see fencing below)
///       40     8  payload size in bytes
///       48     4  CRC-32 of the payload
///       52     4  CRC-32 of bytes 0..51 (the header itself)
///       56     -  payload (e.g. trainable::save_state())
/// (CRC-32: runtime/core/crc32.hpp, zlib's.)
/// The header has its own checksum so job, round and epoch can be read and trusted without
/// reading the payload. A file is replaced atomically: written to a temporary file in the same
/// directory, fsync'd, renamed over the target, and the directory fsync'd; a crash leaves
/// either the old file or the new one, and no temporary file survives a failed write.
///
/// Fencing: a writer carries an epoch; a job's fence file holds the oldest epoch still allowed
/// to write its checkpoints. A writer declared lost (and so superseded) finds a newer epoch in
/// the fence just before its rename and gives up (check_fence, called from
/// write_options::before_rename), so it never publishes stale state.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::train {

/// The checkpoint format version this build writes and reads.
constexpr std::uint32_t checkpoint_format_version = 2;

/// Bytes before the payload.
constexpr std::size_t checkpoint_header_size = 56;

/// Whose state a checkpoint holds and who wrote it.
struct checkpoint_tag {
  std::int64_t job = 0;     ///< the job's id (tessera::job_id)
  std::int64_t round = 0;   ///< round at whose end it was written
  std::uint64_t epoch = 0;  ///< the writer's fencing epoch
};

/// The verified header of a checkpoint file.
struct checkpoint_header {
  std::uint32_t version = checkpoint_format_version;  ///< format version
  std::int64_t job = 0;                               ///< the job's id (tessera::job_id)
  std::int64_t round = 0;                             ///< round at whose end it was written
  std::uint64_t epoch = 0;                            ///< the writer's fencing epoch
  std::uint64_t payload_size = 0;                     ///< payload bytes
  std::uint32_t payload_crc = 0;                      ///< CRC-32 of the payload
};

/// A checkpoint read back: its header and the verified payload.
struct checkpoint {
  checkpoint_header header;           ///< job, round and sizes
  std::vector<std::uint8_t> payload;  ///< the bytes given to write_checkpoint
};

/// How a checkpoint (or a probe file) is written; the defaults write plainly.
struct write_options {
  /// Asked before the temporary file is written: a non-zero errno value fails the write as
  /// if the system had returned it (ENOSPC: a full directory). Fault injection for tests.
  std::function<int()> inject_errno;
  /// Called once the temporary file is written and synced, just before the rename; an error
  /// refuses the write (the temporary file is removed). Where the fence is checked.
  std::function<status()> before_rename;
};

/// Atomically writes a checkpoint tagged `tag` to `path` (replacing any file there). Errors
/// (io, or before_rename's) name the path and the failing step; a failed write leaves no
/// temporary file.
status write_checkpoint(const std::string& path, const checkpoint_tag& tag,
                        const std::vector<std::uint8_t>& payload, const write_options& opt = {});

/// The epoch in fence file `path`, 0 when there is none. Errors: io when it cannot be read,
/// invalid_input naming the file when it holds no epoch.
result<std::uint64_t> read_fence(const std::string& path);

/// Atomically sets fence file `path` to `epoch` (as write_checkpoint replaces a file).
status write_fence(const std::string& path, std::uint64_t epoch);

/// Whether a writer of `epoch` may still publish: an error naming the fence file when it holds
/// a newer epoch (the writer was superseded). A fence that cannot be read refuses nothing:
/// per-round file names alone keep a late write from replacing newer state, and a job must not
/// stall on a damaged fence (the scheduler replaces it at the next fencing).
status check_fence(const std::string& fence_path, std::uint64_t epoch);

/// Whether `dir` takes new files now: creates, writes, syncs and removes a small temporary
/// file. Errors (io) name the directory and the system's reason (e.g. "No space left on
/// device"). `opt.inject_errno` applies as to a checkpoint write.
status probe_directory(const std::string& dir, const write_options& opt = {});

/// Reads and verifies a checkpoint's header without reading the payload: magic, version,
/// header checksum, and that the file size matches the payload size. Errors: io when the file
/// cannot be read; invalid_input naming the file when it is not a checkpoint, is truncated,
/// or is corrupt.
result<checkpoint_header> read_checkpoint_header(const std::string& path);

/// Reads a checkpoint and verifies everything read_checkpoint_header does plus the payload
/// checksum. Errors as read_checkpoint_header.
result<checkpoint> read_checkpoint(const std::string& path);

/// Writes `t.save_state()` as a checkpoint tagged `tag` (see write_checkpoint).
status save_trainable_checkpoint(const std::string& path, const checkpoint_tag& tag,
                                 const trainable& t, const write_options& opt = {});

/// Reads a checkpoint and loads its payload into `t` (trainable::load_state); returns the
/// header (job, round, epoch). Errors name the file; on error `t` is unchanged.
result<checkpoint_header> load_trainable_checkpoint(const std::string& path, trainable& t);

}  // namespace tessera::train
