#pragma once
/// @file json.hpp
/// The JSON of the lease protocol for the C++ lease client (tessera_client.hpp, which includes
/// this part): a parsed value, a small strict reader of the node's replies, the writer of
/// request lines, and the checked fields of a reply.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <locale>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lease_error.hpp"

namespace tessera_client {
namespace detail {

constexpr int protocol_version = 2;

/// A parsed JSON value; objects keep their members in order (replies are small).
struct json {
  enum class kind { null, boolean, number, string, array, object } k = kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<json> items;
  std::vector<std::pair<std::string, json>> members;

  const json* get(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

/// A small strict JSON reader (RFC 8259; nesting at most 64 deep).
class json_reader {
 public:
  explicit json_reader(const std::string& text) : s_(text) {}

  json parse() {
    json v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw lease_error(std::string("the node's reply is not valid JSON (") + what + " at byte " +
                      std::to_string(i_) + ")");
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n'))
      ++i_;
  }
  bool eat(const char* word) {
    std::size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }
  json value(int depth) {
    if (depth > 64) fail("nesting too deep");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end");
    json v;
    char c = s_[i_];
    if (c == '{') {
      v.k = json::kind::object;
      container('}', [&] {
        skip_ws();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name");
        std::string key = string_body();
        skip_ws();
        if (i_ >= s_.size() || s_[i_++] != ':') fail("expected ':'");
        v.members.emplace_back(std::move(key), value(depth + 1));
      });
    } else if (c == '[') {
      v.k = json::kind::array;
      container(']', [&] { v.items.push_back(value(depth + 1)); });
    } else if (c == '"') {
      v.k = json::kind::string;
      v.str = string_body();
    } else if (eat("true")) {
      v.k = json::kind::boolean;
      v.b = true;
    } else if (eat("false")) {
      v.k = json::kind::boolean;
    } else if (eat("null")) {
      v.k = json::kind::null;
    } else {
      v.k = json::kind::number;
      v.num = number();
    }
    return v;
  }
  template <class Member>
  void container(char close, Member member) {
    ++i_;
    skip_ws();
    if (i_ < s_.size() && s_[i_] == close) {
      ++i_;
      return;
    }
    for (;;) {
      member();
      skip_ws();
      if (i_ >= s_.size()) fail("unexpected end");
      char c = s_[i_++];
      if (c == close) return;
      if (c != ',') fail("expected ',' or the container's end");
    }
  }
  double number() {
    std::size_t start = i_;
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    auto digits = [&] {
      std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > d;
    };
    if (!digits()) fail("expected a value");
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) fail("bad fraction");
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) fail("bad exponent");
    }
    std::istringstream in(s_.substr(start, i_ - start));
    in.imbue(std::locale::classic());
    double x = 0;
    in >> x;
    return x;  // out of range: +-inf or 0, refused by the field checks
  }
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      u <<= 4;
      if (c >= '0' && c <= '9')
        u |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        u |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        u |= unsigned(c - 'A' + 10);
      else
        fail("bad \\u escape");
    }
    return u;
  }
  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }
  std::string string_body() {
    ++i_;  // the opening quote
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      char e = s_[i_++];
      const char* plain = "\"\\/bfnrt";
      const char* means = "\"\\/\b\f\n\r\t";
      if (const char* p = std::strchr(plain, e); p && e) {
        out += means[p - plain];
      } else if (e == 'u') {
        unsigned cp = hex4();
        if (cp >= 0xD800 && cp < 0xDC00 && eat("\\u")) {
          unsigned lo = hex4();
          cp = (lo >= 0xDC00 && lo < 0xE000) ? 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                                             : 0xFFFD;
        }
        utf8(out, cp >= 0xD800 && cp < 0xE000 ? 0xFFFD : cp);
      } else {
        fail("bad escape");
      }
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

/// Builds one request line: {"v":1,"op":...,...}\n.
class json_writer {
 public:
  explicit json_writer(const char* op) {
    out_.imbue(std::locale::classic());  // '.' decimals and no digit grouping, whatever locale
    out_.precision(17);                  // doubles round-trip
    out_ << "{\"v\":" << protocol_version << ",\"op\":";
    quoted(op);
  }
  json_writer& field(const char* key, std::int64_t x) { return name(key), out_ << x, *this; }
  json_writer& field(const char* key, bool x) {
    return name(key), out_ << (x ? "true" : "false"), *this;
  }
  /// A non-finite number is left out (JSON has none; the node would refuse the message).
  json_writer& field(const char* key, std::optional<double> x) {
    if (x && std::isfinite(*x)) name(key), out_ << *x;
    return *this;
  }
  json_writer& field(const char* key, const std::string& s) { return name(key), quoted(s), *this; }
  json_writer& field(const char* key, const std::vector<std::int64_t>& xs) {
    name(key);
    out_ << '[';
    for (std::size_t k = 0; k < xs.size(); ++k) out_ << (k ? "," : "") << xs[k];
    out_ << ']';
    return *this;
  }
  std::string line() const { return out_.str() + "}\n"; }

 private:
  void name(const char* key) {
    out_ << ',';
    quoted(key);
    out_ << ':';
  }
  void quoted(const std::string& s) {
    out_ << '"';
    for (char c : s) {
      if (c == '"' || c == '\\')
        out_ << '\\' << c;
      else if (static_cast<unsigned char>(c) < 0x20)
        out_ << "\\u00"
             << "0123456789abcdef"[c >> 4] << "0123456789abcdef"[c & 15];
      else
        out_ << c;
    }
    out_ << '"';
  }
  std::ostringstream out_;
};

/// An integer field of a reply, at least `low`.
inline std::int64_t int_field(const json& reply, const char* name, std::int64_t low) {
  const json* f = reply.get(name);
  if (!f || f->k != json::kind::number || f->num != std::floor(f->num) || f->num < double(low) ||
      f->num > 9007199254740992.0)
    throw lease_error(std::string("the node's reply has no valid '") + name + "'");
  return static_cast<std::int64_t>(f->num);
}

inline double number_field(const json& reply, const char* name) {
  const json* f = reply.get(name);
  if (!f || f->k != json::kind::number || !std::isfinite(f->num))
    throw lease_error(std::string("the node's reply has no valid '") + name + "'");
  return f->num;
}

}  // namespace detail
}  // namespace tessera_client
