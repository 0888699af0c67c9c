// Round trip of the lease channel (docs/lease-protocol.md): a lease server on its own thread
// and a program's end in this process's main thread, over the real Unix socket. The client
// says hello, then makes --reports report round trips (write one report line, block until its
// lease line comes back) and prints the round trips' p50 / p99 / max in microseconds, after
// --warmup round trips that are not counted. With --floats K it also times --averages average
// round trips of K float32 values in a sealed memfd sent with the line (the program filling
// it, the executor reading and writing every value in place), a stand-in executor thread
// answering each at once.
//
//   build/bench_lease_rtt_bench [--reports 20000] [--warmup 1000] [--floats 0] [--averages 20]
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.hpp"
#include "bench/lease_line_client.hpp"
#include "runtime/node/program/lease_server.hpp"

using namespace tessera;
using namespace tessera::program;
using bench_clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "lease_rtt_bench: %s\n", what.c_str());
  std::exit(1);
}

using line_client = bench::lease_line_client;

/// p50 / p99 / max of `us`, printed as one line.
void print_stats(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  const auto at = [&](double q) {
    return us[std::min(us.size() - 1,
                       static_cast<std::size_t>(q * static_cast<double>(us.size())))];
  };
  std::printf("%s: n=%zu p50=%.1f us p99=%.1f us max=%.1f us\n", what, us.size(), at(0.50),
              at(0.99), us.back());
}

double micros_since(bench_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(bench_clock::now() - t0).count();
}

/// `n` average round trips of `floats` values; a thread plays the executor, answering each
/// average as soon as it waits.
void time_averages(line_client& c, lease_slot& slot, int n, std::size_t floats) {
  const std::string line = "{\"v\":" + std::to_string(lease_protocol_version) +
                           ",\"op\":\"average\",\"sizes\":[" + std::to_string(floats) + "]}\n";
  std::atomic<bool> done{false};
  std::thread executor([&] {
    std::vector<std::size_t> sizes;
    std::shared_ptr<shared_floats> shared;
    while (!done) {
      if (slot.take_average(sizes, shared)) {
        float* p = shared->data();
        for (std::size_t i = 0; i < shared->size(); ++i) p[i] *= 0.5f;  // touch every value
        slot.answer_average(sizes, 1, 0);
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto t0 = bench_clock::now();
    // As a program does it: a sealed memfd, its values written, sent with the line.
    const int fd = make_sealed_memfd(floats);
    if (fd < 0) die("memfd_create failed");
    float* p = floats ? static_cast<float*>(
                            ::mmap(nullptr, 4 * floats, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
                      : nullptr;
    for (std::size_t k = 0; k < floats; ++k) p[k] = 0.5f;
    if (c.call(line, fd).find("\"averaged\"") == std::string::npos) die("no averaged reply");
    if (floats && p[floats - 1] != 0.25f) die("the mean did not arrive in shared memory");
    if (p) ::munmap(p, 4 * floats);
    ::close(fd);
    us.push_back(micros_since(t0));
  }
  done = true;
  executor.join();
  print_stats(("average " + std::to_string(floats) + " floats").c_str(), us);
}

}  // namespace

int main(int argc, char** argv) {
  int reports = 20000, warmup = 1000, averages = 20;
  std::size_t floats = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reports")
      reports = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--warmup")
      warmup = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--floats")
      floats = std::strtoull(bench::option_value(argc, argv, i).c_str(), nullptr, 10);
    else if (a == "--averages")
      averages = std::atoi(bench::option_value(argc, argv, i).c_str());
    else {
      std::fprintf(stderr, "usage: %s [--reports N] [--warmup N] [--floats K] [--averages N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (reports < 1 || warmup < 0) {
    std::fprintf(stderr, "--reports must be >= 1 and --warmup >= 0\n");
    return 2;
  }
  char dir[] = "/tmp/tessera-lease-bench-XXXXXX";
  if (!::mkdtemp(dir)) die("cannot make a directory under /tmp");
  const std::string path = std::string(dir) + "/lease.sock";
  {
    auto server = lease_server::start(path);
    if (!server) die(server.err().message);
    lease_terms terms;
    terms.steps = -1;
    auto slot = std::make_shared<lease_slot>(terms);
    const std::string token(64, 'a');
    (*server)->add(token, slot);
    line_client c(path);
    c.call("{\"v\":2,\"op\":\"hello\",\"token\":\"" + token + "\",\"pid\":1}\n");
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(reports));
    for (int i = 0; i < warmup + reports; ++i) {
      const auto t0 = bench_clock::now();
      const auto reply =
          c.call("{\"v\":2,\"op\":\"report\",\"steps\":" + std::to_string(i) + ",\"loss\":0.5}\n");
      if (i >= warmup) us.push_back(micros_since(t0));
      if (reply.find("\"lease\"") == std::string::npos) die("unexpected reply: " + reply);
    }
    print_stats("report round trip", us);
    if (floats > 0) time_averages(c, *slot, averages, floats);
  }
  ::rmdir(dir);
  return 0;
}
