#pragma once
/// @file tessera_client.hpp
/// Header-only C++17 client of tessera's lease channel (protocol version 1,
/// docs/lease-protocol.md): a user's own training program runs as an elastic tessera job.
/// POSIX sockets and the standard library only.
///
///     tessera_client::lease lease(own_step);      // hello to the node (TESSERA_LEASE)
///     while (step < total && lease.next()) {      // false once the lease has expired
///       train_one_step(step++);
///       lease.report(loss);                       // optional: the latest loss
///     }
///     if (lease.expired()) save_checkpoint();     // writer only; average() first if forked
///     else lease.complete(loss);                  // the job is finished; then exit 0
///
/// `next()` is called before every step: it counts the previous step as made, paces it on a
/// node declared slow (after a step of d seconds it sleeps d x (1/speed - 1)), reports the
/// steps made to the node at most every 0.2 s and on the last step, and returns false when
/// the lease's step cap is reached or its time is up. `should_checkpoint()` is true during the
/// lease's last step: the one after which the cap is reached, or after which another step (at
/// the moving average of the step time) would not end before the deadline. A node may shorten
/// a lease in a reply (the job was stopped), so the loop can end with no step flagged:
/// checkpoint after the loop when `expired()`, as above.
///
/// Outside tessera (TESSERA_LEASE unset) a lease is a pass-through: `next()` is always true,
/// it never expires, `average` leaves the buffers as they are, `report`/`complete` do nothing.
///
/// Errors: a node's `error` reply, a broken channel or a malformed reply throw `lease_error`
/// (let it end the program with a non-zero exit: the job restarts from its last checkpoint).
/// A node's `exit` reply ends the lease as an expiry; `average` then leaves the buffers as they
/// are (copies = 1) and `complete` does nothing, so the program checkpoints and exits 0. Not thread-safe: one lease per process, used by one thread.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <locale>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessera_client {

/// The node refused the program, the channel broke, or a reply made no sense.
class lease_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What `lease::average` tells besides the means it writes into the buffers.
struct averaged {
  std::int64_t step = 0;  ///< the job's step after the merge: store it in the checkpoint
  int copies = 1;         ///< how many copies the mean is over
};

namespace detail {

constexpr int protocol_version = 1;

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
      if (c >= '0' && c <= '9') u |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f') u |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') u |= unsigned(c - 'A' + 10);
      else fail("bad \\u escape");
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
      if (c == '"' || c == '\\') out_ << '\\' << c;
      else if (static_cast<unsigned char>(c) < 0x20) out_ << "\\u00" << "0123456789abcdef"[c >> 4]
                                                           << "0123456789abcdef"[c & 15];
      else out_ << c;
    }
    out_ << '"';
  }
  std::ostringstream out_;
};

inline const char* base64_alphabet() {
  return "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

/// The buffers' float32 values, little-endian and concatenated, as standard base64.
inline std::string encode_floats(const std::vector<std::vector<float>>& buffers) {
  std::vector<unsigned char> raw;
  for (const auto& b : buffers)
    for (float f : b) {
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int k = 0; k < 4; ++k) raw.push_back(static_cast<unsigned char>(u >> (8 * k)));
    }
  const char* abc = base64_alphabet();
  std::string out;
  out.reserve((raw.size() + 2) / 3 * 4);
  for (std::size_t k = 0; k < raw.size(); k += 3) {
    std::uint32_t n = std::uint32_t(raw[k]) << 16;
    if (k + 1 < raw.size()) n |= std::uint32_t(raw[k + 1]) << 8;
    if (k + 2 < raw.size()) n |= raw[k + 2];
    out += abc[(n >> 18) & 63];
    out += abc[(n >> 12) & 63];
    out += k + 1 < raw.size() ? abc[(n >> 6) & 63] : '=';
    out += k + 2 < raw.size() ? abc[n & 63] : '=';
  }
  return out;
}

/// Decodes canonical base64 (padded, unused bits zero) of little-endian float32 values;
/// nullopt when it is not that.
inline std::optional<std::vector<float>> decode_floats(const std::string& text) {
  std::size_t n = text.size();
  if (n % 4) return std::nullopt;
  std::size_t pad = n >= 1 && text[n - 1] == '=' ? (n >= 2 && text[n - 2] == '=' ? 2 : 1) : 0;
  std::vector<unsigned char> raw;
  raw.reserve(n / 4 * 3);
  for (std::size_t k = 0; k < n; k += 4) {
    std::uint32_t group = 0;
    for (std::size_t j = k; j < k + 4; ++j) {
      const char* p = j < n - pad && text[j] ? std::strchr(base64_alphabet(), text[j]) : nullptr;
      if (!p && j < n - pad) return std::nullopt;
      group = (group << 6) | std::uint32_t(p ? p - base64_alphabet() : 0);
    }
    for (int b = 0; b < 3; ++b) raw.push_back(static_cast<unsigned char>(group >> (16 - 8 * b)));
  }
  for (std::size_t k = 0; k < pad; ++k) {
    if (raw.back() != 0) return std::nullopt;  // bits after the last byte must be zero
    raw.pop_back();
  }
  if (raw.size() % 4) return std::nullopt;
  std::vector<float> out(raw.size() / 4);
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::uint32_t u = 0;
    for (int j = 0; j < 4; ++j) u |= std::uint32_t(raw[4 * k + std::size_t(j)]) << (8 * j);
    std::memcpy(&out[k], &u, 4);
  }
  return out;
}

/// One connection to the node's lease socket: sends a line, reads the reply's line.
class channel {
 public:
  explicit channel(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
      throw lease_error("the lease socket path '" + path + "' (TESSERA_LEASE) is too long");
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd_ < 0) throw lease_error(std::string("socket: ") + std::strerror(errno));
    int rc;
    do rc = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      close();
      throw lease_error("cannot connect to the lease socket '" + path +
                        "' (TESSERA_LEASE): " + std::strerror(err));
    }
  }
  ~channel() { close(); }
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  bool open() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  /// Sends one request line and returns the reply object; an `error` reply, a closed channel
  /// or a reply that is not a version-1 object throws (and closes the channel).
  json request(const std::string& op, const std::string& line) {
    if (fd_ < 0) throw lease_error("cannot send '" + op + "': the lease channel is closed");
    try {
      send_all(line);
      json reply = json_reader(read_line(op)).parse();
      check(op, reply);
      return reply;
    } catch (...) {
      close();
      throw;
    }
  }

 private:
  void send_all(const std::string& line) {
#ifdef MSG_NOSIGNAL
    const int flags = MSG_NOSIGNAL;  // a closed peer is an error, not SIGPIPE
#else
    const int flags = 0;
#endif
    std::size_t done = 0;
    while (done < line.size()) {
      ssize_t n = ::send(fd_, line.data() + done, line.size() - done, flags);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw lease_error(std::string("the lease channel broke: ") + std::strerror(errno));
      done += std::size_t(n);
    }
  }
  std::string read_line(const std::string& op) {
    for (;;) {
      std::size_t end = pending_.find('\n');
      if (end != std::string::npos) {
        std::string line = pending_.substr(0, end);
        pending_.erase(0, end + 1);
        return line;
      }
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw lease_error(std::string("the lease channel broke: ") + std::strerror(errno));
      if (n == 0) throw lease_error("the node closed the lease channel without answering '" + op + "'");
      pending_.append(buf, std::size_t(n));
    }
  }
  static void check(const std::string& op, const json& reply) {
    if (reply.k != json::kind::object)
      throw lease_error("the node's reply to '" + op + "' is not a JSON object");
    const json* o = reply.get("op");
    if (o && o->k == json::kind::string && o->str == "error") {
      const json* m = reply.get("message");
      throw lease_error("the node refused '" + op + "': " +
                        (m && m->k == json::kind::string ? m->str : "(no message)"));
    }
    const json* v = reply.get("v");
    if (!v || v->k != json::kind::number || v->num != protocol_version)
      throw lease_error("the node's reply to '" + op + "' is not lease protocol version 1");
    if (!o || o->k != json::kind::string)
      throw lease_error("the node's reply to '" + op + "' has no op");
  }

  int fd_ = -1;
  std::string pending_;
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

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace detail

/// The lease of one program process (see the file's comment for the loop).
class lease {
 public:
  using clock = std::chrono::steady_clock;
  /// Called at every next() of a copy of several processes with {stop, last} (0 or 1); must
  /// return the element-wise maximum over the copy's processes (an all-reduce with MAX), so
  /// they all take the same number of steps. Not called when standalone.
  using agree_fn = std::function<std::array<int, 2>(std::array<int, 2>)>;

  /// Reads the environment; inside tessera connects and says hello, with `own_step` (the step
  /// the program's own checkpoint is at) when given.
  explicit lease(std::optional<std::int64_t> own_step = std::nullopt, agree_fn agree = {})
      : agree_(std::move(agree)), own_step_(own_step) {
    std::string path = detail::env("TESSERA_LEASE");
    if (path.empty()) {
      standalone_terms();
      return;
    }
    std::string token = detail::env("TESSERA_LEASE_TOKEN");
    if (token.empty()) throw lease_error("TESSERA_LEASE is set but TESSERA_LEASE_TOKEN is not");
    channel_.emplace(path);
    detail::json_writer w("hello");
    w.field("token", token).field("pid", std::int64_t(::getpid()));
    if (own_step) w.field("step", *own_step);
    auto sent = clock::now();
    apply(channel_->request("hello", w.line()), sent, true);
    last_report_ = clock::now();
  }
  /// Sends a last report if steps went unreported (best effort), closes the channel.
  ~lease() {
    try {
      close();
    } catch (...) {
    }
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;

  /// Call before every step: true = make one more step, false = the lease has ended.
  bool next() {
    finish_step();
    step_started_ = clock::now();
    bool stop = !may_step();
    bool last = !stop && is_last();
    if (agree_ && connected()) {
      auto both = agree_({stop ? 1 : 0, last ? 1 : 0});
      stop = both[0] != 0;
      last = both[1] != 0;
    }
    if (stop) {
      end_lease();
      return false;
    }
    last_ = last;
    in_step_ = true;
    return true;
  }

  bool should_checkpoint() const { return last_; }  ///< the current step is the lease's last
  bool expired() const { return expired_; }          ///< the lease (not the program) ended the loop
  bool standalone() const { return !channel_ && !exited_; }  ///< outside tessera
  std::int64_t job() const { return job_; }          ///< job id (-1 standalone without TESSERA_JOB_ID)
  int copy() const { return copy_; }
  int copies() const { return copies_; }             ///< > 1: forked, average at the lease end
  /// The job's step at the lease start (the own step passed to the constructor, if any).
  std::int64_t step() const { return step_; }
  bool writer() const { return writer_; }            ///< this process writes the checkpoint
  double speed() const { return speed_; }
  /// Steps made since the lease began, the one in progress included (after the loop left by
  /// its own condition or a break, it counts the step the loop left in).
  std::int64_t steps_made() const { return made_ + (in_step_ ? 1 : 0); }
  /// TESSERA_CHECKPOINT_DIR ("" when unset).
  std::string checkpoint_dir() const { return detail::env("TESSERA_CHECKPOINT_DIR"); }

  /// Records the latest loss; sends a report now when the last one is 0.2 s old (call it
  /// during long work outside the loop: the node kills a program silent for its grace).
  void report(std::optional<double> loss = std::nullopt) {
    if (loss) loss_ = loss;
    if (connected() && clock::now() - last_report_ >= report_interval) send_report(final_sent_);
  }

  /// Averages `buffers` with the job's other copies, in place (float32 on the wire); blocks
  /// until the node answers. Standalone or after `exit`: leaves them as they are (step: start +
  /// steps made, copies 1).
  averaged average(std::vector<std::vector<float>>& buffers) {
    finish_step();
    if (!channel_) return {step_ + made_, 1};  // standalone or after exit (closed: throws below)
    std::vector<std::int64_t> sizes;
    for (const auto& b : buffers) sizes.push_back(std::int64_t(b.size()));
    detail::json_writer w("average");
    w.field("sizes", sizes).field("data", detail::encode_floats(buffers));
    detail::json reply = channel_->request("average", w.line());
    const detail::json* op = reply.get("op");
    const detail::json* rs = reply.get("sizes");
    const detail::json* data = reply.get("data");
    bool same = op->str == "averaged" && rs && rs->k == detail::json::kind::array &&
                rs->items.size() == sizes.size() && data && data->k == detail::json::kind::string;
    for (std::size_t k = 0; same && k < sizes.size(); ++k)
      same = rs->items[k].k == detail::json::kind::number && rs->items[k].num == double(sizes[k]);
    auto means = same ? detail::decode_floats(data->str) : std::nullopt;
    std::size_t total = 0;
    for (auto s : sizes) total += std::size_t(s);
    if (!means || means->size() != total) {
      channel_->close();
      throw lease_error("the node answered 'average' with a malformed '" + op->str + "' reply");
    }
    std::size_t at = 0;
    for (auto& b : buffers)
      for (float& f : b) f = (*means)[at++];
    return {detail::int_field(reply, "step", 0),
            static_cast<int>(detail::int_field(reply, "copies", 1))};
  }

  /// Tells the node the job is finished (then exit 0). Nothing standalone or after `exit`.
  void complete(std::optional<double> loss = std::nullopt,
                std::optional<double> accuracy = std::nullopt) {
    finish_step();
    if (!channel_) return;  // standalone or after exit (a closed channel throws below)
    detail::json_writer w("complete");
    w.field("steps", made_).field("loss", loss ? loss : loss_).field("accuracy", accuracy);
    detail::json reply = channel_->request("complete", w.line());
    bool ok = reply.get("op")->str == "exit";
    channel_.reset();
    exited_ = true;
    if (!ok) throw lease_error("the node answered 'complete' with '" + reply.get("op")->str + "'");
  }

  /// Counts the step in progress, sends a last report if steps went unreported, closes the
  /// channel. For a program that leaves its loop early and exits without complete().
  void close() {
    finish_step();
    if (connected() && made_ != reported_) send_report(true);
    if (channel_) channel_->close();
  }

 private:
  static constexpr std::chrono::milliseconds report_interval{200};
  static constexpr double ewma = 0.25;  // weight of the newest step in the step-time average

  bool connected() const { return channel_.has_value() && channel_->open(); }

  bool may_step() const {
    if (expired_) return false;
    if (!connected()) return !channel_;  // standalone: always; a closed channel: never
    if (cap_ >= 0 && made_ >= cap_) return false;
    return !deadline_ || clock::now() < *deadline_;
  }
  bool is_last() const {
    if (!connected()) return false;
    if (cap_ >= 0 && made_ + 1 >= cap_) return true;
    if (!deadline_ || step_time_ < 0) return false;
    return clock::now() + 2 * std::chrono::duration<double>(step_time_) >= *deadline_;
  }
  void finish_step() {
    if (!in_step_) return;
    in_step_ = false;
    ++made_;
    if (!connected()) return;
    std::chrono::duration<double> took = clock::now() - step_started_;
    if (speed_ > 0 && speed_ < 1)
      std::this_thread::sleep_for(took * (1 / speed_ - 1));
    took = clock::now() - step_started_;
    step_time_ = step_time_ < 0 ? took.count() : (1 - ewma) * step_time_ + ewma * took.count();
    if (last_) end_lease();
    else if (clock::now() - last_report_ >= report_interval) send_report(false);
  }
  void end_lease() {
    expired_ = true;
    if (connected() && !final_sent_) send_report(true);
  }
  void send_report(bool final) {
    detail::json_writer w("report");
    w.field("steps", made_).field("loss", loss_);
    if (final) w.field("final", true);
    auto sent = clock::now();
    detail::json reply = channel_->request("report", w.line());
    last_report_ = clock::now();
    reported_ = made_;
    final_sent_ = final_sent_ || final;
    apply(reply, sent, false);
  }
  void standalone_terms() {
    std::string job = detail::env("TESSERA_JOB_ID"), copy = detail::env("TESSERA_COPY"),
                copies = detail::env("TESSERA_COPIES"), rank = detail::env("RANK");
    job_ = job.empty() ? -1 : std::atoll(job.c_str());
    copy_ = copy.empty() ? 0 : std::atoi(copy.c_str());
    copies_ = copies.empty() ? 1 : std::atoi(copies.c_str());
    step_ = own_step_.value_or(0);
    writer_ = rank.empty() || rank == "0";
    speed_ = 1;
    cap_ = -1;
    deadline_.reset();
  }
  /// Takes the terms of a `lease` reply (its request sent at `sent`), or the end for `exit`.
  void apply(const detail::json& reply, clock::time_point sent, bool first) {
    const std::string& op = reply.get("op")->str;
    if (op == "exit") {
      channel_.reset();
      exited_ = expired_ = true;
      if (first) standalone_terms();
      return;
    }
    if (op != "lease") {
      channel_->close();
      throw lease_error("the node answered with '" + op + "' where a 'lease' was due");
    }
    job_ = detail::int_field(reply, "job", 0);
    copy_ = static_cast<int>(detail::int_field(reply, "copy", 0));
    copies_ = static_cast<int>(detail::int_field(reply, "copies", 1));
    if (first) step_ = own_step_ ? *own_step_ : detail::int_field(reply, "step", 0);
    const detail::json* w = reply.get("writer");
    if (!w || w->k != detail::json::kind::boolean)
      throw lease_error("the node's reply has no valid 'writer'");
    writer_ = w->b;
    cap_ = detail::int_field(reply, "steps", -1);
    double seconds = detail::number_field(reply, "seconds");
    deadline_.reset();
    if (seconds >= 0)
      deadline_ = sent + std::chrono::duration_cast<clock::duration>(
                             std::chrono::duration<double>(seconds));
    speed_ = detail::number_field(reply, "speed");
    if (speed_ <= 0) throw lease_error("the node's reply has speed <= 0");
  }

  agree_fn agree_;
  std::optional<std::int64_t> own_step_;
  std::optional<detail::channel> channel_;
  std::int64_t job_ = -1, step_ = 0, cap_ = -1, made_ = 0, reported_ = 0;
  int copy_ = 0, copies_ = 1;
  bool writer_ = true, expired_ = false, exited_ = false, final_sent_ = false;
  bool in_step_ = false, last_ = false;
  double speed_ = 1, step_time_ = -1;
  std::optional<double> loss_;
  std::optional<clock::time_point> deadline_;
  clock::time_point step_started_{}, last_report_{};
};

}  // namespace tessera_client
