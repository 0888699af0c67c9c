#pragma once
/// @file shared_memory.hpp
/// The buffers of `average` for the C++ lease client (tessera_client.hpp, which includes this
/// part): a memfd sealed against shrinking and growing, holding the buffers' float32 values
/// end to end, which the node maps and averages in place (protocol version 2).

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "lease_error.hpp"

namespace tessera_client {
namespace detail {

/// `count` float32 values in a sealed memfd, mapped here.
class shared_floats {
 public:
  explicit shared_floats(std::size_t count) : count_(count) {
    fd_ = ::memfd_create("tessera-average", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0) fail("memfd_create");
    if (::ftruncate(fd_, static_cast<off_t>(count * sizeof(float))) != 0) fail("ftruncate");
    if (::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) fail("sealing");
    if (count == 0) return;
    void* p = ::mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) fail("mmap");
    data_ = static_cast<float*>(p);
  }
  ~shared_floats() { release(); }
  shared_floats(const shared_floats&) = delete;
  shared_floats& operator=(const shared_floats&) = delete;

  int fd() const { return fd_; }
  float* data() { return data_; }
  std::size_t size() const { return count_; }

 private:
  void release() {
    if (data_) ::munmap(data_, count_ * sizeof(float));
    if (fd_ >= 0) ::close(fd_);
    data_ = nullptr;
    fd_ = -1;
  }
  [[noreturn]] void fail(const char* what) {
    const int err = errno;
    release();
    throw lease_error("cannot place " + std::to_string(count_) +
                      " float32 values for 'average' in shared memory (" + what +
                      "): " + std::strerror(err));
  }

  int fd_ = -1;
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace detail
}  // namespace tessera_client
