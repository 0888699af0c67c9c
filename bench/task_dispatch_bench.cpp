/// @file task_dispatch_bench.cpp
/// Per-task dispatch overhead of the actor runtime: tasks of a trivial job per
/// second through the scheduler and the nodes, on 4 and 8 node processes under mpirun.
///
///   build/bench_task_dispatch_bench [--nodes 4,8] [--steps 20000] [--round-length 0.5]
///       [--repeat 3]
///
/// For each N: one job of scale K = N (a softmax regression on 4 features, 2 classes, one
/// example per task, step_time 1 ns, so a task's compute is well under a microsecond and the
/// node's throttle never sleeps -- a sleep would cost the OS timer slack, ~50 us) under `hare` on a
/// cluster of N one-GPU nodes of equal speed. Hare gives each node one task per step; every
/// step the N nodes gather the N shard gradients (aggregator allgather) and apply them. The
/// job runs `--steps` steps over rounds of `--round-length` s (orders from the scheduler,
/// checkpoints and reports at every round end are included). Reference: the same job on one
/// process holding N GPUs (all N tasks computed there, no synchronisation).
/// Each measurement is repeated `--repeat` times (the host's 2 cores are shared by up to 8
/// polling MPI processes, so single runs vary by 1.5x). Prints one JSON line per N: steps,
/// rounds, seconds (the job's completion time), tasks/s (median, min, max over the repeats)
/// and microseconds per task at the median, the one-process reference, and the
/// synchronisation overhead per step (spread minus reference seconds per step, medians).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_cli.hpp"
#include <unistd.h>

namespace {

struct run_result {
  bool ok = false;
  double seconds = 0;  ///< the job's completion time
  long steps = 0;
  int rounds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string binary = TESSERA_BINARY;
  std::vector<int> nodes{4, 8};
  long steps = 20000;
  double round_length = 0.5;
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return tessera::bench::option_value(argc, argv, i); };
    if (a == "--help" || a == "-h") {
      std::cout << "usage: bench_task_dispatch_bench [--nodes 4,8] [--steps N] "
                   "[--round-length S] [--repeat R] [--binary PATH]\n"
                   "Tasks per second of a trivial K=N job spread over N node processes\n"
                   "(mpirun), against the same job on one process. JSON lines.\n";
      return 0;
    } else if (a == "--nodes") {
      nodes = tessera::bench::parse_list<int>(next());
    } else if (a == "--steps") {
      steps = std::atol(next().c_str());
    } else if (a == "--round-length") {
      round_length = std::atof(next().c_str());
    } else if (a == "--repeat") {
      repeat = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--binary") {
      binary = next();
    } else {
      std::cerr << "unknown argument '" << a << "' (see --help)\n";
      return 2;
    }
  }
  if (nodes.empty() || steps < 1 || round_length <= 0) {
    std::cerr << "--nodes needs counts, --steps and --round-length must be positive\n";
    return 2;
  }
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_task_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  int rc = 0;
  for (const int n : nodes) {
    std::ofstream(dir / "jobs.toml")
        << "[[job]]\nkind = \"softmax_regression\"\nscale_factor = " << n
        << "\ntotal_steps = " << steps << "\nstep_time = 0.000000001\n[job.config]\ndim = 4\n"
        << "classes = 2\ntrain_size = 64\nheld_out_size = 16\nbatch_size = " << n << "\n";
    std::ofstream(dir / "spread.toml") << "[cluster]\nname = \"spread\"\n[[cluster.server]]\n"
                                       << "gpu_type = \"v100\"\ngpus = 1\ncount = " << n << "\n";
    std::ofstream(dir / "one.toml") << "[cluster]\nname = \"one\"\n[[cluster.server]]\n"
                                    << "gpu_type = \"v100\"\ngpus = " << n << "\n";
    auto run = [&](const std::string& cluster, int procs) {
      run_result r;
      const auto out = dir / "sum.json";
      std::filesystem::remove(out);
      std::filesystem::remove_all(dir / "ckpt");
      const std::string cmd =
          "mpirun -np " + std::to_string(procs) + " --oversubscribe " + binary + " run --cluster " +
          (dir / cluster).string() + " --jobs " + (dir / "jobs.toml").string() +
          " --policy hare --round-length " + std::to_string(round_length) + " --checkpoint-dir " +
          (dir / "ckpt").string() + " --json " + out.string() + " -q > /dev/null 2>&1";
      const int status = std::system(cmd.c_str());
      std::ifstream f(out);
      if (status != 0 || !f) {
        std::cerr << "task_dispatch_bench: " << cmd << " failed (" << status << ")\n";
        return r;
      }
      const auto sum = nlohmann::json::parse(f);
      const auto& j = sum["jobs"][0];
      r.ok = j["finished"].get<bool>();
      r.seconds = j["jct"].get<double>();
      r.steps = j["steps"].get<long>();
      r.rounds = j["rounds"].get<int>();
      return r;
    };
    std::vector<double> spread_s, one_s;
    long done_steps = 0;
    int rounds = 0;
    bool ok = true;
    for (int r = 0; r < repeat && ok; ++r) {
      const auto spread = run("spread.toml", n);
      const auto one = run("one.toml", 1);
      ok = spread.ok && one.ok && spread.steps == steps && one.steps == steps;
      spread_s.push_back(spread.seconds);
      one_s.push_back(one.seconds);
      done_steps = spread.steps;
      rounds = std::max(rounds, spread.rounds);
    }
    if (!ok) {
      rc = 1;
      continue;
    }
    std::sort(spread_s.begin(), spread_s.end());
    std::sort(one_s.begin(), one_s.end());
    const double med = spread_s[spread_s.size() / 2], ref = one_s[one_s.size() / 2];
    const double tasks = static_cast<double>(done_steps) * n;
    nlohmann::json line = {
        {"nodes", n},
        {"tasks_per_step", n},
        {"steps", done_steps},
        {"repeats", repeat},
        {"rounds_max", rounds},
        {"seconds_median", med},
        {"tasks_per_s_median", tasks / med},
        {"tasks_per_s_min", tasks / spread_s.back()},
        {"tasks_per_s_max", tasks / spread_s.front()},
        {"us_per_task_median", 1e6 * med / tasks},
        {"reference_one_process_seconds", ref},
        {"reference_tasks_per_s", tasks / ref},
        {"sync_us_per_step_median", 1e6 * (med - ref) / static_cast<double>(done_steps)},
    };
    std::cout << line.dump() << std::endl;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
