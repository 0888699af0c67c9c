/// @file actor_dispatch_bench.cpp
/// Round dispatch latency and scheduler message throughput of the actor runtime for 4, 8 and
/// 16 node processes on this host (`tessera run --local N`), one JSON line each.
///
/// Dispatch latency (run 1 per N): from a round's start (the scheduler begins planning) until
/// every copy assigned in it has reported `copy_started` (its state is loaded and it is
/// stepping); one job per node, so every node runs a copy every round. Round 0 also builds
/// every model from scratch and is reported apart; the other rounds give median, p95 and max.
/// Message throughput (run 2 per N, with tessera_faulty's --bench-flood hook): every node sends
/// `flood` heartbeats back to back right after registering, then a request the scheduler
/// answers only after handling them (it handles one sender's messages in order), and notes
/// when it began and when the answer came (the nodes share this host's steady clock).
/// Throughput = every node's heartbeats / seconds from the first node's start to the last
/// node's answer: the scheduler's handling rate while the middleman deserialises in parallel,
/// so an upper bound on what a round can use.
///
/// Registration (run 1): seconds from the scheduler's start until every node had registered
/// (the summary's registration_seconds), and the scheduler's own lateness it did not hold
/// against its nodes (scheduler_stalled_seconds).
///
/// Usage: bench_actor_dispatch_bench [--nodes 4,8,16] [--no-flood] [TESSERA [TESSERA_FAULTY]]
/// (default: the build's; without tessera_faulty, i.e. tests not built, or with --no-flood,
/// the throughput run is skipped).

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

namespace {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// The flood throughput (messages/s) from the nodes' reports in `dir` (flood-<rank>.txt:
/// "<messages> <start ns> <end ns>"); 0 when a node did not report.
double flood_rate(const std::filesystem::path& dir, int nodes, double& messages) {
  long long first = 0, last = 0;
  messages = 0;
  for (int r = 0; r < nodes; ++r) {
    std::ifstream f(dir / ("flood-" + std::to_string(r) + ".txt"));
    long long n = 0, start = 0, end = 0;
    if (!(f >> n >> start >> end)) return 0;
    messages += static_cast<double>(n);
    first = r == 0 ? start : std::min(first, start);
    last = r == 0 ? end : std::max(last, end);
  }
  return last > first ? messages / (static_cast<double>(last - first) * 1e-9) : 0;
}

}  // namespace

/// Node counts from "4,8,16"; empty on a malformed list.
std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      const int n = std::stoi(item, &used);
      if (used != item.size() || n < 1 || n > 1024) return {};
      out.push_back(n);
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  std::vector<int> counts = {4, 8, 16};
  bool no_flood = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: bench_actor_dispatch_bench [--nodes 4,8,16] [--no-flood] [TESSERA "
                   "[TESSERA_FAULTY]]\n";
      return 0;
    }
    if (a == "--no-flood") {
      no_flood = true;
    } else if (a == "--nodes" && i + 1 < argc) {
      counts = parse_counts(argv[++i]);
      if (counts.empty()) {
        std::cerr << "actor_dispatch_bench: --nodes: expected counts in [1, 1024] such as 4,8,16\n";
        return 2;
      }
    } else {
      positional.push_back(a);
    }
  }
  const std::string binary = positional.size() > 0 ? positional[0] : TESSERA_BINARY;
#ifdef TESSERA_FAULTY_BINARY
  std::string faulty = positional.size() > 1 ? positional[1] : TESSERA_FAULTY_BINARY;
#else
  std::string faulty = positional.size() > 1 ? positional[1] : "";
#endif
  if (no_flood) faulty.clear();
  const int rounds = 20;
  const double round_length = 0.3;
  const long flood = 10000;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tessera_dispatch_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "ckpt");
  int rc = 0;
  for (int n : counts) {
    std::ostringstream cl, jobs;
    cl << "[cluster]\nname = \"bench\"\n[[cluster.server]]\ngpu_type = \"v100\"\ngpus = 1\n"
       << "count = " << n << "\n";
    // One job per node, long enough for `rounds` rounds at speed 1.0.
    const int steps = static_cast<int>(rounds * round_length / 0.01);
    for (int i = 0; i < n; ++i)
      jobs << "[[job]]\nkind = \"softmax_regression\"\ntotal_steps = " << steps
           << "\nstep_time = 0.01\n";
    std::ofstream(dir / "cluster.toml") << cl.str();
    std::ofstream(dir / "jobs.toml") << jobs.str();
    // `program` is `tessera run` or tessera_faulty with its hook options.
    auto run = [&](const std::string& program) -> nlohmann::json {
      const auto out = dir / ("sum" + std::to_string(n) + ".json");
      std::filesystem::remove(out);
      const std::string cmd =
          program + " --local " + std::to_string(n) + " --cluster " +
          (dir / "cluster.toml").string() + " --jobs " + (dir / "jobs.toml").string() +
          " --round-length " + std::to_string(round_length) + " --checkpoint-dir " +
          (dir / "ckpt").string() + " --json " + out.string() + " -q > /dev/null";
      const int status = std::system(cmd.c_str());
      std::ifstream f(out);
      if (status != 0 || !f) {
        std::cerr << "actor_dispatch_bench: run with " << n << " nodes failed (" << status << ")\n";
        return nullptr;
      }
      return nlohmann::json::parse(f);
    };
    const auto s = run(binary + " run");
    // The flood run lasts as long as the jobs, so every node's answer comes before the end.
    const auto reports = dir / ("flood" + std::to_string(n));
    std::filesystem::create_directories(reports);
    const auto fl = faulty.empty() ? nlohmann::json()
                                   : run(faulty + " --bench-flood " + std::to_string(flood) +
                                         " --bench-flood-report " + reports.string());
    if (s.is_null() || (!faulty.empty() && fl.is_null())) {
      rc = 1;
      continue;
    }
    auto lat = s["dispatch_latency"].get<std::vector<double>>();
    const double first = lat.empty() ? 0 : lat.front();
    if (!lat.empty()) lat.erase(lat.begin());
    double fm = 0;
    const double rate = faulty.empty() ? 0 : flood_rate(reports, n, fm);
    nlohmann::json line;
    line["bench"] = "actor_dispatch";
    line["nodes"] = n;
    line["rounds"] = s["rounds"];
    line["round_length_s"] = round_length;
    line["dispatch_latency_ms_round0"] = 1000 * first;
    line["dispatch_latency_ms_median"] = 1000 * percentile(lat, 0.5);
    line["dispatch_latency_ms_p95"] = 1000 * percentile(lat, 0.95);
    line["dispatch_latency_ms_max"] = 1000 * percentile(lat, 1.0);
    line["flood_messages"] = fm;
    line["scheduler_msgs_per_s"] = rate;
    line["run_messages"] = s["messages"];
    line["registration_s"] = s["registration_seconds"];
    line["scheduler_stalled_s"] = s["scheduler_stalled_seconds"];
    line["dispatch_latency_ms_p99"] = 1000 * percentile(lat, 0.99);
    line["target_met_50ms"] = 1000 * std::max(first, percentile(lat, 0.95)) < 50;
    std::cout << line.dump() << std::endl;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
