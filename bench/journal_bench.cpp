// Acknowledged journal appends per second (runtime/service/journal.hpp) with 1, 8, 64 and 256
// concurrent submitters. Each submitter is a thread that appends one ~300-byte JSON record
// (a job's submission) and waits for its acknowledgement before the next, as an HTTP client
// of `tessera serve` waits for its 201; the journal's writer batches what queues during each
// fdatasync (group commit). Per level it prints acknowledged records/s, fdatasyncs/s, records
// per fdatasync and the p50 / p99 / max ack latency, over --seconds after a --warmup that is
// not counted. Each level writes a fresh journal file in --dir (removed afterwards), so the
// figures are those of the file system holding --dir. A first row gives the device's own
// rate for comparison: one thread appending the same record with write + fdatasync, no journal.
//
//   build/bench_journal_bench --dir /work [--submitters 1,8,64,256] [--seconds 5]
//                             [--warmup 0.5] [--payload 300]
#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.hpp"
#include "runtime/service/journal.hpp"

using namespace tessera;
using bench_clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "journal_bench: %s\n", what.c_str());
  std::exit(1);
}

struct options {
  std::string dir = "/tmp";
  std::vector<int> submitters = {1, 8, 64, 256};
  double seconds = 5;
  double warmup = 0.5;
  std::size_t payload = 300;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir") {
      o.dir = bench::option_value(argc, argv, i);
    } else if (a == "--submitters") {
      o.submitters = bench::parse_list<int>(bench::option_value(argc, argv, i));
    } else if (a == "--seconds") {
      o.seconds = std::atof(bench::option_value(argc, argv, i).c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atof(bench::option_value(argc, argv, i).c_str());
    } else if (a == "--payload") {
      o.payload = static_cast<std::size_t>(std::atol(bench::option_value(argc, argv, i).c_str()));
    } else {
      std::printf(
          "usage: bench_journal_bench [--dir DIR] [--submitters 1,8,64,256] "
          "[--seconds S] [--warmup S] [--payload BYTES]\n");
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  if (o.submitters.empty() || o.seconds <= 0 || o.payload < 16) die("bad options (see --help)");
  return o;
}

/// A job-like JSON object of `n` bytes.
std::string job_json(std::size_t n, int submitter, long seq) {
  std::string s =
      "{\"kind\":\"mlp\",\"total_steps\":400,\"submitter\":" + std::to_string(submitter) +
      ",\"seq\":" + std::to_string(seq) + ",\"pad\":\"";
  if (s.size() + 2 < n) s.append(n - 2 - s.size(), 'x');
  return s + "\"}";
}

/// The file system type of `dir` as `df -T` names the common ones.
std::string fs_type(const std::string& dir) {
  struct statfs sf {};
  if (::statfs(dir.c_str(), &sf) != 0) return "?";
  switch (static_cast<unsigned long>(sf.f_type)) {
    case 0xEF53:
      return "ext4";
    case 0x01021994:
      return "tmpfs";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x794c7630:
      return "overlay";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%lx", static_cast<unsigned long>(sf.f_type));
      return buf;
    }
  }
}

/// What one level measured.
struct level_result {
  double records_per_s = 0, fsyncs_per_s = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
};

/// The figures of `records` records and `fsyncs` syncs in `seconds`, with the latencies `ms`.
level_result summarise(std::vector<double> ms, std::uint64_t records, std::uint64_t fsyncs,
                       double seconds) {
  if (ms.empty()) die("no append was acknowledged in the counted window");
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[static_cast<std::size_t>(q * static_cast<double>(ms.size() - 1))];
  };
  level_result r;
  r.records_per_s = static_cast<double>(records) / seconds;
  r.fsyncs_per_s = static_cast<double>(fsyncs) / seconds;
  r.p50_ms = at(0.50);
  r.p99_ms = at(0.99);
  r.max_ms = ms.back();
  return r;
}

/// The device's own rate, without the journal: one thread appending a record's bytes with
/// write() and fdatasync() after each, for `o.seconds`.
level_result bare_appends(const options& o) {
  const std::string path = o.dir + "/journal_bench_bare." + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) die("cannot create " + path);
  const std::string record = encode_journal_record(job_json(o.payload, 0, 0));
  std::vector<double> ms;
  const auto t0 = bench_clock::now();
  const auto until = t0 + std::chrono::duration<double>(o.seconds);
  while (bench_clock::now() < until) {
    const auto start = bench_clock::now();
    if (::write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size()) ||
        ::fdatasync(fd) != 0)
      die("cannot write or sync " + path);
    ms.push_back(std::chrono::duration<double, std::milli>(bench_clock::now() - start).count());
  }
  const std::chrono::duration<double> elapsed = bench_clock::now() - t0;
  ::close(fd);
  std::filesystem::remove(path);
  return summarise(ms, ms.size(), ms.size(), elapsed.count());
}

/// `n` submitters appending for warmup + seconds; the counted window's figures.
level_result run_level(const options& o, int n) {
  const std::string path = o.dir + "/journal_bench." + std::to_string(::getpid());
  auto opened = journal::open(path);
  if (!opened) die(opened.err().message);
  journal& j = *opened->file;
  std::atomic<bool> counting{false}, stop{false};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(n));
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t)
    pool.emplace_back([&, t] {
      for (long seq = 0; !stop.load(); ++seq) {
        const auto start = bench_clock::now();
        if (auto st = j.append_sync(job_json(o.payload, t, seq)); !st) die(st.err().message);
        const std::chrono::duration<double, std::milli> ms = bench_clock::now() - start;
        if (counting.load()) latencies[static_cast<std::size_t>(t)].push_back(ms.count());
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const auto before = j.stats();
  const auto t0 = bench_clock::now();
  counting = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  counting = false;
  const auto after = j.stats();
  const std::chrono::duration<double> elapsed = bench_clock::now() - t0;
  stop = true;
  for (auto& th : pool) th.join();
  if (auto st = j.close(); !st) die(st.err().message);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".lock");

  std::vector<double> all;
  for (auto& v : latencies) all.insert(all.end(), v.begin(), v.end());
  return summarise(std::move(all), after.records - before.records, after.fsyncs - before.fsyncs,
                   elapsed.count());
}

/// Prints one row of the table.
void print_row(const std::string& what, const level_result& r) {
  std::printf("| %s | %.0f | %.0f | %.1f | %.3f | %.3f | %.3f |\n", what.c_str(), r.records_per_s,
              r.fsyncs_per_s, r.fsyncs_per_s > 0 ? r.records_per_s / r.fsyncs_per_s : 0.0, r.p50_ms,
              r.p99_ms, r.max_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::printf("journal in %s (%s), payload %zu bytes, %.1f s per level after %.1f s warmup\n",
              o.dir.c_str(), fs_type(o.dir).c_str(), o.payload, o.seconds, o.warmup);
  std::printf(
      "| submitters | records/s | fsyncs/s | records per fsync | ack p50 (ms) "
      "| ack p99 (ms) | ack max (ms) |\n|---|---|---|---|---|---|---|\n");
  print_row("bare write+fdatasync, no journal", bare_appends(o));
  for (const int n : o.submitters) print_row(std::to_string(n), run_level(o, n));
  return 0;
}
