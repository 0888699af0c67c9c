#pragma once
/// @file fuzz_support.hpp
/// Pieces the libFuzzer targets share: the input as text, a scratch file for readers that take
/// a path, and a hard failure for a property a target checks.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace tessera::fuzz {

/// The fuzz input as a string (any bytes, NULs included).
inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Stops the run with `what` on stderr: libFuzzer saves the input as a crash.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

/// One file per process, rewritten with each input: readers that only take a path read it.
/// Lives in /dev/shm when there is one (no disk traffic per execution), else in $TMPDIR.
class scratch_file {
 public:
  /// Creates the file; `suffix` is its extension (".toml", ".json", ...).
  explicit scratch_file(const std::string& suffix) {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp");
    std::string templ = dir + "/tessera-fuzz-XXXXXX" + suffix;
    const int fd = mkstemps(templ.data(), static_cast<int>(suffix.size()));
    if (fd < 0) fail("cannot create a scratch file");
    close(fd);
    path_ = templ;
  }
  ~scratch_file() { unlink(path_.c_str()); }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;

  /// The file's path.
  const std::string& path() const { return path_; }

  /// Replaces the file's contents with `size` bytes at `data`; returns its path.
  const std::string& write(const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) fail("cannot write the scratch file");
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace tessera::fuzz
