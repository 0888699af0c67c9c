// Multi-process tests of `tessera run` under mpirun (and --local): registered with ctest under
// the label "mpi", each with a TIMEOUT; tests/CMakeLists.txt sets the environment mpirun needs
// to run as root. Each test writes its inputs to a scratch directory, runs the binary, and
// checks the JSON summary and the jobs' final checkpoints.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/train/checkpoint.hpp"
#include "runtime/train/trainable.hpp"

using json = nlohmann::json;

namespace {

/// A scratch directory for one test, removed at the end.
class scratch {
 public:
  explicit scratch(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("tessera_mpi_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_ / "ckpt");
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& n) const { return (path_ / n).string(); }
  std::string write(const std::string& n, const std::string& text) const {
    std::ofstream(path_ / n) << text;
    return file(n);
  }

 private:
  std::filesystem::path path_;
};

/// Output (stdout and stderr) and exit status of a shell command.
struct outcome {
  int status = -1;
  std::string output;
  double seconds = 0;
};

outcome run(const std::string& cmd) {
  outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) o.output += buf.data();
  const int st = ::pclose(p);
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

std::string mpirun(int np, bool recovery = false) {
  return "mpirun -np " + std::to_string(np) + " --oversubscribe" +
         (recovery ? " --enable-recovery" : "") + " " + TESSERA_BINARY + " run";
}

/// One one-GPU server per speed, each of its own GPU type.
std::string cluster_toml(const std::vector<double>& speeds) {
  static const char* types[] = {"v100", "p100", "k80", "t4", "a100", "h100"};
  std::ostringstream s;
  s << "[cluster]\nname = \"test\"\n";
  for (std::size_t i = 0; i < speeds.size(); ++i)
    s << "\n[[cluster.server]]\nname = \"node-" << i << "\"\ngpu_type = \"" << types[i % 6]
      << "\"\ngpus = 1\nspeed = " << speeds[i] << "\n";
  return s.str();
}

/// `n` jobs alternating softmax_regression and mlp, seeds id + 1.
std::string jobs_toml(int n, int steps, double step_time) {
  std::ostringstream s;
  for (int i = 0; i < n; ++i)
    s << "[[job]]\nkind = \"" << (i % 2 ? "mlp" : "softmax_regression")
      << "\"\ntotal_steps = " << steps << "\nstep_time = " << step_time << "\n\n";
  return s.str();
}

json load_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return json::parse(f);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Every job's final checkpoint equals the same job trained without interruption.
void check_bitwise(const json& sum, const std::string& ckpt_dir) {
  const auto reg = tessera::train::builtin_trainables();
  for (const auto& j : sum["jobs"]) {
    const auto id = j["id"].get<std::int64_t>();
    const auto kind = j["kind"].get<std::string>();
    INFO("job " << id << " (" << kind << ")");
    auto resumed = reg.make(kind, static_cast<std::uint64_t>(id + 1));
    REQUIRE(resumed);
    auto h = tessera::train::load_trainable_checkpoint(
        ckpt_dir + "/job-" + std::to_string(id) + ".ckpt", **resumed);
    REQUIRE(h);
    auto straight = reg.make(kind, static_cast<std::uint64_t>(id + 1));
    REQUIRE(straight);
    for (std::int64_t s = 0; s < j["steps"].get<std::int64_t>(); ++s)
      REQUIRE((*straight)->train_step(1));
    CHECK((*resumed)->step() == (*straight)->step());
    CHECK(same_bits((*resumed)->params(), (*straight)->params()));
  }
}

/// Runs `tessera run` on `nodes` processes (mpirun --enable-recovery) with rank 2 killing
/// itself half way through round 2 (rounds of 0.4 s); checks the run still ended well with
/// exactly rank 2 lost, and returns its output and summary.
std::pair<outcome, json> run_losing_rank2(const scratch& dir, int nodes, const std::string& cl,
                                          const std::string& jobs, const std::string& extra) {
  auto o = run(mpirun(nodes, true) + " --cluster " + cl + " --jobs " + jobs + extra +
               " --round-length 0.4 --heartbeat-timeout 1.5 --checkpoint-dir " +
               dir.file("ckpt") + " --json " + dir.file("sum.json") +
               " --fault-kill-rank 2 --fault-kill-round 2");
  INFO(o.output);
  auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["ok"].get<bool>());
  CHECK(sum["failed_ranks"] == json::array({2}));
  return {o, sum};
}

}  // namespace

TEST_CASE("(a) 3 nodes at speeds 1/0.5/0.25 run 6 jobs; GPU time follows the plan", "[mpi][a]") {
  scratch dir("a");
  const double L = 0.5;
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(6, 120, 0.01));
  auto o = run(mpirun(3) + " --cluster " + cl + " --jobs " + jobs +
               " --policy max_min_fairness_perf --round-length 0.5 --checkpoint-dir " +
               dir.file("ckpt") + " --json " + dir.file("sum.json"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto sum = load_json(dir.file("sum.json"));
  CHECK(sum["ok"].get<bool>());
  REQUIRE(sum["jobs"].size() == 6);
  // Tolerance: per job and node, the GPU-seconds measured by the node are within 15% of the
  // plan's (GPUs x round length, summed over the rounds the plan put it there) plus 0.1 s,
  // excluding the job's final round (where it stops early and leaves its GPU idle). The
  // shortfall of a full round is at most one step (a step that would end after the round's
  // end is not begun: 0.04 s at speed 0.25) plus load/checkpoint time.
  double total_busy = 0;
  for (const auto& j : sum["jobs"]) {
    INFO("job " << j["id"]);
    CHECK(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == 120);
    const int final_rank = j["final_rank"].get<int>();
    REQUIRE(final_rank >= 0);
    for (int r = 0; r < 3; ++r) {
      double planned = j["planned_gpu_seconds"][r].get<double>();
      double busy = j["busy_gpu_seconds"][r].get<double>();
      total_busy += busy;
      if (r == final_rank) {
        planned -= L;
        busy -= j["final_round_busy"].get<double>();
      }
      INFO("rank " << r << " planned " << planned << " busy " << busy);
      CHECK(busy <= planned + 0.1);
      CHECK(busy >= 0.85 * planned - 0.1);
    }
    // Measured throughput reflects each node's speed factor (1/step_time x speed).
    const auto& tp = j["throughput"];
    const double expect[] = {100.0, 50.0, 25.0};
    for (int r = 0; r < 3; ++r)
      if (tp[r].get<double>() > 0) CHECK(tp[r].get<double>() == Approx(expect[r]).epsilon(0.25));
  }
  CHECK(total_busy > 0);
}

TEST_CASE("(b) jobs preempted and resumed on other processes end bitwise identical",
          "[mpi][b]") {
  scratch dir("b");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(6, 60, 0.01));
  auto o = run(mpirun(4) + " --cluster " + cl + " --jobs " + jobs +
               " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") + " --json " +
               dir.file("sum.json"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["ok"].get<bool>());
  // Six jobs on four GPUs: the policy rotates them, so jobs stop on one rank (process) and
  // continue on another from the checkpoint.
  int moved_jobs = 0;
  for (const auto& j : sum["jobs"]) {
    int ranks = 0;
    for (const auto& b : j["busy_gpu_seconds"]) ranks += b.get<double>() > 0 ? 1 : 0;
    if (j["restarts"].get<int>() > 0 && ranks >= 2) ++moved_jobs;
    CHECK(j["regressions"].get<int>() == 0);
  }
  CHECK(moved_jobs >= 1);
  check_bitwise(sum, dir.file("ckpt"));
}

TEST_CASE("(c) a node rank killed mid-run: every job finishes, none loses over a round",
          "[mpi][c]") {
  scratch dir("c");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(4, 150, 0.01));
  const auto [o, sum] = run_losing_rank2(dir, 4, cl, jobs, "");
  INFO(o.output);
  CHECK(o.output.find("node rank 2") != std::string::npos);
  int lost = 0;
  for (const auto& j : sum["jobs"]) {
    INFO("job " << j["id"]);
    CHECK(j["finished"].get<bool>());
    CHECK(j["lost_rounds"].get<int>() <= 1);  // at most the round it was in when rank 2 died
    CHECK(j["regressions"].get<int>() == 0);  // resumed from its latest checkpoint, no earlier
    lost += j["lost_rounds"].get<int>();
  }
  CHECK(lost == 1);  // the one copy rank 2 was running
  check_bitwise(sum, dir.file("ckpt"));
}

TEST_CASE("(d) a process speaking another protocol version is refused", "[mpi][d]") {
  scratch dir("d");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(2, 20, 0.01));
  auto o = run(mpirun(4) + " --cluster " + cl + " --jobs " + jobs +
               " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") +
               " --fault-protocol-rank 3 --fault-protocol-version 99");
  INFO(o.output);
  CHECK(o.status != 0);
  CHECK(o.output.find("node rank 3") != std::string::npos);
  CHECK(o.output.find("speaks protocol version 99, this scheduler speaks version ") !=
        std::string::npos);
  CHECK(o.seconds < 30);
}

TEST_CASE("bad input under mpirun ends every rank with a clear message", "[mpi][input]") {
  scratch dir("input");
  const auto cl3 = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(2, 20, 0.01));
  auto o = run(mpirun(4) + " --cluster " + cl3 + " --jobs " + jobs);
  INFO(o.output);
  CHECK(o.status == 2);
  CHECK(o.output.find("lists 3 servers, but the run has 4 node processes (mpirun -np 4)") !=
        std::string::npos);
  const auto bad = dir.write("bad.toml", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n");
  auto k = run(mpirun(3) + " --cluster " + cl3 + " --jobs " + bad);
  INFO(k.output);
  CHECK(k.status == 2);
  CHECK(k.output.find("field 'kind': unknown job kind 'resnet'") != std::string::npos);
  CHECK(o.seconds + k.seconds < 30);
}

TEST_CASE("--local starts the node processes itself", "[mpi][local]") {
  scratch dir("local");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(4, 40, 0.01));
  auto o = run(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl + " --jobs " +
               jobs + " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") + " --json " +
               dir.file("sum.json"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  CHECK(o.output.find("4 jobs finished") != std::string::npos);
  const auto sum = load_json(dir.file("sum.json"));
  CHECK(sum["ok"].get<bool>());
  check_bitwise(sum, dir.file("ckpt"));
}

TEST_CASE("a job forked into 3 copies runs on every node and merges them each round",
          "[mpi][fork]") {
  scratch dir("fork");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml",
                              "[[job]]\nkind = \"mlp\"\ntotal_steps = 150\nstep_time = 0.01\n");
  auto o = run(mpirun(3) + " --cluster " + cl + " --jobs " + jobs +
               " --policy hadare --round-length 0.5 --checkpoint-dir " + dir.file("ckpt") +
               " --json " + dir.file("sum.json"));
  INFO(o.output);
  REQUIRE(o.status == 0);
  const auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["jobs"].size() == 1);
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());
  CHECK(j["max_copies"].get<int>() == 3);
  // Copies' budgets split the remaining steps, so the job overshoots by fewer than 3 steps.
  const auto steps = j["steps"].get<std::int64_t>();
  CHECK(steps >= 150);
  CHECK(steps < 153);
  for (int r = 0; r < 3; ++r) CHECK(j["busy_gpu_seconds"][r].get<double>() > 0);
  // The merged checkpoint (written by copy 0) holds the job at its final step.
  const auto reg = tessera::train::builtin_trainables();
  auto m = reg.make("mlp", 1);
  REQUIRE(m);
  auto h = tessera::train::load_trainable_checkpoint(dir.file("ckpt") + "/job-0.ckpt", **m);
  REQUIRE(h);
  CHECK((*m)->step() == steps);

  // --local has no aggregator: the scheduler tells the policy it cannot fork.
  auto l = run(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl + " --jobs " +
               jobs + " --policy hadare --round-length 0.5 --json " + dir.file("local.json"));
  INFO(l.output);
  REQUIRE(l.status == 0);
  const auto ls = load_json(dir.file("local.json"));
  CHECK(ls["jobs"][0]["finished"].get<bool>());
  CHECK(ls["jobs"][0]["max_copies"].get<int>() == 1);
}

TEST_CASE("(e) a K-task job's parameters are bitwise the same wherever its tasks ran",
          "[mpi][hare]") {
  // One job of scale K = 4 under `hare` (relaxed fixed-scale synchronisation) on three
  // clusters: one node with 4 GPUs (every task in one process), four 1-GPU nodes of one speed
  // (one task per process), three 1-GPU nodes at speeds 1 / 0.5 / 0.25 (hare stacks tasks on
  // the fast GPU and spills onto slower ones). Each ends bitwise equal to one process running
  // train_step(4) the same number of steps: the K shard gradients summed in shard order.
  const int k = 4, steps = 30;
  const auto reg = tessera::train::builtin_trainables();
  auto reference = reg.make("mlp", 11);
  REQUIRE(reference);
  for (int s = 0; s < steps; ++s) REQUIRE((*reference)->train_step(k));
  struct shape {
    std::string name;
    std::string cluster;
    int nodes;
    int min_ranks;  ///< nodes on which the job must have run
  };
  const std::vector<shape> shapes = {
      {"one node", "[cluster]\nname = \"one\"\n[[cluster.server]]\ngpu_type = \"v100\"\n"
                   "gpus = 4\nspeed = 1.0\n", 1, 1},
      {"four nodes", cluster_toml({1.0, 1.0, 1.0, 1.0}), 4, 4},
      {"heterogeneous", cluster_toml({1.0, 0.5, 0.25}), 3, 2},
  };
  for (const auto& sh : shapes) {
    INFO(sh.name);
    scratch dir("hare");
    const auto cl = dir.write("cluster.toml", sh.cluster);
    const auto jobs = dir.write("jobs.toml", "[[job]]\nkind = \"mlp\"\nscale_factor = 4\n"
                                             "total_steps = 30\nstep_time = 0.01\nseed = 11\n");
    auto o = run(mpirun(sh.nodes) + " --cluster " + cl + " --jobs " + jobs +
                 " --policy hare --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") +
                 " --json " + dir.file("sum.json"));
    INFO(o.output);
    REQUIRE(o.status == 0);
    const auto sum = load_json(dir.file("sum.json"));
    const auto& j = sum["jobs"][0];
    REQUIRE(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == steps);
    int ran_on = 0;
    for (const auto& b : j["busy_gpu_seconds"]) ran_on += b.get<double>() > 0 ? 1 : 0;
    CHECK(ran_on >= sh.min_ranks);
    auto m = reg.make("mlp", 11);
    REQUIRE(m);
    REQUIRE(tessera::train::load_trainable_checkpoint(dir.file("ckpt") + "/job-0.ckpt", **m));
    CHECK((*m)->step() == steps);
    CHECK(same_bits((*m)->params(), (*reference)->params()));
  }
}

TEST_CASE("(f) a node killed while a job's tasks span it: the job resumes on the others",
          "[mpi][hare_fault]") {
  // One K = 3 job under hare on three equal nodes: one task per node. Rank 2 SIGKILLs itself
  // half way through round 2; the other parts' gather times out, they report the round as
  // lost, and the job continues from its checkpoint with its 3 tasks on the 2 nodes left,
  // ending bitwise equal to one process running train_step(3).
  scratch dir("hare_fault");
  const int k = 3, steps = 150;
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", "[[job]]\nkind = \"mlp\"\nscale_factor = 3\n"
                                           "total_steps = 150\nstep_time = 0.01\nseed = 5\n");
  const auto [o, sum] = run_losing_rank2(dir, 3, cl, jobs, " --policy hare");
  INFO(o.output);
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());
  CHECK(j["lost_rounds"].get<int>() == 1);
  CHECK(j["regressions"].get<int>() == 0);
  CHECK(j["busy_gpu_seconds"][0].get<double>() > 0);
  CHECK(j["busy_gpu_seconds"][1].get<double>() > 0);
  const auto reg = tessera::train::builtin_trainables();
  auto reference = reg.make("mlp", 5);
  REQUIRE(reference);
  for (int s = 0; s < steps; ++s) REQUIRE((*reference)->train_step(k));
  auto m = reg.make("mlp", 5);
  REQUIRE(m);
  REQUIRE(tessera::train::load_trainable_checkpoint(dir.file("ckpt") + "/job-0.ckpt", **m));
  CHECK((*m)->step() == steps);
  CHECK(same_bits((*m)->params(), (*reference)->params()));
}
