#pragma once
/// @file channel.hpp
/// The connection of the C++ lease client (tessera_client.hpp, which includes this part) to
/// the node's lease socket: one request line out, one reply line back, checked.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "json.hpp"
#include "lease_error.hpp"

namespace tessera_client {
namespace detail {

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
      if (n <= 0)
        throw lease_error(std::string("the lease channel broke: ") + std::strerror(errno));
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
      if (n == 0)
        throw lease_error("the node closed the lease channel without answering '" + op + "'");
      pending_.append(buf, std::size_t(n));
    }
  }
  static void check(const std::string& op, const json& reply) {
    if (reply.k != json::kind::object)
      throw lease_error("the node's reply to '" + op + "' is not a JSON object");
    const json* o = reply.get("op");
    if (o && o->k == json::kind::string && o->str == "error") {
      const json* m = reply.get("message");
      throw lease_error("the node refused '" + op +
                        "': " + (m && m->k == json::kind::string ? m->str : "(no message)"));
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

}  // namespace detail
}  // namespace tessera_client
