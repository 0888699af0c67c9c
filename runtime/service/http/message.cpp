#include "runtime/service/http/message.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace tessera::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Decodes one query-string component ('%XX' escapes, '+' as a space); false on a bad escape
/// or a decoded control byte.
bool decode_component(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return false;
    out.push_back(c);
  }
  return true;
}

/// The length of the valid UTF-8 sequence at s[i], 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  unsigned min = 0;
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf)
    n = 2, min = 0x80;
  else if (b >= 0xe0 && b <= 0xef)
    n = 3, min = 0x800;
  else if (b >= 0xf0 && b <= 0xf4)
    n = 4, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  unsigned cp = b & (0xff >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

/// `s` as a JSON string literal, quotes included.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u == '"' || u == '\\') {
      out += '\\';
      out += s[i++];
    } else if (u < 0x20 || u == 0x7f) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
      ++i;
    } else if (const auto n = utf8_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  return out + "\"";
}

}  // namespace

std::optional<refusal> split_target(std::string_view target, std::string& path,
                                    std::map<std::string, std::string>& query) {
  path.clear();
  query.clear();
  if (target.empty() || target.front() != '/')
    return refusal{400, "request target must be a path starting with '/'"};
  const auto q = target.find('?');
  path = std::string(target.substr(0, q));
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  std::string key, value;
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const auto item = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const auto raw_value = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
    if (!decode_component(item.substr(0, eq), key) || !decode_component(raw_value, value))
      return refusal{400,
                     "bad query string: a '%' escape is malformed or decodes to a "
                     "control character"};
    if (key.empty()) return refusal{400, "bad query string: a parameter without a name"};
    if (!query.emplace(key, value).second)
      return refusal{400, "bad query string: parameter '" + key + "' given twice"};
  }
  return std::nullopt;
}

std::string error_body(std::string_view message) {
  return "{\"error\": " + json_string(message) + "}";
}

bool host_allowed(std::string_view host, const std::vector<std::string>& names,
                  std::uint16_t port) {
  if (names.empty()) return true;
  std::string_view name = host, port_text;
  const auto colon = host.rfind(':');
  const auto bracket = host.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    name = host.substr(0, colon);
    port_text = host.substr(colon + 1);
    if (port_text != std::to_string(port)) return false;
  }
  if (name.size() > 2 && name.front() == '[' && name.back() == ']')
    name = name.substr(1, name.size() - 2);
  // An address literal names the server by itself: a rebinding attack needs a DNS name.
  const std::string literal(name);
  in6_addr any{};
  if (::inet_pton(AF_INET, literal.c_str(), &any) == 1 ||
      ::inet_pton(AF_INET6, literal.c_str(), &any) == 1)
    return true;
  for (std::string_view n : names) {
    if (n.size() > 2 && n.front() == '[' && n.back() == ']') n = n.substr(1, n.size() - 2);
    if (!name.empty() && equal_nocase(name, n)) return true;
  }
  return false;
}

bool equal_nocase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // volatile: no early exit on the first difference
  for (std::size_t i = 0; i < a.size(); ++i) diff = diff | static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool is_public(std::string_view method, std::string_view path,
               const std::vector<std::string>& public_paths) {
  return method == "GET" &&
         std::find(public_paths.begin(), public_paths.end(), path) != public_paths.end();
}

std::optional<refusal> check_token(std::string_view authorization, std::string_view token) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.empty())
    return refusal{401, "missing bearer token (header Authorization: Bearer TOKEN)"};
  if (authorization.size() < scheme.size() ||
      !equal_nocase(authorization.substr(0, scheme.size()), scheme))
    return refusal{401, "the Authorization header must be 'Bearer TOKEN'"};
  auto given = authorization.substr(scheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  while (!given.empty() && given.back() == ' ') given.remove_suffix(1);
  if (token.empty() || !constant_time_equal(given, token))
    return refusal{401, "wrong bearer token"};
  return std::nullopt;
}

std::string request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (equal_nocase(n, name)) return v;
  return "";
}

}  // namespace tessera::http
