#pragma once
/// @file input_file.hpp
/// Reading input files under the bounds of runtime/core/input_limits.hpp: a size checked before
/// reading, lines of bounded length, and a byte budget for streams whose size is not known
/// in advance. Errors name the file (and the line, for an overlong one). Internal to runtime/:
/// not part of the public API.
///
/// Pipes and character devices are accepted (a trace may come from a process substitution or
/// /dev/stdin): they are read under the same bounds, counted as the data arrives, so /dev/zero
/// fails after one overlong line. Directories are refused.

#include <fstream>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/core/input_limits.hpp"
#include "runtime/core/result.hpp"

namespace tessera::detail {

/// Opens `path` for reading: an error (io) when it cannot be opened, (invalid_input) when it is
/// a directory or a regular file larger than `lim.max_bytes`; nothing is read.
result<std::ifstream> open_input(const std::string& path, const limits::file_limits& lim);

/// Reads all of `path` under `lim`: the file's size and every line's length are bounded.
result<std::string> read_text_file(const std::string& path, const limits::file_limits& lim);

/// Checks text already in memory (e.g. a request body named `path`) against `lim`: its size
/// and every line's length.
status check_text(std::string_view text, const std::string& path, const limits::file_limits& lim);

/// Reads a stream line by line under `lim`. Lines lose their line break and a trailing CR
/// (CRLF files). A line longer than lim.max_line_bytes, or more than lim.max_bytes in all,
/// stops the reading with an error naming `name` and the line; memory stays within one line.
class line_reader {
 public:
  line_reader(std::istream& in, std::string name, const limits::file_limits& lim);

  /// The next line, valid until the next call; false at the end of the stream or on an error
  /// (then err() says which).
  bool next(std::string_view& line);

  /// Number of the line next() returned last (1-based).
  int line_no() const { return line_no_; }

  /// Why reading stopped early, if it did.
  const std::optional<error>& err() const { return err_; }

 private:
  bool stop(error e);

  std::istream& in_;
  std::string name_;
  limits::file_limits lim_;
  std::string buf_;
  std::size_t total_ = 0;
  int line_no_ = 0;
  std::optional<error> err_;
};

}  // namespace tessera::detail
