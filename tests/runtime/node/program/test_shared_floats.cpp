// A program's shared buffer for `average` (runtime/node/program/shared_floats.hpp): the memfd a
// program makes (make_sealed_memfd), the node's mapping of it (values go both ways without a
// copy), and every descriptor the node refuses, each closed on the way out.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/node/program/shared_floats.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::program;
using namespace tessera::test;

namespace {

/// The inode behind `fd` (0 when it is not open).
ino_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/// True when `fd`, which held inode `ino`, is closed (or now names another file: the number
/// was reused by someone else after it closed).
bool closed(int fd, ino_t ino) { return inode_of(fd) != ino; }

/// The seals of `fd` (-1 when it has none to tell).
int seals_of(int fd) { return ::fcntl(fd, F_GET_SEALS); }

}  // namespace

TEST_CASE("shared floats: make_sealed_memfd makes what a program sends", "[lease][shared_floats]") {
  const int fd = make_sealed_memfd(1000);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  CHECK(st.st_size == 4000);
  const int seals = seals_of(fd);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_WRITE) == 0);  // the node writes the mean into it
  CHECK(::ftruncate(fd, 100) != 0);    // nobody can cut it short under a mapping
  CHECK(::ftruncate(fd, 8000) != 0);
  CHECK((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  ::close(fd);

  const int empty = make_sealed_memfd(0);
  REQUIRE(empty >= 0);
  CHECK((seals_of(empty) & F_SEAL_SHRINK) != 0);
  ::close(empty);
}

TEST_CASE("shared floats: the node's mapping and the program's share their values",
          "[lease][shared_floats]") {
  constexpr std::size_t n = 3000;  // not a whole number of pages
  const int fd = make_sealed_memfd(n);
  REQUIRE(fd >= 0);
  void* p = ::mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  auto* program = static_cast<float*>(p);
  for (std::size_t i = 0; i < n; ++i) program[i] = static_cast<float>(i) + 0.5f;

  const int node_fd = ::dup(fd);  // as SCM_RIGHTS gives the node its own descriptor
  const ino_t ino = inode_of(node_fd);
  auto m = shared_floats::map(node_fd, n, "test");
  INFO((m ? std::string() : m.err().message));
  REQUIRE(m);
  auto shared = std::move(m).value();  // the only holder
  REQUIRE(shared);
  CHECK(shared->size() == n);
  REQUIRE(shared->data() != nullptr);
  CHECK(shared->data() != program);  // its own mapping of the same pages
  CHECK(shared->data()[0] == 0.5f);
  CHECK(shared->data()[n - 1] == static_cast<float>(n - 1) + 0.5f);
  for (std::size_t i = 0; i < n; ++i) shared->data()[i] = -static_cast<float>(i);
  CHECK(program[0] == -0.0f);
  CHECK(program[1234] == -1234.0f);
  CHECK(program[n - 1] == -static_cast<float>(n - 1));
  const auto* ro = static_cast<const shared_floats*>(shared.get());
  CHECK(ro->data() == shared->data());

  // The last holder unmaps it and closes the node's descriptor; the program's stays.
  CHECK_FALSE(closed(node_fd, ino));
  shared.reset();
  CHECK(closed(node_fd, ino));
  CHECK(program[1234] == -1234.0f);
  ::munmap(p, n * sizeof(float));
  ::close(fd);
}

TEST_CASE("shared floats: fewer values than the memfd holds, and none at all",
          "[lease][shared_floats]") {
  const int fd = make_sealed_memfd(10);
  REQUIRE(fd >= 0);
  const std::vector<float> ten(10, 1.0f);
  REQUIRE(::pwrite(fd, ten.data(), sizeof(float) * 10, 0) == sizeof(float) * 10);
  auto part = shared_floats::map(::dup(fd), 4, "test");
  REQUIRE(part);
  CHECK((*part)->size() == 4);
  auto none = shared_floats::map(::dup(fd), 0, "test");
  REQUIRE(none);
  CHECK((*none)->size() == 0);
  const int empty = make_sealed_memfd(0);
  REQUIRE(empty >= 0);
  auto nothing = shared_floats::map(empty, 0, "test");
  REQUIRE(nothing);
  CHECK((*nothing)->size() == 0);
  // Sealed against shrinking only (growing allowed) is enough.
  const int grows = ::memfd_create("grows", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(grows >= 0);
  REQUIRE(::ftruncate(grows, 8) == 0);
  REQUIRE(::fcntl(grows, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  const float pair[2] = {1.0f, 2.0f};
  REQUIRE(::pwrite(grows, pair, sizeof pair, 0) == sizeof pair);
  auto two = shared_floats::map(grows, 2, "test");
  INFO((two ? std::string() : two.err().message));
  REQUIRE(two);
  CHECK((*two)->size() == 2);
  ::close(fd);
}

TEST_CASE("shared floats: descriptors the node refuses, each closed", "[lease][shared_floats]") {
  int fd = -1;
  std::size_t count = 4;
  std::vector<std::string> why;
  SECTION("a memfd made without MFD_ALLOW_SEALING") {
    fd = ::memfd_create("unsealed", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 16) == 0);
    why = {"not sealed against shrinking", "F_SEAL_SHRINK"};
  }
  SECTION("a sealable memfd with no seals") {
    fd = ::memfd_create("no-seals", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 16) == 0);
    why = {"not sealed against shrinking"};
  }
  SECTION("a pipe") {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    ::close(p[1]);
    fd = p[0];
    why = {"is not a sealable memfd", "memfd_create(MFD_ALLOW_SEALING)"};
  }
  SECTION("a regular file") {
    scratch_dir dir("shared_floats");
    fd = ::open(dir.write("plain", std::string(64, '\0')).c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    // On tmpfs a file has seals (F_SEAL_SEAL) but never F_SEAL_SHRINK; elsewhere none at all.
    why = {"'average'"};
  }
  SECTION("a memfd smaller than the values announced") {
    fd = make_sealed_memfd(3);
    count = 5;
    why = {"holds 12 bytes, its sizes announce 5 float32 values (20 bytes)"};
  }
  SECTION("an empty memfd for one value") {
    fd = make_sealed_memfd(0);
    count = 1;
    why = {"holds 0 bytes, its sizes announce 1 float32 values (4 bytes)"};
  }
  REQUIRE(fd >= 0);
  const ino_t ino = inode_of(fd);
  auto r = shared_floats::map(fd, count, "'average' of the program with pid 31");
  REQUIRE_FALSE(r);
  INFO(r.err().message);
  CHECK(r.err().kind == error_kind::invalid_input);
  CHECK(r.err().message.rfind("'average' of the program with pid 31: ", 0) == 0);
  for (const auto& w : why) CHECK(has(r.err().message, w));
  CHECK(closed(fd, ino));
}

TEST_CASE("shared floats: a sparse memfd is refused (the node allocates no program's memory)",
          "[lease][shared_floats]") {
  // 64 MiB announced, one page written: mapping it would make the node allocate the rest.
  constexpr std::size_t n = 16u << 20;
  const int fd = make_sealed_memfd(n);
  REQUIRE(fd >= 0);
  const float one = 1.0f;
  REQUIRE(::pwrite(fd, &one, sizeof one, 0) == static_cast<ssize_t>(sizeof one));
  const ino_t ino = inode_of(fd);
  auto m = shared_floats::map(fd, n, "job 3 copy 1");
  REQUIRE_FALSE(m);
  CHECK_THAT(m.err().message, Catch::Contains("job 3 copy 1") &&
                                  Catch::Contains("4096 bytes in memory") &&
                                  Catch::Contains("write every value"));
  CHECK(closed(fd, ino));
  // The same size written in full maps.
  const int full = make_sealed_memfd(n);
  REQUIRE(full >= 0);
  const std::vector<float> values(n, 2.0f);
  REQUIRE(::pwrite(full, values.data(), n * sizeof(float), 0) ==
          static_cast<ssize_t>(n * sizeof(float)));
  auto ok = shared_floats::map(full, n, "job 3 copy 2");
  INFO((ok ? std::string() : ok.err().message));
  REQUIRE(ok);
  CHECK((*ok)->data()[n - 1] == 2.0f);
}
