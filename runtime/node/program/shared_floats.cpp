#include "runtime/node/program/shared_floats.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace tessera::program {

namespace {

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

error refuse(int fd, error_kind kind, std::string what) {
  ::close(fd);
  return error{kind, std::move(what)};
}

}  // namespace

result<std::shared_ptr<shared_floats>> shared_floats::map(int fd, std::size_t count,
                                                          const std::string& who) {
  const std::string need = std::to_string(count) + " float32 values (" +
                           std::to_string(count * sizeof(float)) + " bytes)";
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    return refuse(fd, error_kind::invalid_input,
                  who + ": the descriptor sent with 'average' is not a sealable memfd (" +
                      errno_text(errno) + "); make it with memfd_create(MFD_ALLOW_SEALING)");
  if (!(seals & F_SEAL_SHRINK))
    return refuse(fd, error_kind::invalid_input,
                  who +
                      ": the memfd sent with 'average' is not sealed against shrinking "
                      "(fcntl F_ADD_SEALS, F_SEAL_SHRINK): the node will not map a file its "
                      "owner could cut short under it");
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return refuse(fd, error_kind::io, who + ": cannot stat the memfd: " + errno_text(errno));
  if (static_cast<std::uint64_t>(st.st_size) < count * sizeof(float))
    return refuse(fd, error_kind::invalid_input,
                  who + ": the memfd sent with 'average' holds " + std::to_string(st.st_size) +
                      " bytes, its sizes announce " + need);
  // The node maps the memfd with MAP_POPULATE: pages the program never touched would be
  // allocated by, and charged to, the node. A program may only hand over memory it holds
  // itself (a sparse memfd of 200 GB costs its maker nothing), so that is the cap.
  const auto held = static_cast<std::uint64_t>(st.st_blocks) * 512;
  if (held < count * sizeof(float))
    return refuse(fd, error_kind::invalid_input,
                  who + ": the memfd sent with 'average' has " + std::to_string(held) +
                      " bytes in memory of the " + need +
                      " it announces: write every value before sending it (the node does not "
                      "allocate a program's memory for it)");
  float* data = nullptr;
  if (count > 0) {
    // MAP_POPULATE: the page tables in one go, not a fault per page as the reduction walks it.
    void* p = ::mmap(nullptr, count * sizeof(float), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
      return refuse(fd, error_kind::io,
                    who + ": cannot map the memfd of " + need + ": " + errno_text(errno));
    data = static_cast<float*>(p);
  }
  return std::shared_ptr<shared_floats>(new shared_floats(fd, data, count));
}

shared_floats::~shared_floats() {
  if (data_) ::munmap(data_, count_ * sizeof(float));
  if (fd_ >= 0) ::close(fd_);
}

int make_sealed_memfd(std::size_t count, const char* name) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (::ftruncate(fd, static_cast<off_t>(count * sizeof(float))) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace tessera::program
