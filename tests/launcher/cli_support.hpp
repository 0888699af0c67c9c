#pragma once
// Helpers of the end-to-end CLI tests: run the tessera binary, write input files.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace tessera::test {

/// What a command printed and how it ended.
struct cli_result {
  int code = -1;       ///< exit code, -1 when it did not exit normally
  std::string out;     ///< stdout and stderr together
  double seconds = 0;  ///< wall time
};

/// Runs `tessera <args>` (the binary under test) and collects its output.
inline cli_result run(const std::string& args) {
  const std::string cmd = std::string(TESSERA_BINARY) + " " + args + " 2>&1";
  cli_result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p)) r.out += buf.data();
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

/// Writes `text` to a temp file named after this process and `name`; returns its path.
inline std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/tessera_cli_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace tessera::test
