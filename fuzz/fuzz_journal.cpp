// libFuzzer target: journal files (runtime/service/journal.hpp). The input is written as a journal
// file and opened as `tessera serve --resume` would, then (when refused as corrupt) with
// drop_corrupt. Properties:
// - a record read back is one whose checksum held: the file header and the records, encoded
//   afresh, are exactly the file's bytes up to where the damage begins (all of them without
//   damage), and open() has cut the file there;
// - scan_journal on the bytes agrees with open();
// - the repaired journal takes an append, and reads back as before plus that record.
#include <iterator>

#include "fuzz/fuzz_support.hpp"
#include "runtime/service/journal.hpp"

namespace {

/// The bytes of the file at `path`.
std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Checks what open() gave for input `input`, then appends to it and reads it back.
void check_opened(tessera::opened_journal& j, const std::string& input, const std::string& path,
                  bool drop_corrupt) {
  const std::size_t good_end = j.damage ? j.damage->offset : input.size();
  std::string expected = tessera::journal_file_header();
  for (const auto& r : j.records) expected += tessera::encode_journal_record(r);
  if (good_end > input.size() || expected != input.substr(0, good_end))
    tessera::fuzz::fail("a record read back is not the file's bytes (a bad checksum passed)");
  if (contents(path) != expected) tessera::fuzz::fail("open() did not cut the file at the damage");
  auto scan = tessera::scan_journal(input, path, drop_corrupt);
  if (!scan || scan->records != j.records || scan->good_end != good_end)
    tessera::fuzz::fail("scan_journal and journal::open disagree");

  if (!j.file->append_sync("{\"fuzz\":1}")) tessera::fuzz::fail("cannot append after opening");
  if (!j.file->close()) tessera::fuzz::fail("cannot close");
  auto again = tessera::journal::open(path);
  if (!again || again->damage || again->records.size() != j.records.size() + 1 ||
      again->records.back() != "{\"fuzz\":1}")
    tessera::fuzz::fail("the repaired journal does not read back with its append");
}

/// The scratch journal: its lock file goes with it.
struct scratch_journal {
  tessera::fuzz::scratch_file file{".journal"};
  ~scratch_journal() { ::unlink((file.path() + ".lock").c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static scratch_journal scratch;
  const std::string input = tessera::fuzz::as_text(data, size);
  const std::string& path = scratch.file.write(data, size);
  auto j = tessera::journal::open(path);
  bool drop_corrupt = false;
  if (!j && tessera::scan_journal(input, path).ok())
    tessera::fuzz::fail("journal::open refuses bytes scan_journal reads");
  if (!j && j.err().message.find("corrupt record") != std::string::npos) {
    drop_corrupt = true;
    tessera::journal_options force;
    force.drop_corrupt = true;
    scratch.file.write(data, size);
    j = tessera::journal::open(path, force);
    if (!j) tessera::fuzz::fail("drop_corrupt still refuses a corrupt journal");
  }
  if (j) check_opened(*j, input, path, drop_corrupt);
  return 0;
}
