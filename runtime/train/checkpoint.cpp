#include "runtime/train/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/train/detail/bytes.hpp"

namespace tessera::train {

namespace {

/// Opening bytes of every checkpoint file.
constexpr char magic[8] = {'T', 'S', 'R', 'A', 'C', 'K', 'P', 'T'};
/// Offset of the header checksum, which covers the bytes before it.
constexpr std::size_t header_crc_offset = 44;

/// The CRC-32 lookup table for the reflected polynomial 0xEDB88320.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1U) ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr auto crc_table = make_crc_table();

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

/// The 48 header bytes for a payload.
std::vector<std::uint8_t> encode_header(std::int64_t job, std::int64_t round,
                                        const std::vector<std::uint8_t>& payload) {
  detail::byte_writer w;
  w.raw(magic, sizeof magic);
  w.u32(checkpoint_format_version);
  w.u32(static_cast<std::uint32_t>(checkpoint_header_size));
  w.i64(job);
  w.i64(round);
  w.u64(payload.size());
  w.u32(crc32(payload.data(), payload.size()));
  w.u32(crc32(w.bytes().data(), w.bytes().size()));
  return std::move(w.bytes());
}

/// Verifies the header bytes `h` (the first min(48, file_size) bytes of the file) against the
/// file size.
result<checkpoint_header> decode_header(const std::string& path, const std::vector<std::uint8_t>& h,
                                        std::uint64_t file_size) {
  const std::size_t prefix = std::min(h.size(), sizeof magic);
  if (prefix > 0 && std::memcmp(h.data(), magic, prefix) != 0)
    return corrupt(path, "not a tessera checkpoint (bad magic)");
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
  r.u64(out.payload_size);
  r.u32(out.payload_crc);
  r.u32(header_crc);
  if (out.version != checkpoint_format_version)
    return corrupt(path, "unsupported checkpoint format version " + std::to_string(out.version) +
                             " (this build reads version " +
                             std::to_string(checkpoint_format_version) + ")");
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

/// Opens `path` and reads its size and first up-to-48 bytes.
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

}  // namespace

std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = crc_table[(crc ^ p[i]) & 0xFFU] ^ (crc >> 8);
  return ~crc;
}

status write_checkpoint(const std::string& path, std::int64_t job, std::int64_t round,
                        const std::vector<std::uint8_t>& payload) {
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
  const auto header = encode_header(job, round, payload);
  if (::fchmod(fd, 0644) != 0) return fail("cannot set permissions of '" + tmp + "'", true);
  if (!write_all(fd, header.data(), header.size()) || !write_all(fd, payload.data(), payload.size()))
    return fail("cannot write '" + tmp + "'", true);
  if (::fsync(fd) != 0) return fail("cannot fsync '" + tmp + "'", true);
  if (::close(fd) != 0) return fail("cannot close '" + tmp + "'", false);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return fail("cannot rename '" + tmp + "' over it", false);
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd < 0) return io_error(path, "written, but cannot open directory '" + dir.string() + "' to fsync it");
  const bool synced = ::fsync(dfd) == 0;
  const error e = synced ? error{} : io_error(path, "written, but cannot fsync directory '" + dir.string() + "'");
  ::close(dfd);
  if (!synced) return e;
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

status save_trainable_checkpoint(const std::string& path, std::int64_t job, std::int64_t round,
                                 const trainable& t) {
  return write_checkpoint(path, job, round, t.save_state());
}

result<checkpoint_header> load_trainable_checkpoint(const std::string& path, trainable& t) {
  auto c = read_checkpoint(path);
  if (!c) return c.err();
  if (auto st = t.load_state(c->payload); !st)
    return error{st.err().kind, path + ": " + st.err().message};
  return c->header;
}

}  // namespace tessera::train
