#include "runtime/node/program/lease_protocol.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/core/detail/text.hpp"

namespace tessera::program {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

/// Largest count a program may report (steps, pid, step): every JSON reader holds it exactly.
constexpr std::int64_t max_count = std::int64_t{1} << 53;
/// Most float32 values one average may name (16 TiB): a bound on the arithmetic only; what
/// the program's shared memory holds is checked when the node maps it (shared_floats).
constexpr std::size_t max_floats = std::size_t{1} << 42;
/// Deepest nesting of brackets a line may have. A request is an object holding at most an
/// array; the limit keeps a line of nothing but '[' from becoming millions of JSON values.
constexpr int max_depth = 16;

error bad(std::string what) { return error{error_kind::invalid_input, std::move(what)}; }

/// Up to `cut` characters of `s` for a message: printable ASCII as it is, other bytes as \xNN.
std::string excerpt(std::string_view s, std::size_t cut = 40) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < cut; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > cut) out += "...";
  return out;
}

/// Runs the JSON parser over a line it refused, for the reason it gives: a SAX handler that
/// builds nothing and keeps the parse error.
class why_not_json : public nlohmann::json_sax<json> {
 public:
  std::string reason;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." less its tag.
    reason = e.what();
    if (const auto tag = reason.find("] "); tag != std::string::npos) reason.erase(0, tag + 2);
    // A message is one line: its column is what tells where.
    if (const auto at = reason.find("at line 1, column"); at != std::string::npos)
      reason.replace(at, 17, "at column");
    return false;
  }

  static std::string of(std::string_view line) {
    why_not_json h;
    json::sax_parse(line.begin(), line.end(), &h);
    return h.reason;
  }
};

/// How a value that has the wrong type reads in a message ("got a string", "got -3").
std::string describe(const json& v) {
  if (v.is_number() || v.is_boolean() || v.is_null()) return excerpt(v.dump());
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

/// The value of an integer JSON number, when it is one that fits std::int64_t.
std::optional<std::int64_t> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

/// Reads the fields of one request object; messages start with the request's op.
class field_reader {
 public:
  field_reader(const json& obj, std::string op) : obj_(obj), op_(std::move(op)) {}

  /// A whole number in [0, max]; required unless `optional`.
  result<std::optional<std::int64_t>> count(const char* key, bool optional,
                                            std::int64_t max = max_count) const {
    const json* v = find(key);
    if (!v) return missing<std::int64_t>(key, optional, "an integer");
    const auto n = as_int(*v);
    if (!n || *n < 0 || *n > max)
      return bad(where(key) + "must be an integer from 0 to " + std::to_string(max) + ", got " +
                 describe(*v));
    return std::optional<std::int64_t>(*n);
  }

  /// A finite number (optional).
  result<std::optional<double>> number(const char* key) const {
    const json* v = find(key);
    if (!v) return std::optional<double>();
    if (!v->is_number()) return bad(where(key) + "must be a number, got " + describe(*v));
    const double d = v->get<double>();
    if (!std::isfinite(d))
      return bad(where(key) + "must be a finite number, got " + excerpt(v->dump()));
    return std::optional<double>(d);
  }

  /// A boolean (optional).
  result<std::optional<bool>> flag(const char* key) const {
    const json* v = find(key);
    if (!v) return std::optional<bool>();
    if (!v->is_boolean()) return bad(where(key) + "must be true or false, got " + describe(*v));
    return std::optional<bool>(v->get<bool>());
  }

  /// A string (required).
  result<std::string> text(const char* key) const {
    const json* v = find(key);
    if (!v) return bad("'" + op_ + "' needs field '" + key + "' (a string)");
    if (!v->is_string()) return bad(where(key) + "must be a string, got " + describe(*v));
    return v->get<std::string>();
  }

  /// An array (required), or null with the error in `err`.
  const json* array(const char* key, error& err) const {
    const json* v = find(key);
    if (!v)
      err = bad("'" + op_ + "' needs field '" + key + "' (an array of integers)");
    else if (!v->is_array())
      err = bad(where(key) + "must be an array, got " + describe(*v));
    else
      return v;
    return nullptr;
  }

  /// True when the request has field `key`.
  bool has(const char* key) const { return find(key) != nullptr; }

  /// "'<op>': field '<key>' " for a message about that field.
  std::string where(const char* key) const { return "'" + op_ + "': field '" + key + "' "; }

 private:
  const json* find(const char* key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  template <class T>
  result<std::optional<T>> missing(const char* key, bool optional, const char* what) const {
    if (optional) return std::optional<T>();
    return bad("'" + op_ + "' needs field '" + key + "' (" + what + ")");
  }

  const json& obj_;
  std::string op_;
};

/// Reads the version and the op of a parsed line.
result<request_op> read_header(const json& j) {
  const std::string speaks = std::to_string(lease_protocol_version);
  const auto v = j.find("v");
  if (v == j.end())
    return bad(
        "field 'v' is missing: every message carries the protocol version (\"v\": " + speaks + ")");
  const auto ver = as_int(*v);
  if (!ver)
    return bad("field 'v' must be the protocol version as an integer (this node speaks " + speaks +
               "), got " + describe(*v));
  if (*ver != lease_protocol_version)
    return bad("protocol version " + std::to_string(*ver) +
               " is not spoken here (this node speaks " + speaks + ")");
  const auto op = j.find("op");
  const char* ops = "hello, report, average, complete or renew";
  if (op == j.end()) return bad(std::string("field 'op' is missing (one of ") + ops + ")");
  if (!op->is_string())
    return bad(std::string("field 'op' must be a string (") + ops + "), got " + describe(*op));
  const auto& name = op->get_ref<const std::string&>();
  if (name == "hello") return request_op::hello;
  if (name == "report") return request_op::report;
  if (name == "average") return request_op::average;
  if (name == "complete") return request_op::complete;
  if (name == "renew") return request_op::renew;
  return bad("unknown op '" + excerpt(name) + "' (a program sends " + ops + ")");
}

/// Checks `sizes` (each and their sum at most max_floats); fills r.sizes.
status read_sizes(const field_reader& f, const json& arr, lease_request& r) {
  std::size_t sum = 0;
  r.sizes.reserve(arr.size());
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto n = as_int(arr[i]);
    if (!n || *n < 0 || static_cast<std::uint64_t>(*n) > max_floats)
      return bad(f.where("sizes") + "item " + std::to_string(i) + " must be an integer from 0 to " +
                 std::to_string(max_floats) + ", got " + describe(arr[i]));
    sum += static_cast<std::size_t>(*n);
    if (sum > max_floats)
      return bad(f.where("sizes") + "adds up to more than " + std::to_string(max_floats) +
                 " values, the most one average carries");
    r.sizes.push_back(static_cast<std::size_t>(*n));
  }
  return {};
}

/// Reads an average's sizes into `r`; its buffers come in shared memory, not in the line.
status read_average(const field_reader& f, lease_request& r) {
  error err;
  const json* sizes = f.array("sizes", err);
  if (!sizes) return err;
  if (f.has("data"))
    return bad(f.where("data") +
               "is lease protocol version 1's: in version 2 the buffers travel in shared "
               "memory, a sealed memfd sent with the line (SCM_RIGHTS); update the client");
  return read_sizes(f, *sizes, r);
}

/// Reads the fields of `op` from `j` into `r`.
status read_fields(const json& j, request_op op, lease_request& r) {
  const field_reader f(j, op_name(op));
  if (op == request_op::average) return read_average(f, r);
  if (op == request_op::hello) {
    auto token = f.text("token");
    auto pid = f.count("pid", false);
    auto step = f.count("step", true);
    auto renew = f.flag("renew");
    if (!token) return token.err();
    if (!pid) return pid.err();
    if (!step) return step.err();
    if (!renew) return renew.err();
    r.token = std::move(*token);
    r.pid = **pid;
    r.own_step = *step;
    r.renew = renew->value_or(false);
    return {};
  }
  auto steps = f.count("steps", false);
  auto loss = f.number("loss");
  if (!steps) return steps.err();
  if (!loss) return loss.err();
  r.steps = **steps;
  r.loss = *loss;
  if (op == request_op::report) {
    auto fin = f.flag("final");
    if (!fin) return fin.err();
    r.final = fin->value_or(false);
  } else if (op == request_op::complete) {
    auto acc = f.number("accuracy");
    if (!acc) return acc.err();
    r.accuracy = *acc;
  }
  return {};
}

std::string dump_line(const ordered_json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

ordered_json header(const char* op) {
  ordered_json j;
  j["v"] = lease_protocol_version;
  j["op"] = op;
  return j;
}

}  // namespace

const char* op_name(request_op op) {
  switch (op) {
    case request_op::hello:
      return "hello";
    case request_op::report:
      return "report";
    case request_op::average:
      return "average";
    case request_op::complete:
      return "complete";
    case request_op::renew:
      return "renew";
  }
  return "?";
}

std::optional<std::string> token_of(std::string_view line) {
  if (detail::json_nested_deeper_than(line, max_depth)) return std::nullopt;
  const json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (!j.is_object()) return std::nullopt;  // a discarded parse is not an object either
  const auto t = j.find("token");
  if (t == j.end() || !t->is_string()) return std::nullopt;
  return t->get<std::string>();
}

result<lease_request> parse_request(std::string_view line) {
  if (detail::json_nested_deeper_than(line, max_depth))
    return bad("brackets nest deeper than " + std::to_string(max_depth) +
               " levels (a message is a flat JSON object)");
  const json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) {
    std::string m = "not a line of JSON: '" + excerpt(line) + "'";
    if (const auto why = why_not_json::of(line); !why.empty()) m += ": " + excerpt(why, 160);
    if (line.find("NaN") != line.npos || line.find("Infinity") != line.npos)
      m += " (NaN and Infinity are not JSON numbers)";
    return bad(m);
  }
  if (!j.is_object()) return bad("a message must be a JSON object, got " + describe(j));
  auto op = read_header(j);
  if (!op) return op.err();
  lease_request r;
  r.op = *op;
  if (auto s = read_fields(j, *op, r); !s) return s.err();
  return r;
}

std::string format_lease(const lease_terms& t) {
  ordered_json j = header("lease");
  j["job"] = t.job;
  j["copy"] = t.copy;
  j["copies"] = t.copies;
  j["step"] = t.step;
  j["steps"] = t.steps;
  // JSON has no infinity: an endless time is "no cap"; NaN would be written as null.
  j["seconds"] = std::isfinite(t.seconds) ? t.seconds : -1.0;
  j["speed"] = std::isfinite(t.speed) ? t.speed : 1.0;
  j["writer"] = t.writer;
  j["renewable"] = t.renewable;
  j["ends_job"] = t.ends_job;
  j["checkpoint"] = t.checkpoint;
  return dump_line(j);
}

std::string format_averaged(const std::vector<std::size_t>& sizes, std::int32_t copies,
                            std::int64_t step) {
  ordered_json j = header("averaged");
  j["sizes"] = sizes;
  j["copies"] = copies;
  j["step"] = step;
  return dump_line(j);
}

std::string format_exit() { return dump_line(header("exit")); }

std::string format_error(std::string_view message) {
  ordered_json j = header("error");
  j["message"] = std::string(message);
  return dump_line(j);
}

}  // namespace tessera::program
