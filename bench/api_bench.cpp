// The control API of a live `tessera serve` (docs/api.md), measured from outside as clients
// see it:
//   1. submissions acknowledged per second over HTTP with the journal on (each 201 means the
//      record is on disk), for 1, 8 and 32 concurrent submitters, and their latency;
//   2. GET latency (p50/p99) under 100 concurrent pollers, each polling /v1/jobs and
//      /v1/cluster in a loop as the dashboard does;
//   3. the scheduler's round dispatch latency (orders out -> every copy running, from
//      /v1/rounds) without and then with those 100 pollers.
// usage: bench_api_bench --tessera PATH [--state-dir DIR] [--seconds S] [--pollers N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/bench_cli.hpp"
#include "runtime/service/http/client.hpp"

using namespace tessera;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  std::string tessera;
  std::string state_dir = "/tmp/tessera-api-bench";
  double seconds = 5;
  int pollers = 100;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

/// A served cluster of 3 one-GPU nodes (--local 3) in a fresh state directory.
struct cluster_process {
  pid_t pid = -1;
  std::string address, token;
  cluster_process(const options& o) {
    namespace fs = std::filesystem;
    fs::remove_all(o.state_dir);
    fs::create_directories(o.state_dir + "-in");
    const std::string cl = o.state_dir + "-in/cluster.toml";
    std::ofstream(cl) << "[cluster]\nname = \"bench\"\n"
                         "[[cluster.server]]\nname = \"a\"\ngpu_type = \"v100\"\ngpus = 4\n"
                         "[[cluster.server]]\nname = \"b\"\ngpu_type = \"p100\"\ngpus = 4\n"
                         "speed = 0.5\n"
                         "[[cluster.server]]\nname = \"c\"\ngpu_type = \"k80\"\ngpus = 4\n"
                         "speed = 0.25\n";
    std::fflush(stdout);
    pid = ::fork();
    if (pid == 0) {
      const std::string log = o.state_dir + "-in/serve.log";
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      ::execl(o.tessera.c_str(), o.tessera.c_str(), "serve", "--local", "3", "--cluster",
              cl.c_str(), "--state-dir", o.state_dir.c_str(), "--round-length", "1", nullptr);
      ::_exit(127);
    }
    const auto until = clock_type::now() + std::chrono::seconds(60);
    while (clock_type::now() < until && address.empty()) {
      std::ifstream(o.state_dir + "/address") >> address;
      std::ifstream(o.state_dir + "/token") >> token;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (address.empty()) {
      std::fprintf(stderr, "the cluster did not start (see %s-in/serve.log)\n",
                   o.state_dir.c_str());
      std::exit(1);
    }
  }
  std::unique_ptr<http::client> client() const {
    http::client_options co;
    co.token = token;
    co.timeout = std::chrono::seconds(30);
    return std::make_unique<http::client>(*http::parse_server_address(address), co);
  }
  ~cluster_process() {
    if (auto c = client(); c) (void)c->post("/v1/shutdown", "", "");
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
};

/// `threads` clients each doing `call` in a loop for `seconds`; latencies in ms.
template <class F>
std::vector<double> hammer(const cluster_process& c, int threads, double seconds, F call,
                           double pause = 0) {
  std::vector<std::vector<double>> lat(threads);
  std::vector<std::thread> ts;
  const auto until = clock_type::now() + std::chrono::duration<double>(seconds);
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      auto cl = c.client();
      // Pollers with a pause start spread over it, as dashboards opened at different times.
      if (pause > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(pause * t / threads));
      while (clock_type::now() < until) {
        const auto t0 = clock_type::now();
        if (!call(*cl, t)) continue;
        lat[t].push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        if (pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause));
      }
    });
  for (auto& t : ts) t.join();
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  return all;
}

void submissions(const cluster_process& c, const options& o) {
  std::printf("submissions over HTTP, journal on (%s)\n", o.state_dir.c_str());
  std::printf("%-12s %12s %10s %10s\n", "submitters", "accepted/s", "p50 ms", "p99 ms");
  const std::string body =
      R"({"kind": "softmax_regression", "total_steps": 5, "step_time": 0.001})";
  for (int n : {1, 8, 32}) {
    auto lat = hammer(c, n, o.seconds, [&](http::client& cl, int) {
      auto r = cl.post("/v1/jobs", body, "application/json");
      return r && r->status == 201;
    });
    std::printf("%-12d %12.0f %10.2f %10.2f\n", n, lat.size() / o.seconds, quantile(lat, 0.5),
                quantile(lat, 0.99));
  }
}

/// Median dispatch latency (ms) of the rounds the cluster planned in the last `seconds`.
double dispatch_median(const cluster_process& c, std::int64_t after_round, std::int64_t* last) {
  auto r = c.client()->get("/v1/rounds?limit=1000");
  if (!r || r->status != 200) {
    std::fprintf(stderr, "GET /v1/rounds failed: %s\n",
                 r ? r->body.c_str() : r.err().message.c_str());
    return -1;
  }
  std::vector<double> d;
  const auto doc = nlohmann::json::parse(r->body);
  for (const auto& x : doc["rounds"]) {
    *last = std::max(*last, x["round"].get<std::int64_t>());
    if (x["round"].get<std::int64_t>() > after_round && x["dispatch_latency"].get<double>() >= 0)
      d.push_back(1000 * x["dispatch_latency"].get<double>());
  }
  return quantile(d, 0.5);
}

void polling(const cluster_process& c, const options& o) {
  // Long jobs keep every GPU busy, so each round dispatches copies.
  std::string set = R"({"job": [)";
  for (int i = 0; i < 24; ++i)
    set += std::string(i ? "," : "") +
           R"({"kind": "mlp", "total_steps": 100000000, "step_time": 0.01})";
  set += "]}";
  auto sub = c.client()->post("/v1/jobs", set, "application/json");
  if (!sub || sub->status != 201)
    std::fprintf(stderr, "the long jobs were not accepted: %s\n",
                 sub ? sub->body.c_str() : sub.err().message.c_str());
  std::int64_t last = -1;
  std::this_thread::sleep_for(std::chrono::seconds(3));
  dispatch_median(c, -1, &last);
  const std::int64_t quiet_from = last;
  std::this_thread::sleep_for(std::chrono::duration<double>(std::max(10.0, 2 * o.seconds)));
  const double quiet = dispatch_median(c, quiet_from, &last);
  const double window = std::max(10.0, 2 * o.seconds);
  // Dashboards: each poller GETs the dashboard's four resources once a second.
  std::int64_t from = last;
  auto dash = hammer(
      c, o.pollers, window,
      [](http::client& cl, int) {
        for (const char* t : {"/v1/cluster", "/v1/jobs", "/v1/nodes", "/v1/rounds?limit=60"}) {
          auto r = cl.get(t);
          if (!r || r->status != 200) return false;
        }
        return true;
      },
      1.0);
  const double with_dash = dispatch_median(c, from, &last);
  std::printf(
      "\n%d dashboards (4 GETs each, once a second; 24 jobs in the table): "
      "%.0f polls/s, poll p50 %.2f ms, p99 %.2f ms\n",
      o.pollers, dash.size() / window, quantile(dash, 0.5), quantile(dash, 0.99));
  // Stress: each poller GETs /v1/jobs or /v1/cluster in a tight loop.
  from = last;
  auto lat = hammer(c, o.pollers, window, [](http::client& cl, int t) {
    auto r = cl.get(t % 2 ? "/v1/jobs" : "/v1/cluster");
    return r && r->status == 200;
  });
  const double with_stress = dispatch_median(c, from, &last);
  std::printf("%d tight-loop pollers: %.0f requests/s, p50 %.2f ms, p99 %.2f ms\n", o.pollers,
              lat.size() / window, quantile(lat, 0.5), quantile(lat, 0.99));
  auto pct = [&](double x) { return quiet > 0 ? 100 * (x - quiet) / quiet : 0.0; };
  std::printf(
      "round dispatch latency, median over ~%.0f rounds each: %.2f ms alone, %.2f ms "
      "with the dashboards (%+.0f%%), %.2f ms with the tight loops (%+.0f%%)\n",
      window, quiet, with_dash, pct(with_dash), with_stress, pct(with_stress));
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tessera")
      o.tessera = bench::option_value(argc, argv, i);
    else if (a == "--state-dir")
      o.state_dir = bench::option_value(argc, argv, i);
    else if (a == "--seconds")
      o.seconds = std::atof(bench::option_value(argc, argv, i).c_str());
    else if (a == "--pollers")
      o.pollers = std::atoi(bench::option_value(argc, argv, i).c_str());
    else {
      std::printf(
          "usage: bench_api_bench --tessera PATH [--state-dir DIR] [--seconds S] "
          "[--pollers N]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (o.tessera.empty()) {
    std::fprintf(stderr, "--tessera PATH is needed (build/tessera)\n");
    return 2;
  }
  {
    cluster_process c(o);
    submissions(c, o);
  }
  cluster_process c(o);
  polling(c, o);
  return 0;
}
