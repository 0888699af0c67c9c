// The control API's HTTP layer under polling (runtime/service/http/server.hpp, client.hpp): a
// server whose handler hands each request to a worker thread that answers it (as the bridge to the
// actors will), and N pollers, each a thread with its own keep-alive client, doing GET
// /v1/cluster in a loop for --seconds. Prints, for each N, the requests answered per second
// and the latency's p50 / p99 / max in microseconds, the errors and the connections accepted.
//
//   build/bench_http_bench [--pollers 1,10,100] [--seconds 3]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_cli.hpp"
#include "runtime/service/http/client.hpp"
#include "runtime/service/http/server.hpp"

using namespace tessera;
using bench_clock = std::chrono::steady_clock;

namespace {

const std::string bench_token(64, 'f');

/// A cluster answer of the size docs/api.md's example has.
const std::string cluster_json =
    R"({"policy": "max_min_fairness_perf", "round": 7, "round_length": 10.0, "uptime": 75.3, )"
    R"("nodes_alive": 3, "nodes": 3, "gpus": 12, "jobs": {"queued": 1, "running": 2, )"
    R"("finished": 5}, "utilisation": {"v100": 0.75, "k80": 1.0}, "shutting_down": false})";

/// The stand-in for the actor bridge: one thread answering queued requests in order.
class answer_thread {
 public:
  answer_thread() : worker_([this] { loop(); }) {}
  ~answer_thread() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_one();
    worker_.join();
  }
  void push(http::responder r) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(std::move(r));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      http::responder r = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      r.json(200, cluster_json);
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::deque<http::responder> queue_;
  bool stop_ = false;
  std::thread worker_;
};

struct poll_result {
  std::vector<double> micros;  ///< each answered request's latency
  std::int64_t errors = 0;
};

/// One poller: GET in a loop until `end`.
poll_result poll(std::uint16_t port, bench_clock::time_point end) {
  http::client_options o;
  o.token = bench_token;
  o.timeout = std::chrono::seconds(10);
  http::client c({"127.0.0.1", port}, o);
  poll_result out;
  out.micros.reserve(1 << 16);
  while (bench_clock::now() < end) {
    const auto t0 = bench_clock::now();
    auto r = c.get("/v1/cluster");
    const auto t1 = bench_clock::now();
    if (!r || r->status != 200) {
      ++out.errors;
      continue;
    }
    out.micros.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return out;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

/// N pollers against a fresh server; prints one line.
void run(int pollers, double seconds) {
  answer_thread bridge;
  http::limits lim;
  lim.max_connections = static_cast<std::size_t>(std::max(256, pollers + 8));
  auto srv = http::server::open(
      "127.0.0.1", 0, lim, bench_token,
      [&bridge](http::request, http::responder r) { bridge.push(std::move(r)); });
  if (!srv) {
    std::fprintf(stderr, "http_bench: %s\n", srv.err().message.c_str());
    std::exit(1);
  }
  const auto port = (*srv)->port();
  const auto start = bench_clock::now();
  const auto end = start + std::chrono::duration_cast<bench_clock::duration>(
                               std::chrono::duration<double>(seconds));
  std::vector<poll_result> results(static_cast<std::size_t>(pollers));
  std::vector<std::thread> threads;
  for (int i = 0; i < pollers; ++i)
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = poll(port, end); });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(bench_clock::now() - start).count();
  std::vector<double> all;
  std::int64_t errors = 0;
  for (auto& r : results) {
    all.insert(all.end(), r.micros.begin(), r.micros.end());
    errors += r.errors;
  }
  std::sort(all.begin(), all.end());
  std::printf("%7d %10zu %11.0f %9.0f %9.0f %9.0f %7lld %9llu\n", pollers, all.size(),
              static_cast<double>(all.size()) / wall, percentile(all, 0.5), percentile(all, 0.99),
              all.empty() ? 0.0 : all.back(), static_cast<long long>(errors),
              static_cast<unsigned long long>((*srv)->accepted()));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> pollers{1, 10, 100};
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pollers") {
      pollers = bench::parse_list<int>(bench::option_value(argc, argv, i));
    } else if (a == "--seconds") {
      seconds = std::atof(bench::option_value(argc, argv, i).c_str());
    } else {
      std::fprintf(stderr, "usage: %s [--pollers 1,10,100] [--seconds 3]\n", argv[0]);
      return a == "--help" ? 0 : 2;
    }
  }
  std::printf("pollers   requests  requests/s  p50 (us)  p99 (us)  max (us)  errors  accepted\n");
  for (const int n : pollers) run(n, seconds);
  return 0;
}
