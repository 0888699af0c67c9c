// The journal's file format (runtime/service/journal.hpp): the file header, records framed
// with a magic, a length and a CRC-32, and the scan that reads them back, naming the byte
// where a torn or corrupt tail begins.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/core/crc32.hpp"
#include "runtime/service/journal.hpp"

namespace tessera {

namespace {

/// Opening bytes of a journal file.
constexpr char file_magic[8] = {'T', 'S', 'R', 'A', 'J', 'R', 'N', 'L'};
/// Opening bytes of every record (F7 never occurs in UTF-8).
constexpr char record_magic[4] = {'\xF7', 'J', 'R', '1'};
/// Bytes of a record's header the checksum covers before the payload (magic, length).
constexpr std::size_t record_crc_offset = 8;
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFU));
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

/// "0x1234abcd".
std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

/// Why the record at `p` in `b` is bad, or "" when it is good (`len` is then its payload
/// length).
std::string check_record(std::string_view b, std::size_t p, std::uint32_t& len) {
  const std::size_t avail = b.size() - p;
  if (avail < journal_record_header_size)
    return "record header cut: " + std::to_string(avail) + " of its " +
           std::to_string(journal_record_header_size) + " bytes";
  const char* h = b.data() + p;
  if (std::memcmp(h, record_magic, sizeof record_magic) != 0) return "bad record magic";
  len = get_u32(h + 4);
  if (len > journal_max_payload)
    return "record length " + std::to_string(len) + " over the limit of " +
           std::to_string(journal_max_payload);
  if (avail - journal_record_header_size < len)
    return "payload cut: the header announces " + std::to_string(len) + " bytes, the file holds " +
           std::to_string(avail - journal_record_header_size);
  const std::uint32_t stored = get_u32(h + record_crc_offset);
  const std::uint32_t computed =
      crc32(h + journal_record_header_size, len, crc32(h, record_crc_offset));
  if (stored != computed)
    return "checksum mismatch (stored " + hex32(stored) + ", computed " + hex32(computed) + ")";
  return {};
}

/// The offset of the first valid record at or after `from`, if any.
std::optional<std::size_t> find_valid_record(std::string_view b, std::size_t from) {
  const std::string_view magic(record_magic, sizeof record_magic);
  for (std::size_t q = b.find(magic, from); q != std::string_view::npos; q = b.find(magic, q + 1)) {
    std::uint32_t len = 0;
    if (check_record(b, q, len).empty()) return q;
  }
  return std::nullopt;
}

/// Checks the file header of `b`.
status check_file_header(std::string_view b, const std::string& path) {
  const std::string not_journal = path + ": not a tessera journal: ";
  if (b.size() < journal_file_header_size)
    return error{error_kind::invalid_input,
                 not_journal + "the file holds " + std::to_string(b.size()) +
                     " bytes, its header needs " + std::to_string(journal_file_header_size)};
  if (std::memcmp(b.data(), file_magic, sizeof file_magic) != 0)
    return error{error_kind::invalid_input, not_journal + "bad magic"};
  const std::uint32_t version = get_u32(b.data() + 8);
  const std::uint32_t stored = get_u32(b.data() + 12);
  const std::uint32_t computed = crc32(b.data(), 12);
  if (stored != computed)
    return error{error_kind::invalid_input, not_journal + "file header checksum mismatch (stored " +
                                                hex32(stored) + ", computed " + hex32(computed) +
                                                ")"};
  if (version != journal_format_version)
    return error{error_kind::invalid_input,
                 path + ": unsupported journal format version " + std::to_string(version) +
                     " (this build reads version " + std::to_string(journal_format_version) + ")"};
  return {};
}

}  // namespace

std::string journal_file_header() {
  std::string h(file_magic, sizeof file_magic);
  put_u32(h, journal_format_version);
  put_u32(h, crc32(h.data(), h.size()));
  return h;
}

std::string encode_journal_record(std::string_view payload) {
  std::string r(record_magic, sizeof record_magic);
  r.reserve(journal_record_header_size + payload.size());
  put_u32(r, static_cast<std::uint32_t>(payload.size()));
  put_u32(r, crc32(payload.data(), payload.size(), crc32(r.data(), record_crc_offset)));
  r.append(payload);
  return r;
}

namespace {

/// True when the bad record at `p` is whole, the last thing in the file, with a checksum that
/// fails and a last byte that is not zero: it was written out entirely (a torn write leaves
/// the record cut, or its unwritten pages as zeros), so it was acknowledged and later damaged.
bool damaged_whole(std::string_view b, std::size_t p, const std::string& why) {
  if (why.rfind("checksum mismatch", 0) != 0) return false;
  const std::uint32_t len = get_u32(b.data() + p + 4);
  return p + journal_record_header_size + len == b.size() && b.back() != '\0';
}

}  // namespace

result<journal_scan> scan_journal(std::string_view bytes, const std::string& path,
                                  bool drop_corrupt, const std::string& repair) {
  if (auto st = check_file_header(bytes, path); !st) return st.err();
  journal_scan out;
  std::size_t p = journal_file_header_size;
  while (p < bytes.size()) {
    std::uint32_t len = 0;
    const std::string why = check_record(bytes, p, len);
    if (why.empty()) {
      out.records.emplace_back(bytes.substr(p + journal_record_header_size, len));
      p += journal_record_header_size + len;
      continue;
    }
    const auto later = find_valid_record(bytes, p + 1);
    const bool damaged = !later && damaged_whole(bytes, p, why);
    const std::string at = path + ": byte " + std::to_string(p) + ": ";
    const std::string drops =
        repair + " drops bytes " + std::to_string(p) + " to " + std::to_string(bytes.size());
    if (later && !drop_corrupt)
      return error{error_kind::invalid_input,
                   at + "corrupt record (" + why + ") followed by a valid record at byte " +
                       std::to_string(*later) +
                       ": refusing to open, as dropping the rest could lose acknowledged "
                       "records (" +
                       drops + ")"};
    if (damaged && !drop_corrupt)
      return error{error_kind::invalid_input,
                   at + "corrupt record (" + why +
                       "): the last record is whole, so it was written and acknowledged and "
                       "then damaged, not torn; refusing to open, as dropping it loses it (" +
                       drops + ")"};
    journal_damage d;
    d.offset = p;
    d.bytes = bytes.size() - p;
    d.corrupt = later.has_value() || damaged;
    d.message = at + (d.corrupt ? "corrupt record" : "torn record") + " (" + why +
                "): " + std::to_string(d.bytes) + " bytes dropped, the file cut back to " +
                std::to_string(p) + " bytes";
    out.damage = std::move(d);
    break;
  }
  out.good_end = p;
  return out;
}

}  // namespace tessera
