#pragma once
/// @file channel.hpp
/// The connection of the C++ lease client (tessera_client.hpp, which includes this part) to
/// the node's lease socket: one request line out (with a descriptor for `average`), one reply
/// line back, checked.

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

  /// Sends one request line (with descriptor `fd` attached when it is not -1) and returns the
  /// reply object; an `error` reply, a closed channel or a reply that is not an object of this
  /// protocol version throws (and closes the channel).
  json request(const std::string& op, const std::string& line, int fd = -1) {
    if (fd_ < 0) throw lease_error("cannot send '" + op + "': the lease channel is closed");
    try {
      if (fd >= 0)
        send_with_fd(line, fd);
      else
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
  /// The line with `fd` in SCM_RIGHTS ancillary data, the rest of it (if the first send was
  /// short) after.
  void send_with_fd(const std::string& line, int fd) {
    iovec iov{const_cast<char*>(line.data()), line.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(h), &fd, sizeof fd);
    ssize_t n;
    do n = ::sendmsg(fd_, &msg, send_flags());
    while (n < 0 && errno == EINTR);
    if (n <= 0) throw lease_error(std::string("the lease channel broke: ") + std::strerror(errno));
    send_all(line.substr(std::size_t(n)));
  }
  static int send_flags() {
#ifdef MSG_NOSIGNAL
    return MSG_NOSIGNAL;  // a closed peer is an error, not SIGPIPE
#else
    return 0;
#endif
  }
  void send_all(const std::string& line) {
    const int flags = send_flags();
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
      throw lease_error("the node's reply to '" + op + "' is not lease protocol version " +
                        std::to_string(protocol_version));
    if (!o || o->k != json::kind::string)
      throw lease_error("the node's reply to '" + op + "' has no op");
  }

  int fd_ = -1;
  std::string pending_;
};

}  // namespace detail
}  // namespace tessera_client
