/// @file table_load_bench.cpp
/// Time to load the bundled Gavel throughput table (every CLI command does it once).
/// Prints one JSON line: best and median over repeated loads in one process.
///
/// usage: bench_table_load_bench [--repeat N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/throughput.hpp"

int main(int argc, char** argv) {
  int repeat = 50;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_table_load_bench [--repeat N]\n");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto t = tessera::throughput_table::load_bundled();
    const auto t1 = std::chrono::steady_clock::now();
    if (!t) {
      std::fprintf(stderr, "%s\n", t.err().message.c_str());
      return 1;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"bench\":\"table_load\",\"repeats\":%d,\"best_ms\":%.2f,\"median_ms\":%.2f}\n",
              repeat, ms.front(), ms[ms.size() / 2]);
  return 0;
}
