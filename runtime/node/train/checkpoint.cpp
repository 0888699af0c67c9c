#include "runtime/node/train/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/crc32.hpp"
#include "runtime/node/train/detail/bytes.hpp"

namespace tessera::train {

namespace {

/// Opening bytes of every checkpoint file.
constexpr char magic[8] = {'T', 'S', 'R', 'A', 'C', 'K', 'P', 'T'};
/// Offset of the header checksum, which covers the bytes before it.
constexpr std::size_t header_crc_offset = 52;
/// What a fence file says before its epoch.
constexpr const char* fence_word = "tessera-fence-epoch";

/// "0x1234abcd".
std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// An io error "<path>: <what>: <strerror(errno)>".
error io_error(const std::string& path, const std::string& what) {
  return error{error_kind::io, path + ": " + what + ": " + std::strerror(errno)};
}

/// An invalid_input error "<path>: <what>".
error corrupt(const std::string& path, const std::string& what) {
  return error{error_kind::invalid_input, path + ": " + what};
}

/// Writes all of `n` bytes to `fd`, retrying short writes and EINTR.
bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

/// The header bytes for a payload.
std::vector<std::uint8_t> encode_header(const checkpoint_tag& tag,
                                        const std::vector<std::uint8_t>& payload) {
  detail::byte_writer w;
  w.raw(magic, sizeof magic);
  w.u32(checkpoint_format_version);
  w.u32(static_cast<std::uint32_t>(checkpoint_header_size));
  w.i64(tag.job);
  w.i64(tag.round);
  w.u64(tag.epoch);
  w.u64(payload.size());
  w.u32(crc32(payload.data(), payload.size()));
  w.u32(crc32(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

/// Verifies the header bytes `h` (the first min(header size, file_size) bytes of the file)
/// against the file size.
result<checkpoint_header> decode_header(const std::string& path, const std::vector<std::uint8_t>& h,
                                        std::uint64_t file_size) {
  const std::size_t prefix = std::min(h.size(), sizeof magic);
  if (prefix > 0 && std::memcmp(h.data(), magic, prefix) != 0)
    return corrupt(path, "not a tessera checkpoint (bad magic)");
  // The version comes first: a file of another format is named as such, whatever its size.
  std::uint32_t version = checkpoint_format_version;
  if (h.size() >= sizeof magic + 4) detail::byte_reader(h.data() + sizeof magic, 4).u32(version);
  if (version != checkpoint_format_version)
    return corrupt(path, "unsupported checkpoint format version " + std::to_string(version) +
                             " (this build reads version " +
                             std::to_string(checkpoint_format_version) + ")");
  if (h.size() < checkpoint_header_size)
    return corrupt(path, "truncated: the file has " + std::to_string(file_size) +
                             " bytes, a checkpoint header needs " +
                             std::to_string(checkpoint_header_size));
  detail::byte_reader r(h.data() + sizeof magic, h.size() - sizeof magic);
  checkpoint_header out;
  std::uint32_t header_size = 0, header_crc = 0;
  r.u32(out.version);
  r.u32(header_size);
  r.i64(out.job);
  r.i64(out.round);
  r.u64(out.epoch);
  r.u64(out.payload_size);
  r.u32(out.payload_crc);
  r.u32(header_crc);
  const std::uint32_t computed = crc32(h.data(), header_crc_offset);
  if (computed != header_crc)
    return corrupt(path, "header checksum mismatch (stored " + hex32(header_crc) + ", computed " +
                             hex32(computed) + "): the file is corrupt");
  if (header_size != checkpoint_header_size)
    return corrupt(path, "header size " + std::to_string(header_size) + ", expected " +
                             std::to_string(checkpoint_header_size));
  const std::uint64_t have = file_size - checkpoint_header_size;
  if (have < out.payload_size)
    return corrupt(path, "truncated: the header announces " + std::to_string(out.payload_size) +
                             " payload bytes, the file holds " + std::to_string(have));
  if (have > out.payload_size)
    return corrupt(path, std::to_string(have - out.payload_size) +
                             " unexpected bytes after the payload (header announces " +
                             std::to_string(out.payload_size) + ")");
  return out;
}

/// Opens `path` and reads its size and first up-to-header-size bytes.
status read_prefix(const std::string& path, std::ifstream& in, std::vector<std::uint8_t>& head,
                   std::uint64_t& file_size) {
  in.open(path, std::ios::binary);
  if (!in) return io_error(path, "cannot open checkpoint");
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  if (end < 0) return io_error(path, "cannot determine the file size");
  file_size = static_cast<std::uint64_t>(end);
  in.seekg(0, std::ios::beg);
  head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(file_size, checkpoint_header_size)));
  if (!in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size())))
    return io_error(path, "cannot read the checkpoint header");
  return {};
}

/// Atomically replaces `path` with `bytes`: a temporary file in the same directory, written,
/// fsync'd, checked by `opt.before_rename`, renamed over `path`, the directory fsync'd.
status replace_file(const std::string& path, const std::vector<std::uint8_t>& bytes,
                    const write_options& opt) {
  const std::filesystem::path target(path);
  if (!target.has_filename())
    return error{error_kind::invalid_input, path + ": a checkpoint path must name a file"};
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();

  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error(path, "cannot create a temporary file in '" + dir.string() + "'");
  auto fail = [&](const std::string& what, bool close_fd) -> status {
    const error e = io_error(path, what);
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (::fchmod(fd, 0644) != 0) return fail("cannot set permissions of '" + tmp + "'", true);
  if (const int injected = opt.inject_errno ? opt.inject_errno() : 0; injected != 0) {
    errno = injected;
    return fail("cannot write '" + tmp + "'", true);
  }
  if (!write_all(fd, bytes.data(), bytes.size())) return fail("cannot write '" + tmp + "'", true);
  if (::fsync(fd) != 0) return fail("cannot fsync '" + tmp + "'", true);
  if (::close(fd) != 0) return fail("cannot close '" + tmp + "'", false);
  if (opt.before_rename)
    if (auto st = opt.before_rename(); !st) {
      ::unlink(tmp.c_str());
      return error{st.err().kind, path + ": not published: " + st.err().message};
    }
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("cannot rename '" + tmp + "' over it", false);
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0)
    return io_error(path, "written, but cannot open directory '" + dir.string() + "' to fsync it");
  const bool synced = ::fsync(dfd) == 0;
  const error e =
      synced ? error{}
             : io_error(path, "written, but cannot fsync directory '" + dir.string() + "'");
  ::close(dfd);
  if (!synced) return e;
  return {};
}

}  // namespace

status write_checkpoint(const std::string& path, const checkpoint_tag& tag,
                        const std::vector<std::uint8_t>& payload, const write_options& opt) {
  auto bytes = encode_header(tag, payload);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return replace_file(path, bytes, opt);
}

result<std::uint64_t> read_fence(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::uint64_t{0};
  std::ifstream in(path);
  if (!in) return io_error(path, "cannot open fence file");
  std::string word;
  std::uint64_t epoch = 0;
  if (!(in >> word >> epoch) || word != fence_word)
    return corrupt(path, "not a fence file (expected '" + std::string(fence_word) + " <epoch>')");
  return epoch;
}

status write_fence(const std::string& path, std::uint64_t epoch) {
  const std::string text = std::string(fence_word) + " " + std::to_string(epoch) + "\n";
  return replace_file(path, std::vector<std::uint8_t>(text.begin(), text.end()), {});
}

status check_fence(const std::string& fence_path, std::uint64_t epoch) {
  auto fence = read_fence(fence_path);
  if (fence && *fence > epoch)
    return error{error_kind::invalid_input,
                 "fence " + fence_path + " holds epoch " + std::to_string(*fence) +
                     ", newer than this writer's " + std::to_string(epoch) +
                     ": a newer writer owns the job, this one is stale"};
  return {};
}

status probe_directory(const std::string& dir, const write_options& opt) {
  std::string tmp = (std::filesystem::path(dir) / ".probe.XXXXXX").string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error(dir, "cannot create a file in the directory");
  const std::uint8_t bytes[16] = {};
  const int injected = opt.inject_errno ? opt.inject_errno() : 0;
  if (injected != 0) errno = injected;
  const bool ok = injected == 0 && write_all(fd, bytes, sizeof bytes) && ::fsync(fd) == 0;
  const error e = ok ? error{} : io_error(dir, "cannot write a file in the directory");
  ::close(fd);
  ::unlink(tmp.c_str());
  if (!ok) return e;
  return {};
}

result<checkpoint_header> read_checkpoint_header(const std::string& path) {
  std::ifstream in;
  std::vector<std::uint8_t> head;
  std::uint64_t size = 0;
  if (auto st = read_prefix(path, in, head, size); !st) return st.err();
  return decode_header(path, head, size);
}

result<checkpoint> read_checkpoint(const std::string& path) {
  std::ifstream in;
  std::vector<std::uint8_t> head;
  std::uint64_t size = 0;
  if (auto st = read_prefix(path, in, head, size); !st) return st.err();
  auto h = decode_header(path, head, size);
  if (!h) return h.err();
  checkpoint out;
  out.header = *h;
  out.payload.resize(static_cast<std::size_t>(h->payload_size));
  if (!in.read(reinterpret_cast<char*>(out.payload.data()),
               static_cast<std::streamsize>(out.payload.size())))
    return io_error(path, "cannot read the checkpoint payload");
  const std::uint32_t computed = crc32(out.payload.data(), out.payload.size());
  if (computed != h->payload_crc)
    return corrupt(path, "payload checksum mismatch (stored " + hex32(h->payload_crc) +
                             ", computed " + hex32(computed) + "): the file is corrupt");
  return out;
}

status save_trainable_checkpoint(const std::string& path, const checkpoint_tag& tag,
                                 const trainable& t, const write_options& opt) {
  return write_checkpoint(path, tag, t.save_state(), opt);
}

result<checkpoint_header> load_trainable_checkpoint(const std::string& path, trainable& t) {
  auto c = read_checkpoint(path);
  if (!c) return c.err();
  if (auto st = t.load_state(c->payload); !st)
    return error{st.err().kind, path + ": " + st.err().message};
  return c->header;
}

}  // namespace tessera::train
