#pragma once
/// @file shared_floats.hpp
/// Float32 values a program shares with its node for `average` (docs/lease-protocol.md): a
/// memfd the program fills and sends over the lease socket (SCM_RIGHTS), which the node maps
/// and reduces in place, so the buffers are never copied through the socket and have no size
/// cap but memory. The node refuses a descriptor that could hurt it: one that is not a memfd
/// sealed against shrinking (truncating a file mapped by another process would kill that
/// process with SIGBUS on its next access), one smaller than the values announced, or one whose
/// pages the program has not filled (a sparse memfd: mapping it would make the node allocate,
/// and be charged for, memory the program never held; the per-program memory cap).

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/core/result.hpp"

namespace tessera::program {

/// A program's shared buffer, mapped read-write in the node; unmapped and closed when the last
/// holder lets go (a collective still running on it may hold it, see comm::buffer_view).
class shared_floats {
 public:
  /// Takes `fd` (closed on error too) and maps its first `count` float32 values. Errors
  /// (invalid_input) name `who` and the sizes: not a sealable memfd, not sealed against
  /// shrinking, holding fewer bytes than `count` values need or fewer of them in memory; io
  /// when it cannot be mapped.
  static result<std::shared_ptr<shared_floats>> map(int fd, std::size_t count,
                                                    const std::string& who);
  ~shared_floats();
  shared_floats(const shared_floats&) = delete;
  shared_floats& operator=(const shared_floats&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  shared_floats(int fd, float* data, std::size_t count) : fd_(fd), data_(data), count_(count) {}
  int fd_ = -1;
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

/// A memfd of `count` float32 values sealed against shrinking and growing, as a program makes
/// one (for the node's tests and benchmarks, and the C++ client's reference); -1 and errno on
/// failure.
int make_sealed_memfd(std::size_t count, const char* name = "tessera-average");

}  // namespace tessera::program
