// Multi-process tests of `tessera run` under mpirun (and --local): ctest finds every test case
// (label "mpi", each with a TIMEOUT); tests/CMakeLists.txt sets the environment mpirun needs
// to run as root. Each test writes its inputs to a scratch directory, runs the binary, and
// checks the JSON summary and the jobs' final checkpoints. Injected faults (a node killing
// itself, a node claiming another protocol version) use tessera_faulty, `tessera run` with
// test hooks (tests/tessera_faulty.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/trainable.hpp"
#include "tests/mpi/mpi_support.hpp"
#include "tests/support.hpp"

using json = nlohmann::json;
using tessera::test::background;
using tessera::test::check_bitwise;
using tessera::test::cluster_toml;
using tessera::test::command_result;
using tessera::test::jobs_toml;
using tessera::test::listeners_of;
using tessera::test::load_final;
using tessera::test::load_json;
using tessera::test::make_trainable;
using tessera::test::mpirun;
using tessera::test::run_shell;
using tessera::test::same_bits;
using tessera::test::scratch_dir;
using tessera::test::uninterrupted;

namespace {

/// The checkpoint directory holds no temporary file and at most two checkpoints per job.
void check_tidy(const scratch_dir& dir) {
  std::map<std::string, int> per_job;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("ckpt"))) {
    const auto name = e.path().filename().string();
    INFO(name);
    CHECK(name.find(".tmp.") == std::string::npos);
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".ckpt") == 0)
      ++per_job[name.substr(0, name.find('.'))];
  }
  CHECK_FALSE(per_job.empty());
  for (const auto& [job, n] : per_job) {
    INFO(job);
    CHECK(n <= 2);
  }
}

/// How often `what` occurs in `text`.
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// Runs tessera_faulty with the hook options `faults` on `nodes` processes (mpirun, with
/// --enable-recovery when a rank is to be lost) in rounds of 0.4 s; checks the run ended well
/// and returns its output and summary.
std::pair<command_result, json> run_faulty(const scratch_dir& dir, int nodes, const std::string& cl,
                                           const std::string& jobs, const std::string& faults,
                                           bool recovery) {
  auto o = run_shell(mpirun(nodes, recovery, TESSERA_FAULTY_BINARY) + " " + faults + " --cluster " +
                     cl + " --jobs " + jobs +
                     " --round-length 0.4 --heartbeat-timeout 1.5 --checkpoint-dir " +
                     dir.file("ckpt") + " --json " + dir.file("sum.json"));
  INFO(o.out);
  auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["ok"].get<bool>());
  return {o, sum};
}

/// run_faulty with rank 2 killing itself half way through round 2; checks that exactly rank
/// 2 was lost.
std::pair<command_result, json> run_losing_rank2(const scratch_dir& dir, int nodes,
                                                 const std::string& cl, const std::string& jobs,
                                                 const std::string& extra) {
  auto run =
      run_faulty(dir, nodes, cl, jobs, "--fault-kill-rank 2 --fault-kill-round 2" + extra, true);
  CHECK(run.second["failed_ranks"] == json::array({2}));
  return run;
}

/// run_faulty on four equal one-GPU nodes for four jobs of `steps` steps.
std::pair<command_result, json> run_four_faulty(const scratch_dir& dir, int steps,
                                                const std::string& faults, bool recovery) {
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(4, steps, 0.01));
  return run_faulty(dir, 4, cl, jobs, faults, recovery);
}

/// Every job finished without starting before its latest checkpoint, ended bitwise equal to
/// its uninterrupted training, and left a tidy checkpoint directory; the run took under 30 s.
/// Returns the rounds lost over all jobs.
int check_jobs_recovered(const scratch_dir& dir, const command_result& o, const json& sum) {
  int lost = 0;
  for (const auto& j : sum["jobs"]) {
    INFO("job " << j["id"]);
    CHECK(j["finished"].get<bool>());
    CHECK(j["regressions"].get<int>() == 0);
    CHECK(j["lost_rounds"].get<int>() <= 1);
    lost += j["lost_rounds"].get<int>();
  }
  check_bitwise(sum);
  check_tidy(dir);
  CHECK(o.seconds < 30);
  return lost;
}

}  // namespace

TEST_CASE("(a) 3 nodes at speeds 1/0.5/0.25 run 6 jobs: GPU time follows the plan", "[mpi][a]") {
  scratch_dir dir("a");
  const double L = 0.5;
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(6, 120, 0.01));
  auto o = run_shell(mpirun(3) + " --cluster " + cl + " --jobs " + jobs +
                     " --policy max_min_fairness_perf --round-length 0.5 --checkpoint-dir " +
                     dir.file("ckpt") + " --json " + dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
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

TEST_CASE("(b) jobs preempted and resumed on other processes end bitwise identical", "[mpi][b]") {
  scratch_dir dir("b");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(6, 60, 0.01));
  auto o = run_shell(mpirun(4) + " --cluster " + cl + " --jobs " + jobs +
                     " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") + " --json " +
                     dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
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
  check_bitwise(sum);
}

TEST_CASE("(c) a node rank killed mid-run: every job finishes, none loses over a round",
          "[mpi][c]") {
  scratch_dir dir("c");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(4, 150, 0.01));
  const auto [o, sum] = run_losing_rank2(dir, 4, cl, jobs, "");
  INFO(o.out);
  CHECK(o.out.find("node rank 2") != std::string::npos);
  int lost = 0;
  for (const auto& j : sum["jobs"]) {
    INFO("job " << j["id"]);
    CHECK(j["finished"].get<bool>());
    CHECK(j["lost_rounds"].get<int>() <= 1);  // at most the round it was in when rank 2 died
    CHECK(j["regressions"].get<int>() == 0);  // resumed from its latest checkpoint, no earlier
    lost += j["lost_rounds"].get<int>();
  }
  CHECK(lost == 1);  // the one copy rank 2 was running
  check_bitwise(sum);
}

TEST_CASE("(d) a process speaking another protocol version is refused", "[mpi][d]") {
  scratch_dir dir("d");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(2, 20, 0.01));
  auto o =
      run_shell(mpirun(4, false, TESSERA_FAULTY_BINARY) +
                " --fault-protocol-rank 3 --fault-protocol-version 99 --cluster " + cl +
                " --jobs " + jobs + " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt"));
  INFO(o.out);
  CHECK(o.code != 0);
  CHECK(o.out.find("node rank 3") != std::string::npos);
  CHECK(o.out.find("speaks protocol version 99, this scheduler speaks version ") !=
        std::string::npos);
  CHECK(o.seconds < 30);
}

TEST_CASE("bad input under mpirun ends every rank with a clear message", "[mpi][input]") {
  scratch_dir dir("input");
  const auto cl3 = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(2, 20, 0.01));
  auto o = run_shell(mpirun(4) + " --cluster " + cl3 + " --jobs " + jobs);
  INFO(o.out);
  CHECK(o.code == 2);
  CHECK(o.out.find("lists 3 servers, but the run has 4 node processes (mpirun -np 4)") !=
        std::string::npos);
  const auto bad = dir.write("bad.toml", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n");
  auto k = run_shell(mpirun(3) + " --cluster " + cl3 + " --jobs " + bad);
  INFO(k.out);
  CHECK(k.code == 2);
  CHECK(k.out.find("field 'kind': unknown job kind 'resnet'") != std::string::npos);
  CHECK(o.seconds + k.seconds < 30);
}

TEST_CASE("a local run (--local) starts the node processes itself", "[mpi][local]") {
  scratch_dir dir("local");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(4, 40, 0.01));
  auto o = run_shell(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl + " --jobs " +
                     jobs + " --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") +
                     " --json " + dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("4 jobs finished") != std::string::npos);
  const auto sum = load_json(dir.file("sum.json"));
  CHECK(sum["ok"].get<bool>());
  check_bitwise(sum);
}

TEST_CASE("a --local run under mpirun: the gate alone listens in tessera's processes",
          "[mpi][local][listen]") {
  scratch_dir dir("local_listen");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(3, 400, 0.01));
  background run(std::string(TESSERA_BINARY) + " run --local 3 --launcher mpirun --cluster " + cl +
                     " --jobs " + jobs + " --round-length 0.3 --verbose",
                 dir.file("run.out"));
  const auto port = run.await("scheduler listening on 127\\.0\\.0\\.1:([0-9]+)", 30);
  REQUIRE_FALSE(port.empty());
  // Every process of the run has the cluster file's path on its command line (mpirun too).
  auto pids = run_shell("pgrep -f -- '" + cl + "'");
  std::istringstream lines(pids.out);
  std::string line;
  int ranks = 0, launchers = 0;
  std::vector<int> rank_ports;  // every listener of a tessera process
  while (std::getline(lines, line)) {
    const pid_t pid = std::stoi(line);
    std::ifstream cmd("/proc/" + line + "/cmdline");
    std::string args((std::istreambuf_iterator<char>(cmd)), {});
    std::replace(args.begin(), args.end(), '\0', ' ');
    const auto held = listeners_of(pid);
    if (args.rfind("mpirun ", 0) == 0) {
      // Open MPI 4.1's launcher binds its out-of-band listeners (IPv4 and IPv6) to the
      // wildcard address whatever it is told; its PMIx listener is on loopback.
      ++launchers;
      int wide = 0;
      for (const auto& l : held)
        if (!l.loopback()) ++wide;
      CHECK(wide <= 2);
    } else if (args.rfind(TESSERA_BINARY, 0) == 0) {
      if (args.find("--local") == std::string::npos) ++ranks;  // else the command waiting
      for (const auto& l : held) {
        CHECK(l.loopback());
        rank_ports.push_back(l.port);
      }
    }
  }
  INFO(run.output());
  CHECK(launchers == 1);
  CHECK(ranks == 3);
  // Only rank 0's gate: no TCP transport between the ranks, no CAF listener.
  CHECK(rank_ports == std::vector<int>{std::stoi(port)});
  CHECK(run.wait(120) == 0);
}

TEST_CASE("a job forked into 3 copies runs on every node and merges them each round",
          "[mpi][fork]") {
  scratch_dir dir("fork");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs =
      dir.write("jobs.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 150\nstep_time = 0.01\n");
  auto o = run_shell(mpirun(3) + " --cluster " + cl + " --jobs " + jobs +
                     " --policy hadare --round-length 0.5 --checkpoint-dir " + dir.file("ckpt") +
                     " --json " + dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
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
  CHECK(load_final(j, "mlp", 1)->step() == steps);

  // --local runs under mpirun on this host: the same forked copies, the same steps.
  auto l = run_shell(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl + " --jobs " +
                     jobs + " --policy hadare --round-length 0.5 --json " + dir.file("local.json"));
  INFO(l.out);
  REQUIRE(l.code == 0);
  const auto ls = load_json(dir.file("local.json"));
  CHECK(ls["jobs"][0]["finished"].get<bool>());
  CHECK(ls["jobs"][0]["max_copies"].get<int>() == 3);
  // Started by fork/exec there is no aggregator: the policy is told it cannot fork, and the
  // user is told so.
  auto f = run_shell(std::string(TESSERA_BINARY) + " run --local 3 --launcher fork --cluster " +
                     cl + " --jobs " + jobs + " --policy hadare --round-length 0.5 --json " +
                     dir.file("fork.json"));
  INFO(f.out);
  REQUIRE(f.code == 0);
  CHECK(f.out.find("no job is forked") != std::string::npos);
  CHECK(load_json(dir.file("fork.json"))["jobs"][0]["max_copies"].get<int>() == 1);
}

TEST_CASE("(e) a K-task job's parameters are bitwise the same wherever its tasks ran",
          "[mpi][hare]") {
  // One job of scale K = 4 under `hare` (relaxed fixed-scale synchronisation) on three
  // clusters: one node with 4 GPUs (every task in one process), four 1-GPU nodes of one speed
  // (one task per process), three 1-GPU nodes at speeds 1 / 0.5 / 0.25 (hare stacks tasks on
  // the fast GPU and spills onto slower ones). Each ends bitwise equal to one process running
  // train_step(4) the same number of steps: the K shard gradients summed in shard order.
  const int k = 4, steps = 30;
  const auto reference = uninterrupted("mlp", 11, steps, k);
  struct shape {
    std::string name;
    std::string cluster;
    int nodes;
    int min_ranks;  ///< nodes on which the job must have run
  };
  const std::vector<shape> shapes = {
      {"one node",
       "[cluster]\nname = \"one\"\n[[cluster.server]]\ngpu_type = \"v100\"\n"
       "gpus = 4\nspeed = 1.0\n",
       1, 1},
      {"four nodes", cluster_toml({1.0, 1.0, 1.0, 1.0}), 4, 4},
      {"heterogeneous", cluster_toml({1.0, 0.5, 0.25}), 3, 2},
  };
  for (const auto& sh : shapes) {
    INFO(sh.name);
    scratch_dir dir("hare");
    const auto cl = dir.write("cluster.toml", sh.cluster);
    const auto jobs = dir.write("jobs.toml",
                                "[[job]]\nkind = \"mlp\"\nscale_factor = 4\n"
                                "total_steps = 30\nstep_time = 0.01\nseed = 11\n");
    auto o = run_shell(mpirun(sh.nodes) + " --cluster " + cl + " --jobs " + jobs +
                       " --policy hare --round-length 0.25 --checkpoint-dir " + dir.file("ckpt") +
                       " --json " + dir.file("sum.json"));
    INFO(o.out);
    REQUIRE(o.code == 0);
    const auto sum = load_json(dir.file("sum.json"));
    const auto& j = sum["jobs"][0];
    REQUIRE(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == steps);
    int ran_on = 0;
    for (const auto& b : j["busy_gpu_seconds"]) ran_on += b.get<double>() > 0 ? 1 : 0;
    CHECK(ran_on >= sh.min_ranks);
    auto m = load_final(j, "mlp", 11);
    CHECK(m->step() == steps);
    CHECK(same_bits(m->params(), reference));
  }
}

TEST_CASE("(f) a node killed while a job's tasks span it: the job resumes on the others",
          "[mpi][hare_fault]") {
  // One K = 3 job under hare on three equal nodes: one task per node. Rank 2 SIGKILLs itself
  // half way through round 2; the other parts' gather times out, they report the round as
  // lost, and the job continues from its checkpoint with its 3 tasks on the 2 nodes left,
  // ending bitwise equal to one process running train_step(3).
  scratch_dir dir("hare_fault");
  const int k = 3, steps = 150;
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml",
                              "[[job]]\nkind = \"mlp\"\nscale_factor = 3\n"
                              "total_steps = 150\nstep_time = 0.01\nseed = 5\n");
  const auto [o, sum] = run_losing_rank2(dir, 3, cl, jobs, " --policy hare");
  INFO(o.out);
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());
  CHECK(j["lost_rounds"].get<int>() == 1);
  CHECK(j["regressions"].get<int>() == 0);
  CHECK(j["busy_gpu_seconds"][0].get<double>() > 0);
  CHECK(j["busy_gpu_seconds"][1].get<double>() > 0);
  auto m = load_final(j, "mlp", 5);
  CHECK(m->step() == steps);
  CHECK(same_bits(m->params(), uninterrupted("mlp", 5, steps, k)));
}

TEST_CASE("a researcher's own node binary runs its own trainable kind", "[mpi][example]") {
  // examples/custom_trainable: the built-in kinds plus least_squares, through the same command
  // line as `tessera run`; --local starts the binary again with no command prefix.
  scratch_dir dir("example");
  const std::string root = TESSERA_CONFIG_DIR "/..";
  auto o = run_shell(std::string(TESSERA_EXAMPLE_BINARY) + " --local 3 --cluster " + root +
                     "/config/run_example_cluster.toml --jobs " + root +
                     "/examples/custom_trainable/jobs.toml --round-length 0.5 --json " +
                     dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("3 jobs finished") != std::string::npos);
  const auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["jobs"].size() == 3);
  CHECK(sum["jobs"][0]["kind"] == "least_squares");
  for (const auto& j : sum["jobs"]) CHECK(j["finished"].get<bool>());
}

TEST_CASE("tessera_faulty's flood hook reaches the node processes --local starts", "[mpi][flood]") {
  // Each node sends 200 heartbeats once registered and reports when the scheduler has handled
  // them: the hook options travel to the node processes --local starts.
  scratch_dir dir("flood");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(2, 100, 0.01));
  auto o = run_shell(std::string(TESSERA_FAULTY_BINARY) + " --bench-flood 200 --local 2" +
                     " --bench-flood-report " + dir.str() + " --cluster " + cl + " --jobs " + jobs +
                     " --round-length 0.25 --json " + dir.file("sum.json"));
  INFO(o.out);
  REQUIRE(o.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    std::ifstream f(dir.file("flood-" + std::to_string(rank) + ".txt"));
    long long n = 0, start = 0, end = 0;
    REQUIRE(f >> n >> start >> end);
    CHECK(n == 200);
    CHECK(end >= start);
  }
  CHECK(load_json(dir.file("sum.json"))["messages"].get<long long>() > 400);
}

TEST_CASE("(o) one job's checkpoint corrupted mid-run: that job falls back, every job finishes",
          "[mpi][ckpt_corrupt]") {
  // Four jobs on four nodes, every round loading its state from disk; job 1's checkpoint of
  // round 2 gets a flipped byte. The node resuming it finds it corrupt, falls back to round
  // 1's and says so; job 1 redoes a round, the others never notice.
  scratch_dir dir("ckpt_corrupt");
  const auto [o, sum] =
      run_four_faulty(dir, 150, "--fault-corrupt-job 1 --fault-corrupt-round 2", false);
  INFO(o.out);
  CHECK(o.code == 0);
  CHECK(sum["checkpoint_fallbacks"].get<int>() == 1);
  CHECK(sum["restarts_from_scratch"].get<int>() == 0);
  for (const auto& j : sum["jobs"])
    CHECK(j["checkpoint_fallbacks"].get<int>() == (j["id"].get<int>() == 1 ? 1 : 0));
  CHECK(o.out.find("tessera: job 1: ") != std::string::npos);
  CHECK(o.out.find("job-1.r2.ckpt: payload checksum mismatch") != std::string::npos);
  CHECK(o.out.find("resumed from its previous checkpoint") != std::string::npos);
  CHECK(check_jobs_recovered(dir, o, sum) == 0);
}

TEST_CASE("(p) a node killed inside a checkpoint write: at most one round lost, bitwise equal",
          "[mpi][ckpt_kill]") {
  // Rank 2 SIGKILLs itself in its checkpoint write of round 2, after the temporary file is
  // written and before the rename. Its job resumes from round 1's checkpoint on the nodes left;
  // the temporary file is removed as a stray.
  scratch_dir dir("ckpt_kill");
  const auto [o, sum] =
      run_four_faulty(dir, 150, "--fault-kill-write-rank 2 --fault-kill-write-round 2", true);
  INFO(o.out);
  CHECK(sum["failed_ranks"] == json::array({2}));
  CHECK(sum["checkpoint_fallbacks"].get<int>() == 0);
  CHECK(check_jobs_recovered(dir, o, sum) == 1);  // the one copy whose write was cut short
}

TEST_CASE("(q) a checkpoint directory that takes no writes for a while pauses the jobs",
          "[mpi][ckpt_full]") {
  // Checkpoint writes at the end of rounds 2-4 fail with ENOSPC, and so do the scheduler's
  // probes after them: every job waits (rounds 3-5 plan nothing), then all resume.
  scratch_dir dir("ckpt_full");
  const auto [o, sum] =
      run_four_faulty(dir, 200, "--fault-full-from-round 2 --fault-full-to-round 4", false);
  INFO(o.out);
  CHECK(o.code == 0);
  CHECK(sum["checkpoint_pauses"].get<int>() == 1);
  int failures = 0;
  for (const auto& j : sum["jobs"]) {
    CHECK(j["paused_rounds"].get<int>() == 3);
    failures += j["checkpoint_write_failures"].get<int>();
  }
  CHECK(failures == 4);  // every job ran round 2 and could not save it
  // Logged once each way, naming the directory and the system's reason.
  CHECK(count_of(o.out, "does not take writes") == 1);
  CHECK(o.out.find("checkpoint directory " + dir.file("ckpt") + " does not take writes") !=
        std::string::npos);
  CHECK(o.out.find("No space left on device") != std::string::npos);
  CHECK(count_of(o.out, "takes writes again; the jobs resume") == 1);
  CHECK(check_jobs_recovered(dir, o, sum) == 0);
}

TEST_CASE("(r) a node stalled past the heartbeat timeout cannot publish stale state",
          "[mpi][ckpt_stale]") {
  // Rank 2 is SIGSTOPped half way through round 2 for 4 s: declared lost after 1.5-3 s (its
  // bound lies between the floor and the 3 s ceiling, whatever the host's load), its job
  // goes on elsewhere. When it wakes it finishes round 2 and tries to publish that round's
  // checkpoint; the fence (set when it was declared lost) refuses it. Every job ends bitwise
  // equal to an uninterrupted run.
  scratch_dir dir("ckpt_stale");
  const auto [o, sum] = run_four_faulty(
      dir, 300,
      "--fault-stop-rank 2 --fault-stop-round 2 --fault-stop-seconds 4 --heartbeat-ceiling 3",
      true);
  INFO(o.out);
  CHECK(sum["failed_ranks"] == json::array({2}));
  CHECK(sum["seconds"].get<double>() > 5);  // still running when rank 2 woke up
  CHECK(o.out.find("tessera: node rank 2: job ") != std::string::npos);
  CHECK(o.out.find("round 2: checkpoint refused: ") != std::string::npos);
  CHECK(o.out.find("a newer writer owns the job, this one is stale") != std::string::npos);
  CHECK(check_jobs_recovered(dir, o, sum) == 1);
}
