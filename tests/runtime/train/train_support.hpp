#pragma once
// Helpers shared by the runtime/train tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "runtime/train/trainable.hpp"

namespace tessera::train::test {

/// True when both buffers hold exactly the same bits.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A built-in trainable; fails the test when it cannot be made.
inline std::unique_ptr<trainable> make(const std::string& kind, std::uint64_t seed,
                                       const trainable_config& config = {}) {
  auto r = builtin_trainables().make(kind, seed, config);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  return std::move(*r);
}

/// A fresh, empty directory under the system temp dir, removed when the object dies.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("tessera_train_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  /// `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

/// True when `s` contains `part`.
inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace tessera::train::test
