#pragma once
/// @file text.hpp
/// Small locale-independent text helpers shared by the input readers (trace, job templates,
/// throughput table, TOML files). Internal to runtime/: not part of the public API.

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace tessera::detail {

/// `s` without leading and trailing blanks (space, tab, CR, LF).
inline std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

/// ASCII lower-case copy of `s`.
inline std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// True when `s` has an ASCII upper-case letter.
inline bool has_upper(std::string_view s) {
  for (char c : s)
    if (c >= 'A' && c <= 'Z') return true;
  return false;
}

/// Splits `s` at every `sep`, keeping empty fields ("a\t\tb" has three).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const auto pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

/// One CSV line's fields (double quotes may hold commas; "" is a quote inside them).
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

/// Parses all of `s` (after trimming) as a decimal integer; nullopt otherwise.
inline std::optional<long long> parse_int(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  const auto* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != end) return std::nullopt;
  return v;
}

/// Parses all of `s` (after trimming) as a finite decimal number; nullopt otherwise.
inline std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  if (s.empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

/// Shortest text that reads back as exactly `x` ("1", "2.5", "1e+20").
inline std::string format_shortest(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

/// `x` with 6 decimals ("-1.000000"), as Gavel writes it; when 6 decimals would lose
/// precision, the shortest exact form instead, so a written value always reads back equal.
inline std::string format_fixed6(double x) {
  char buf[400];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed, 6);
  if (r.ec == std::errc()) {
    std::string s(buf, r.ptr);
    if (parse_double(s) == x) return s;
  }
  return format_shortest(x);
}

/// `x` as an integer when it is one ("1000"), else the shortest exact form.
inline std::string format_count(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(x));
    return std::string(buf, r.ptr);
  }
  return format_shortest(x);
}

/// `s` quoted for a message, shortened when long: 'abc'.
inline std::string quoted(std::string_view s) {
  constexpr std::size_t max_len = 60;
  if (s.size() > max_len) return "'" + std::string(s.substr(0, max_len)) + "...'";
  return "'" + std::string(s) + "'";
}

/// True when JSON brackets outside strings nest deeper than `limit` somewhere in `s`: checked
/// before parsing, so a text of nothing but '[' never becomes millions of values.
inline bool json_nested_deeper_than(std::string_view s, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : s) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace tessera::detail
