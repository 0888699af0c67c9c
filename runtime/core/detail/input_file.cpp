#include "runtime/core/detail/input_file.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace tessera::detail {

namespace {

std::string bytes_text(std::size_t n) { return std::to_string(n) + " bytes"; }

/// "the <what> is larger than <max> bytes": the message of a file over its size bound.
error too_large(const std::string& path, const limits::file_limits& lim, const std::string& size) {
  return input_error(path, 0, "",
                     std::string(lim.what) + " is " + size + "; at most " +
                         bytes_text(lim.max_bytes) + " are read");
}

error line_too_long(const std::string& path, int line, const limits::file_limits& lim) {
  return input_error(
      path, line, "",
      "line longer than " + bytes_text(lim.max_line_bytes) + " (the limit for a " + lim.what + ")");
}

}  // namespace

result<std::ifstream> open_input(const std::string& path, const limits::file_limits& lim) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!ec && fs::is_directory(st))
    return input_error(path, 0, "", std::string("is a directory, not a ") + lim.what);
  if (!ec && fs::is_regular_file(st)) {
    const auto size = fs::file_size(path, ec);
    if (!ec && size > lim.max_bytes) return too_large(path, lim, bytes_text(size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return error{error_kind::io, path + ": cannot open " + lim.what};
  return in;
}

result<std::string> read_text_file(const std::string& path, const limits::file_limits& lim) {
  auto in = open_input(path, lim);
  if (!in) return in.err();
  std::string text;
  char chunk[1 << 16];
  while (*in) {
    in->read(chunk, sizeof chunk);
    const auto got = static_cast<std::size_t>(in->gcount());
    if (text.size() + got > lim.max_bytes)
      return too_large(path, lim, "larger than " + bytes_text(lim.max_bytes));
    text.append(chunk, got);
  }
  if (in->bad()) return error{error_kind::io, path + ": read error"};
  if (auto st = check_text(text, path, lim); !st) return st.err();
  return text;
}

status check_text(std::string_view text, const std::string& path, const limits::file_limits& lim) {
  if (text.size() > lim.max_bytes)
    return too_large(path, lim, "larger than " + bytes_text(lim.max_bytes));
  std::size_t start = 0;
  int line = 1;
  for (;;) {
    const auto nl = text.find('\n', start);
    const std::size_t end = nl == std::string::npos ? text.size() : nl;
    std::size_t len = end - start;
    if (len > 0 && text[end - 1] == '\r') --len;
    if (len > lim.max_line_bytes) return line_too_long(path, line, lim);
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return {};
}

line_reader::line_reader(std::istream& in, std::string name, const limits::file_limits& lim)
    : in_(in), name_(std::move(name)), lim_(lim), buf_(lim.max_line_bytes + 2, '\0') {}

bool line_reader::stop(error e) {
  err_ = std::move(e);
  return false;
}

bool line_reader::next(std::string_view& line) {
  if (err_ || !in_) return false;
  // getline stores at most size-1 characters: one more than a line may hold, so a CR before
  // the line break still fits, and an overlong line is told apart by what is left.
  in_.getline(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  const auto got = static_cast<std::size_t>(in_.gcount());
  if (got == 0 && in_.eof())
    return in_.bad() ? stop(error{error_kind::io, name_ + ": read error"}) : false;
  ++line_no_;
  total_ += got;
  if (total_ > lim_.max_bytes)
    return stop(too_large(name_, lim_, "larger than " + bytes_text(lim_.max_bytes)));
  if (in_.fail() && !in_.eof()) {
    if (in_.bad()) return stop(error{error_kind::io, name_ + ": read error"});
    return stop(line_too_long(name_, line_no_, lim_));  // the buffer filled before a line break
  }
  // Without eof, getline also extracted the line break, which it does not store.
  std::size_t len = in_.eof() ? got : got - 1;
  if (len > 0 && buf_[len - 1] == '\r') --len;
  if (len > lim_.max_line_bytes) return stop(line_too_long(name_, line_no_, lim_));
  line = std::string_view(buf_.data(), len);
  return true;
}

}  // namespace tessera::detail
