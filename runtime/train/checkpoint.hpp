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
///       32     8  payload size in bytes
///       40     4  CRC-32 of the payload
///       44     4  CRC-32 of bytes 0..43 (the header itself)
///       48     -  payload (e.g. trainable::save_state())
/// The header has its own checksum so the round number can be read and trusted without
/// reading the payload. A file is replaced atomically: written to a temporary file in the same
/// directory, fsync'd, renamed over the target, and the directory fsync'd; a crash leaves
/// either the old file or the new one, and no temporary file survives a failed write.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/result.hpp"
#include "runtime/train/trainable.hpp"

namespace tessera::train {

/// The checkpoint format version this build writes and reads.
constexpr std::uint32_t checkpoint_format_version = 1;

/// Bytes before the payload.
constexpr std::size_t checkpoint_header_size = 48;

/// The verified header of a checkpoint file.
struct checkpoint_header {
  std::uint32_t version = checkpoint_format_version;  ///< format version
  std::int64_t job = 0;                               ///< the job's id (tessera::job_id)
  std::int64_t round = 0;                             ///< round at whose end it was written
  std::uint64_t payload_size = 0;                     ///< payload bytes
  std::uint32_t payload_crc = 0;                      ///< CRC-32 of the payload
};

/// A checkpoint read back: its header and the verified payload.
struct checkpoint {
  checkpoint_header header;           ///< job, round and sizes
  std::vector<std::uint8_t> payload;  ///< the bytes given to write_checkpoint
};

/// CRC-32 (IEEE 802.3, reflected, as zlib's crc32) of `n` bytes at `data`, continuing from
/// `crc` (pass a previous result to checksum data in pieces; 0 to start).
std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0);

/// Atomically writes a checkpoint for `job` at `round` to `path` (replacing any file there).
/// Errors (io) name the path and the failing step; a failed write leaves no temporary file.
status write_checkpoint(const std::string& path, std::int64_t job, std::int64_t round,
                        const std::vector<std::uint8_t>& payload);

/// Reads and verifies a checkpoint's header without reading the payload: magic, version,
/// header checksum, and that the file size matches the payload size. Errors: io when the file
/// cannot be read; invalid_input naming the file when it is not a checkpoint, is truncated,
/// or is corrupt.
result<checkpoint_header> read_checkpoint_header(const std::string& path);

/// Reads a checkpoint and verifies everything read_checkpoint_header does plus the payload
/// checksum. Errors as read_checkpoint_header.
result<checkpoint> read_checkpoint(const std::string& path);

/// Writes `t.save_state()` as the checkpoint of `job` at `round` (see write_checkpoint).
status save_trainable_checkpoint(const std::string& path, std::int64_t job, std::int64_t round,
                                 const trainable& t);

/// Reads a checkpoint and loads its payload into `t` (trainable::load_state); returns the
/// header (job and round). Errors name the file; on error `t` is unchanged.
result<checkpoint_header> load_trainable_checkpoint(const std::string& path, trainable& t);

}  // namespace tessera::train
