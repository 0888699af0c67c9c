// End-to-end tests of `tessera run`'s bad-input paths (single process, no mpirun): each ends
// quickly with a clear message and a non-zero exit code. Also a short --local run whose
// --timeline is checked against the plans its summary counts.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/auth.hpp"
#include "runtime/core/timeline.hpp"
#include "tests/support.hpp"

using tessera::test::run_shell;
using tessera::test::run_tessera;
using tessera::test::temp_file;
using tessera::test::tessera_binary;

namespace {

const std::string two_servers =
    "[cluster]\n[[cluster.server]]\ngpu_type = \"v100\"\ngpus = 1\n"
    "[[cluster.server]]\ngpu_type = \"k80\"\ngpus = 1\nspeed = 0.5\n";

}  // namespace

TEST_CASE("cli run: usage and help", "[cli][run]") {
  auto h = run_tessera("run --help");
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("usage: tessera run"));
  auto u = run_tessera("run --jobs x.toml");
  CHECK(u.code == 2);
  CHECK_THAT(u.out, Catch::Contains("--cluster"));
  auto top = run_tessera("--help");
  CHECK_THAT(top.out, Catch::Contains("run "));
}

TEST_CASE("cli run: an unknown job kind names file, line and field", "[cli][run]") {
  const auto cl = temp_file("c.toml", two_servers);
  const auto jobs = temp_file("j.toml", "[[job]]\nkind = \"resnet\"\ntotal_steps = 5\n");
  auto r = run_tessera("run --local 2 --cluster " + cl + " --jobs " + jobs);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(jobs + ":2: field 'kind': unknown job kind 'resnet' "
                                           "(known: mlp, mlp_cuda, softmax_regression, program)"));
}

TEST_CASE("cli run: a cluster that disagrees with the process count", "[cli][run]") {
  const auto cl = temp_file("c2.toml", two_servers);
  const auto jobs = temp_file("j2.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  auto r = run_tessera("run --local 3 --cluster " + cl + " --jobs " + jobs);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("lists 2 servers, but the run has 3 node processes "
                                    "(--local 3)"));
  auto p = run_tessera("run --local 2 --policy no_such_policy --cluster " + cl + " --jobs " + jobs);
  CHECK(p.code == 2);
  CHECK_THAT(p.out, Catch::Contains("no_such_policy"));
}

TEST_CASE("cli run: an unreachable scheduler ends a node within its timeout", "[cli][run]") {
  const auto cl = temp_file("c3.toml", two_servers);
  const auto jobs = temp_file("j3.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  const auto secret = temp_file("c3.secret", "") + ".key";
  REQUIRE(tessera::actors::write_secret_file(
      secret, tessera::actors::secret_key(tessera::actors::secret_bytes, 1)));
  // Port 1 on localhost: nothing listens there.
  auto r = run_tessera("run --rank 1 --scheduler 127.0.0.1:1 --connect-timeout 1 --cluster " + cl +
                       " --jobs " + jobs + " --secret-file " + secret);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("node rank 1: cannot reach the scheduler at 127.0.0.1:1 "
                                    "within 1 s"));
  CHECK(r.seconds < 10);
}

TEST_CASE("cli run: GPUs that disagree with the node's server entry refuse the node",
          "[cli][run][gpu]") {
  const auto cl = temp_file("c_gpu.toml", two_servers);
  const auto jobs = temp_file("j_gpu.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  const std::string env = "TESSERA_GPU_DISCOVERY='fake:2*NVIDIA H100 80GB HBM3' ";
  // Node 0 of a local run (this process): server 0 declares one v100.
  auto r = run_shell(env + tessera_binary() + " run --local 2 --launcher fork --cluster " + cl +
                     " --jobs " + jobs);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("node rank 0: " + cl + ": field 'gpus': server "));
  CHECK_THAT(r.out, Catch::Contains("declares 1 GPU of type v100, but its node found 2 GPUs, "
                                    "not all of type v100:"));
  CHECK_THAT(r.out, Catch::Contains("1: NVIDIA H100 80GB HBM3 (type h100)"));
  // A node process refuses before it tries to reach its scheduler (port 1: none there).
  const auto secret = temp_file("c_gpu.secret", "") + ".key";
  auto n = run_shell(env + tessera_binary() + " run --rank 1 --scheduler 127.0.0.1:1 --cluster " +
                     cl + " --jobs " + jobs + " --secret-file " + secret);
  CHECK(n.code == 2);
  CHECK_THAT(n.out, Catch::Contains("node rank 1: " + cl + ": field 'gpus': server "));
  CHECK_THAT(n.out, Catch::Contains("of type k80"));
  // A setting it does not know.
  auto bad = run_shell("TESSERA_GPU_DISCOVERY=on " + tessera_binary() +
                       " run --local 2 --cluster " + cl + " --jobs " + jobs);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("TESSERA_GPU_DISCOVERY: expected auto, off or "
                                      "fake:<devices>, got 'on'"));
}

TEST_CASE("cli run: a job no GPU type can hold is refused unless the policy stacks tasks",
          "[cli][run]") {
  // Two 1-GPU servers of different types and a job of scale 2: no type can hold it as a gang.
  const auto cl = temp_file("c3.toml", two_servers);
  const auto jobs = temp_file("j3.toml",
                              "[[job]]\nkind = \"mlp\"\nscale_factor = 2\n"
                              "total_steps = 20\nstep_time = 0.01\n");
  auto r = run_tessera("run --local 2 --policy hadar --cluster " + cl + " --jobs " + jobs);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains(jobs + ": field 'scale_factor': job 0 (mlp, scale 2) can "
                                           "run on no GPU type of the cluster"));
  CHECK_THAT(r.out, Catch::Contains("policy hadar cannot place it"));
  // hare runs its 2 tasks on whatever GPUs there are (here, without aggregators, both on the
  // first node).
  auto h = run_tessera("run --local 2 --policy hare --round-length 0.3 --cluster " + cl +
                       " --jobs " + jobs);
  INFO(h.out);
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("1 jobs finished"));
}

TEST_CASE("cli run: policy options are refused as tessera simulate refuses them", "[cli][run]") {
  const auto cl = temp_file("c5.toml", two_servers);
  const auto jobs = temp_file("j5.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  auto r = run_tessera("run --local 2 --policy-arg key=3abc --cluster " + cl + " --jobs " + jobs);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--policy-arg: field 'key': '3abc' is not a number"));
  const auto sim_jobs = temp_file("s5.toml",
                                  "[[job]]\njob_type = \"ResNet-18 (batch size 64)\"\n"
                                  "total_steps = 10\n");
  auto s = run_tessera("simulate -q --trace " + sim_jobs + " --policy-arg key=3abc");
  CHECK(s.code == 2);
  CHECK_THAT(s.out, Catch::Contains("--policy-arg: field 'key': '3abc' is not a number"));
}

TEST_CASE("cli run: no fault-injection or benchmark options", "[cli][run]") {
  // Those hooks live in the test program tessera_faulty only.
  const auto cl = temp_file("c6.toml", two_servers);
  const auto jobs = temp_file("j6.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  for (const char* opt : {"--fault-kill-rank 1", "--fault-kill-round 1", "--fault-protocol-rank 1",
                          "--fault-protocol-version 9", "--bench-flood 10"}) {
    INFO(opt);
    auto r =
        run_tessera(std::string("run --local 2 ") + opt + " --cluster " + cl + " --jobs " + jobs);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("unrecognised option"));
  }
}

TEST_CASE("cli run: numbers out of bounds and one job's bad setting stop the run before it starts",
          "[cli][run][limits]") {
  const auto cl = temp_file("c7.toml", two_servers);
  const auto ok = temp_file("j7.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  const auto huge = temp_file("j7huge.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 1e19\n");
  // The second job's trainable would refuse its learning rate; before, the run started and
  // ended for every job when a node built that one.
  const auto mixed = temp_file("j7mixed.toml",
                               "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n\n"
                               "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n[job.config]\nlr = -1\n");
  const std::string base = "run --local 2 --cluster " + cl + " --jobs ";
  struct row {
    std::string args;
    std::string part;
  };
  const row rows[] = {
      {base + ok + " --round-length nan", "--round-length: expected a number in [0.05, 3600]"},
      {base + ok + " --round-length 1e-9", "--round-length: expected a number in [0.05, 3600]"},
      {base + ok + " --heartbeat-interval nan", "--heartbeat-interval: expected a number"},
      {base + ok + " --timeout inf", "--timeout: expected a number in [1, 604800]"},
      {base + ok + " --connect-timeout 1e-300", "--connect-timeout: expected a number"},
      {base + ok + " --heartbeat-ceiling 1", "--heartbeat-ceiling must be 0 or at least"},
      {base + ok + " --min-nodes -1", "--min-nodes: expected a number in [0, 1024]"},
      {base + ok + " --policy-arg efficiency_stage=nan",
       "--policy-arg: field 'efficiency_stage': expected a finite number"},
      {base + huge, huge + ":3: field 'total_steps': expected a positive number of steps, at "
                           "most 1e+11, got 1e+19"},
      {base + mixed, mixed + ":8: field 'config': mlp config: field 'lr': expected a number in "
                             "(0, 1000], got -1"},
  };
  for (const auto& r : rows) {
    INFO(r.args);
    const auto res = tessera::test::run_shell(tessera::test::memory_bound_prefix() + "timeout 30 " +
                                              tessera_binary() + " " + r.args);
    CHECK(res.code == 2);
    CHECK_THAT(res.out, Catch::Contains(r.part));
    CHECK(res.seconds < 10);
  }
}

TEST_CASE("cli run: --timeline holds the rounds the scheduler planned", "[cli][run][timeline]") {
  tessera::test::scratch_dir d("run_timeline");
  const auto timeline = d.file("t.jsonl"), summary = d.file("s.json");
  auto r = run_tessera("run --local 3 --launcher fork -q --cluster " +
                       tessera::test::config_file("run_example_cluster.toml") + " --jobs " +
                       tessera::test::config_file("run_example_jobs.toml") + " --timeline " +
                       timeline + " --json " + summary);
  INFO(r.out);  // a failed run says why on stderr ("tessera: run failed: ...")
  REQUIRE(r.code == 0);
  std::ifstream in(timeline);
  auto rounds = tessera::read_timeline(in, timeline);
  REQUIRE(rounds);
  REQUIRE_FALSE(rounds->empty());
  // GPU-seconds planned per job on each server (rank) and rounds planned per job, from the
  // timeline; the run's summary counts the same from the plans it dispatched.
  const std::vector<std::string> servers = {"fast", "medium", "slow"};
  std::map<std::int64_t, std::vector<double>> planned;
  std::map<std::int64_t, int> rounds_of;
  for (const auto& rd : *rounds) {
    std::set<std::int64_t> in_round;
    for (const auto& p : rd.placements) {
      const auto rank = std::find(servers.begin(), servers.end(), p.server) - servers.begin();
      REQUIRE(rank < 3);
      planned[p.job].resize(3, 0.0);
      planned[p.job][rank] += p.gpus * rd.length;
      in_round.insert(p.job);
    }
    for (auto j : in_round) ++rounds_of[j];
  }
  auto s = nlohmann::json::parse(tessera::test::file_contents(summary));
  REQUIRE(s.at("jobs").size() == 4);
  for (const auto& j : s.at("jobs")) {
    const auto id = j.at("id").get<std::int64_t>();
    INFO("job " << id);
    CHECK(planned[id] == j.at("planned_gpu_seconds").get<std::vector<double>>());
    CHECK(rounds_of[id] == j.at("rounds").get<int>());
  }
}

TEST_CASE("cli run: --secret-from and --token-file are refused where they mean nothing",
          "[cli][run][secrets]") {
  const auto cl = temp_file("c_sf.toml", two_servers);
  const auto jobs = temp_file("j_sf.toml", "[[job]]\nkind = \"mlp\"\ntotal_steps = 5\n");
  const auto secret = temp_file("c_sf.secret", "") + ".key";
  REQUIRE(tessera::actors::write_secret_file(
      secret, tessera::actors::secret_key(tessera::actors::secret_bytes, 3)));
  auto both = run_tessera("run --local 2 --cluster " + cl + " --jobs " + jobs + " --secret-from " +
                          secret + " --secret-file " + secret + ".new");
  CHECK(both.code == 2);
  CHECK_THAT(both.out, Catch::Contains("give one of them"));
  auto join = run_tessera("node --join 127.0.0.1:1 --server node-1 --cluster " + cl +
                          " --secret-from " + secret);
  CHECK(join.code == 2);
  CHECK_THAT(join.out, Catch::Contains("a joining node reads the cluster's secret with "
                                       "--secret-file"));
  auto token =
      run_tessera("run --local 2 --cluster " + cl + " --jobs " + jobs + " --token-file " + secret);
  CHECK(token.code == 2);
  CHECK_THAT(token.out, Catch::Contains("--token-file is the control API's token"));
  // A secret others may read is refused, naming the file.
  REQUIRE(::chmod(secret.c_str(), 0644) == 0);
  auto open = run_tessera("run --local 2 --launcher fork --cluster " + cl + " --jobs " + jobs +
                          " --secret-from " + secret);
  CHECK(open.code != 0);
  CHECK_THAT(open.out, Catch::Contains(secret + ": the secret file may be read or written by "
                                                "others"));
}

TEST_CASE("cli run: a waiting job costs the scheduler nothing per round", "[cli][run][scale]") {
  // One GPU under FIFO: N short jobs run one after another, two rounds each, while the others
  // wait. The scheduler asks for a view only the job that ran (and each job once, new), so its
  // messages grow linearly in N; asking every waiting job each round would add sum(active)
  // = N(N+1) views, quadratic.
  const auto cl = temp_file("c_wait.toml",
                            "[cluster]\nname = \"one\"\n[[cluster.server]]\nname = \"a\"\n"
                            "gpu_type = \"v100\"\ngpus = 1\n");
  auto messages = [&](int n) {
    std::string jobs;
    for (int i = 0; i < n; ++i)
      jobs += "[[job]]\nkind = \"softmax_regression\"\ntotal_steps = 15\nstep_time = 0.01\n";
    const auto file = temp_file("j_wait" + std::to_string(n) + ".toml", jobs);
    const auto out = file + ".json";
    auto r = run_tessera(
        "run --local 1 --launcher fork -q --policy fifo --round-length 0.1 "
        "--cluster " +
        cl + " --jobs " + file + " --json " + out);
    INFO(r.out);
    REQUIRE(r.code == 0);
    auto s = nlohmann::json::parse(tessera::test::file_contents(out));
    INFO("rounds " << s.at("rounds"));
    return s.at("messages").get<double>();
  };
  const double m12 = messages(12), m24 = messages(24);
  INFO("messages: 12 jobs " << m12 << ", 24 jobs " << m24);
  CHECK(m24 < 2.5 * m12);
}
