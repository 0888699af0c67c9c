#pragma once
// A program's end of a node's lease socket for the bench programs: one line out (an
// `average` with its memfd attached, SCM_RIGHTS), one line back, blocking. Exits the process
// with a message on any failure.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tessera::bench {

class lease_line_client {
 public:
  explicit lease_line_client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
      die("cannot connect to " + path);
  }
  ~lease_line_client() { ::close(fd_); }
  lease_line_client(const lease_line_client&) = delete;
  lease_line_client& operator=(const lease_line_client&) = delete;

  /// Sends `line` (with its '\n'; `fd` attached when not -1) and returns the reply line.
  std::string call(const std::string& line, int fd = -1) {
    iovec iov{const_cast<char*>(line.data()), line.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* h = CMSG_FIRSTHDR(&msg);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(h), &fd, sizeof fd);
    }
    const auto sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (sent <= 0) die("sendmsg failed");
    for (std::size_t at = static_cast<std::size_t>(sent); at < line.size();) {
      const auto n = ::send(fd_, line.data() + at, line.size() - at, MSG_NOSIGNAL);
      if (n <= 0) die("send failed");
      at += static_cast<std::size_t>(n);
    }
    std::size_t scanned = 0;  // a long reply comes in many reads: each byte is looked at once
    for (;;) {
      if (const auto nl = buf_.find('\n', scanned); nl != std::string::npos) {
        std::string out = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return out;
      }
      scanned = buf_.size();
      char chunk[1 << 16];
      const auto n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) die("the lease server closed the connection");
      buf_.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  [[noreturn]] static void die(const std::string& what) {
    std::fprintf(stderr, "lease client: %s\n", what.c_str());
    std::exit(1);
  }
  int fd_ = -1;
  std::string buf_;
};

}  // namespace tessera::bench
