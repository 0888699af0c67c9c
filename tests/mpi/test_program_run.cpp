// Users' own programs as jobs (kind "program", docs/lease-protocol.md) under `tessera run`:
// misbehaving programs (tests/data/programs/misbehave.py) fail their job alone, restarts are
// counted, and no process of theirs is left behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <tuple>

#include "tests/mpi/mpi_support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

const std::string programs_dir = std::string(TESSERA_TEST_DATA_DIR) + "/programs";

/// A [[job]] of misbehave.py in `mode`.
std::string misbehave_job(int id, const std::string& mode, int total, int max_restarts,
                          double grace) {
  std::ostringstream s;
  s << "[[job]]\nid = " << id << "\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", "
    << "\"misbehave.py\", \"" << mode << "\", \"0.01\"]\nworkdir = \"" << programs_dir
    << "\"\nenv = { MISBEHAVE_TOTAL = \"" << total << "\" }\ntotal_steps = " << total
    << "\nstep_time = 0.01\nmax_restarts = " << max_restarts << "\ngrace_seconds = " << grace
    << "\n\n";
  return s.str();
}

/// Runs the job set `jf` under `mpirun -np 3` on three one-GPU nodes of speeds 1 / 0.5 / 0.25
/// with `policy` and `round_length`; returns the run summary (the run must succeed).
json run_on_three(scratch_dir& dir, const std::string& jf, const std::string& policy,
                  const std::string& round_length, std::string* out = nullptr) {
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  auto o = run_shell(mpirun(3) + " --cluster " + cl + " --jobs " + jf + " --policy " + policy +
                     " --round-length " + round_length + " --checkpoint-dir " + dir.file("ckpt") +
                     " --json " + dir.file("sum.json") + run_timeout(85));
  INFO(o.out);
  REQUIRE(o.code == 0);
  if (out) *out = o.out;
  return load_json(dir.file("sum.json"));
}

const json& job_of(const json& sum, int id) {
  for (const auto& j : sum["jobs"])
    if (j["id"].get<int>() == id) return j;
  FAIL("no job " << id << " in the summary");
  static json none;
  return none;
}

}  // namespace

TEST_CASE("(t) misbehaving programs fail their own job, and leave no process behind",
          "[mpi][program]") {
  scratch_dir dir("programs");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 1.0, 1.0}));
  std::string jobs =
      misbehave_job(0, "ok", 60, 0, 2) + misbehave_job(1, "crash_once", 60, 2, 2) +
      misbehave_job(2, "crash", 60, 1, 2) + misbehave_job(3, "silent", 60, 0, 0.4) +
      misbehave_job(4, "never", 60, 0, 1) + misbehave_job(5, "garbage", 60, 0, 1) +
      misbehave_job(6, "orphan", 60, 0, 1) + misbehave_job(7, "hang_after_lease", 60, 0, 1) +
      misbehave_job(8, "version", 60, 0, 1) + misbehave_job(9, "oversized", 60, 0, 1) +
      misbehave_job(10, "stubborn", 60, 0, 0.4) + misbehave_job(11, "slow_start", 60, 0, 3) +
      misbehave_job(12, "plain", 60, 0, 3);
  const auto jf = dir.write("jobs.toml", jobs);
  auto o = run_shell(std::string(TESSERA_BINARY) + " run --local 3 --cluster " + cl + " --jobs " +
                     jf + " --policy fifo --round-length 1.2 --checkpoint-dir " + dir.file("ckpt") +
                     " --json " + dir.file("sum.json") + run_timeout(80));
  INFO(o.out);
  CHECK(o.code == 1);  // some jobs failed: the run says so
  const auto sum = load_json(dir.file("sum.json"));
  CHECK_FALSE(sum["ok"].get<bool>());
  CHECK(has(sum["error"].get<std::string>(), "2, 3, 4, 5, 6, 7, 8, 9, 10, 12"));
  // A well-behaved program finishes; its steps are the ones it reported.
  const auto& ok = job_of(sum, 0);
  CHECK(ok["finished"].get<bool>());
  CHECK(ok["steps"].get<int>() == 60);
  CHECK(ok["program_failures"].get<int>() == 0);
  CHECK(ok["accuracy"].get<double>() == 0.5);
  // Failing once is a restart from its checkpoint; it then finishes.
  const auto& once = job_of(sum, 1);
  CHECK(once["finished"].get<bool>());
  CHECK(once["program_failures"].get<int>() == 1);
  CHECK(once["steps"].get<int>() == 60);
  // Failing always: max_restarts + 1 failures, then failed with the tail of its stderr.
  const auto& crash = job_of(sum, 2);
  CHECK(crash["failed"].get<bool>());
  CHECK_FALSE(crash["finished"].get<bool>());
  CHECK(crash["program_failures"].get<int>() == 2);
  CHECK(has(crash["failure"].get<std::string>(), "exited with status 3"));
  CHECK(has(crash["failure"].get<std::string>(), "misbehave: about to fail on purpose"));
  const std::vector<std::pair<int, std::string>> reasons{
      {3, "sent nothing for"},
      {4, "did not reach its lease within"},
      {5, "broke the lease protocol"},
      {6, "exited with status 4"},
      {7, "still ran"},
      {8, "broke the lease protocol"},
      {9, "broke the lease protocol"},
      {10, "sent nothing for"}};  // it ignores SIGTERM: SIGKILL ends it
  for (const auto& [id, why] : reasons) {
    const auto& j = job_of(sum, id);
    INFO("job " << id << ": " << j["failure"].get<std::string>());
    CHECK(j["failed"].get<bool>());
    CHECK(j["program_failures"].get<int>() == 1);
    CHECK(has(j["failure"].get<std::string>(), why));
  }
  CHECK(has(job_of(sum, 8)["failure"].get<std::string>(), "99"));
  // Starting (2 s) takes longer than the round (1.2 s): its lease still gives it half a round
  // after hello, so it trains and finishes instead of restarting for ever with no step.
  const auto& slow = job_of(sum, 11);
  INFO("job 11: " << slow["failure"].get<std::string>());
  CHECK(slow["finished"].get<bool>());
  CHECK(slow["program_failures"].get<int>() == 0);
  CHECK(slow["steps"].get<int>() == 60);
  CHECK(slow["startup_seconds"].get<double>() > 1.2);
  CHECK(has(o.out, "job 11: its program took"));  // the warning about its slow start
  // A program that exits 0 without a word to its node (a script written for torchrun) is
  // refused at once, naming the client, instead of being restarted for ever.
  const auto& plain = job_of(sum, 12);
  INFO("job 12: " << plain["failure"].get<std::string>());
  CHECK(plain["failed"].get<bool>());
  CHECK(plain["program_failures"].get<int>() == 0);
  CHECK(has(plain["failure"].get<std::string>(), "exited 0 without a word to its node"));
  CHECK(has(plain["failure"].get<std::string>(), "from tessera_client import Lease"));
  // No program, and no child a program left, outlives the run.
  CHECK(find_process("misbehave.py") == -1);
  CHECK(find_process("sleep 997") == -1);
}

TEST_CASE("(u) forked program copies average known buffers exactly across nodes",
          "[mpi][program][fork]") {
  scratch_dir dir("program_average");
  const auto jf = dir.write(
      "jobs.toml",
      "[[job]]\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", "
      "\"average_check.py\", \"1200\"]\nworkdir = \"" +
          programs_dir +
          "\"\ntotal_steps = 1200\nstep_time = 0.002\ngrace_seconds = 10\nmax_copies = 3\n");
  const auto sum = run_on_three(dir, jf, "hadare", "0.8");
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());
  CHECK(j["max_copies"].get<int>() == 3);
  int files = 0, of_three = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("ckpt") + "/job-0")) {
    if (e.path().filename().string().rfind("average-", 0) != 0) continue;
    ++files;
    const auto a = load_json(e.path().string());
    INFO(e.path().string() << ": " << a.dump());
    const int copies = a["averaged_copies"].get<int>();
    CHECK(copies == a["copies"].get<int>());
    if (copies != 3) continue;
    ++of_three;
    // The mean of 1, 2, 3 and of -1/8, -2/8, -3/8: exact in float32.
    CHECK(a["values"][0] == json::array({2.0, 2.0, 2.0, 2.0, 2.0}));
    CHECK(a["values"][1] == json::array({-0.25, -0.25, -0.25}));
  }
  CHECK(files >= 3);
  CHECK(of_three >= 3);
}

TEST_CASE("(u2) forked program copies average 100M floats exactly across nodes",
          "[mpi][program][fork]") {
  // 400 MB a copy: version 1 of the lease protocol broke at 64 MB ("Broken pipe").
  scratch_dir dir("program_average_big");
  const auto jf = dir.write(
      "jobs.toml",
      "[[job]]\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", "
      "\"average_check.py\", \"6000\", \"100000000\"]\nworkdir = \"" +
          programs_dir +
          "\"\ntotal_steps = 6000\nstep_time = 0.002\ngrace_seconds = 30\nmax_copies = 3\n");
  const auto sum = run_on_three(dir, jf, "hadare", "3");
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());
  int of_three = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("ckpt") + "/job-0")) {
    if (e.path().filename().string().rfind("average-", 0) != 0) continue;
    const auto a = load_json(e.path().string());
    INFO(e.path().string() << ": " << a.dump());
    CHECK(a["floats"].get<long>() == 100000000);
    CHECK(a["exact"].get<bool>());
    if (a["averaged_copies"].get<int>() == 3) ++of_three;
  }
  CHECK(of_three >= 3);
}

TEST_CASE("(u3) a copy killed while its average waits: the others carry on, the failure is named",
          "[mpi][program][fork]") {
  scratch_dir dir("program_average_dies");
  const auto jf = dir.write("jobs.toml",
                            "[[job]]\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", "
                            "\"average_check.py\", \"1200\"]\nworkdir = \"" +
                                programs_dir +
                                "\"\nenv = { AVERAGE_CHECK_DIE_COPY = \"1\" }\ntotal_steps = 1200\n"
                                "step_time = 0.002\ngrace_seconds = 10\nmax_copies = 3\n");
  std::string out;
  const auto sum = run_on_three(dir, jf, "hadare", "0.8", &out);
  const auto& j = sum["jobs"][0];
  CHECK(j["finished"].get<bool>());  // copy 1 died once; the job went on and finished
  CHECK(j["program_failures"].get<int>() >= 1);
  INFO(out);
  // The failure names the job, the copy, the size and the cause.
  CHECK(out.find("job 0 copy 1: its program exited with status 3 while its 'average' of 8 float32 "
                 "values waited") != std::string::npos);
  // The others' means stayed exact, whoever was in them.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("ckpt") + "/job-0")) {
    if (e.path().filename().string().rfind("average-", 0) != 0) continue;
    ++files;
    const auto a = load_json(e.path().string());
    const int k = a["averaged_copies"].get<int>();
    REQUIRE(k >= 1);
    INFO(a.dump());
    // The mean of copies 1..k of c + 1 is (k + 1) / 2 for the first copies, or 2 for {1, 3}.
    const double first = a["values"][0][0].get<double>();
    CHECK((first == (k + 1) / 2.0 || first == 2.0));
  }
  CHECK(files >= 3);
}

namespace {

const std::string examples_dir = std::string(TESSERA_TEST_DATA_DIR) + "/../../examples";

/// `n` jobs of an example program (its train.py with `args`), each with `total` steps.
/// `extra`: more keys for each job, whole lines.
std::string example_jobs(const std::string& example, int n, int total, const std::string& args,
                         double step_time, const std::string& extra = "") {
  std::ostringstream s;
  for (int i = 0; i < n; ++i)
    s << "[[job]]\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", \"train.py\", "
      << "\"--steps\", \"" << total << "\"" << args << "]\nworkdir = \"" << examples_dir << "/"
      << example << "\"\nenv = { OMP_NUM_THREADS = \"1\" }\ntotal_steps = " << total
      << "\nstep_time = " << step_time << "\ngrace_seconds = 30\n"
      << extra << "\n";
  return s.str();
}

/// The last line of `text` that starts with '{', parsed.
json last_json_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    const auto at = line.find('{');
    if (at != std::string::npos) last = line.substr(at);
  }
  REQUIRE_FALSE(last.empty());
  return json::parse(last);
}

/// The uninterrupted run's result: the NumPy example on its own for `steps` steps, no tessera;
/// its parameters' sha256.
std::string numpy_alone_sha256(scratch_dir& dir, int steps) {
  auto alone =
      run_shell("cd " + examples_dir + "/numpy_elastic && /usr/bin/python3 train.py " + "--steps " +
                std::to_string(steps) + " --checkpoint-dir " + dir.file("alone"));
  INFO(alone.out);
  REQUIRE(alone.code == 0);
  return last_json_line(alone.out)["params_sha256"].get<std::string>();
}

}  // namespace

TEST_CASE("(v) the NumPy example, preempted and resumed on other nodes, ends bitwise equal",
          "[mpi][program][examples]") {
  scratch_dir dir("numpy_example");
  const auto want = numpy_alone_sha256(dir, 4000);
  // Four copies of it on three nodes at speeds 1 / 0.5 / 0.25: they take turns.
  const auto jf = dir.write("jobs.toml", example_jobs("numpy_elastic", 4, 4000, "", 0.0005));
  const auto sum = run_on_three(dir, jf, "max_min_fairness_perf", "2");
  int moved = 0;
  for (const auto& j : sum["jobs"]) {
    CHECK(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == 4000);
    moved += j["restarts"].get<int>() > 0 ? 1 : 0;
    const auto fin =
        load_json(dir.file("ckpt") + "/job-" + std::to_string(j["id"].get<int>()) + "/final.json");
    CHECK(fin["params_sha256"].get<std::string>() == want);
    CHECK(fin["accuracy"].get<double>() == j["accuracy"].get<double>());
  }
  CHECK(moved > 0);  // at least one job resumed on another node
}

TEST_CASE("(v2) warm NumPy programs that checkpoint every 1000 rounds move without redoing work",
          "[mpi][program][examples][warm]") {
  scratch_dir dir("numpy_cadence");
  const auto want = numpy_alone_sha256(dir, 4000);
  // A process saves only when it is told exit (a move, a preemption) or completes: before a
  // round's orders go out, the scheduler lets the nodes holding unsaved state release the
  // processes that move (settle), so each new process starts from the latest state.
  const auto jf = dir.write("jobs.toml", example_jobs("numpy_elastic", 4, 4000, "", 0.0005,
                                                      "checkpoint_every = \"1000 rounds\"\n"));
  const auto sum = run_on_three(dir, jf, "max_min_fairness_perf", "2");
  int moved = 0;
  for (const auto& j : sum["jobs"]) {
    CHECK(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == 4000);
    CHECK(j["regressions"].get<int>() == 0);  // no process resumed from an older checkpoint
    moved += j["restarts"].get<int>() > 0 ? 1 : 0;
    const auto fin =
        load_json(dir.file("ckpt") + "/job-" + std::to_string(j["id"].get<int>()) + "/final.json");
    CHECK(fin["params_sha256"].get<std::string>() == want);
  }
  CHECK(moved > 0);
}

TEST_CASE("(v3) a move waits for the old process's slow save: no step is made twice",
          "[mpi][program][warm]") {
  scratch_dir dir("slow_save");
  std::ostringstream jobs;
  for (int i = 0; i < 3; ++i)
    jobs << "[[job]]\nkind = \"program\"\ncommand = [\"/usr/bin/python3\", \"slow_save.py\", "
         << "\"2500\", \"1.0\"]\nworkdir = \"" << programs_dir
         << "\"\ntotal_steps = 2500\nstep_time = 0.002\ngrace_seconds = 10\n"
         << "checkpoint_every = \"1000 rounds\"\n\n";
  const auto jf = dir.write("jobs.toml", jobs.str());
  const auto sum = run_on_three(dir, jf, "max_min_fairness_perf", "1.5");
  int moved = 0;
  for (const auto& j : sum["jobs"]) {
    const int id = j["id"].get<int>();
    CHECK(j["finished"].get<bool>());
    CHECK(j["regressions"].get<int>() == 0);
    moved += j["restarts"].get<int>() > 0 ? 1 : 0;
    // Each process began where the one before it ended (it waited for that save).
    std::istringstream ran(
        file_contents(dir.file("ckpt") + "/job-" + std::to_string(id) + "/ran.txt"));
    long long from = 0, to = 0, at = 0;
    int processes = 0;
    while (ran >> from >> to) {
      INFO("job " << id << " process " << processes << ": " << from << " -> " << to);
      CHECK(from == at);
      at = to;
      ++processes;
    }
    CHECK(at == 2500);
  }
  CHECK(moved > 0);
}

TEST_CASE("(w) the PyTorch example, preempted and resumed on other nodes, finishes",
          "[mpi][program][examples]") {
  scratch_dir dir("torch_example");
  const auto jf = dir.write("jobs.toml", example_jobs("pytorch_elastic", 2, 800, "", 0.004));
  std::string out;
  // 1.5 s rounds: on an idle host both jobs finish in about 6 s, which at 3 s rounds was two
  // rounds and sometimes no move at all.
  const auto sum = run_on_three(dir, jf, "max_min_fairness_perf", "1.5", &out);
  int moved = 0;
  for (const auto& j : sum["jobs"]) {
    CHECK(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == 800);
    CHECK(j["accuracy"].get<double>() > 0.8);  // held-out digits after 800 steps
    CHECK(j["startup_seconds"].get<double>() > 0);
    moved += j["restarts"].get<int>() > 0 ? 1 : 0;
  }
  CHECK(moved > 0);
  CHECK(has(out, "\"accuracy\""));  // the program printed its held-out accuracy
}

TEST_CASE("(x) a PyTorch copy of two processes trains with DDP, on one node or spread over two",
          "[mpi][program][examples]") {
  scratch_dir dir("torch_ddp");
  std::string jobs = example_jobs("pytorch_elastic", 1, 300, "", 0.01);
  jobs.insert(jobs.find("total_steps"), "scale_factor = 2\n");
  const auto jf = dir.write("jobs.toml", jobs);
  // Two GPUs of one node (two processes of one node), then one GPU on each of two nodes
  // (hare splits the copy's tasks; the processes meet at MASTER_ADDR:MASTER_PORT).
  const std::string one_node =
      "[cluster]\nname = \"one\"\n[[cluster.server]]\nname = \"a\"\ngpu_type = \"v100\"\n"
      "gpus = 2\nspeed = 1.0\n";
  std::vector<double> losses;
  for (const auto& [cluster, np, policy] :
       {std::tuple<std::string, int, std::string>{one_node, 1, "fifo"},
        {cluster_toml({1.0, 1.0}), 2, "hare"}}) {
    const auto cl = dir.write("cluster" + std::to_string(np) + ".toml", cluster);
    const auto sum_file = dir.file("sum" + std::to_string(np) + ".json");
    auto o =
        run_shell(mpirun(np) + " --cluster " + cl + " --jobs " + jf + " --policy " + policy +
                  " --round-length 3 --checkpoint-dir " + dir.file("ckpt" + std::to_string(np)) +
                  " --json " + sum_file + run_timeout(60));
    INFO(o.out);
    REQUIRE(o.code == 0);
    const auto sum = load_json(sum_file);
    const auto& j = sum["jobs"][0];
    CHECK(j["finished"].get<bool>());
    CHECK(j["steps"].get<int>() == 300);
    losses.push_back(j["loss"].get<double>());
  }
  // DDP averages the two processes' gradients the same way wherever they ran.
  CHECK(losses[0] == losses[1]);
}

TEST_CASE("(y) the C++ example program, preempted and resumed, ends bitwise equal",
          "[mpi][program][examples]") {
  scratch_dir dir("cpp_program");
  const std::string bin = TESSERA_CPP_PROGRAM;
  auto alone = run_shell(bin + " --steps 300000 --checkpoint-dir " + dir.file("alone"));
  INFO(alone.out);
  REQUIRE(alone.code == 0);
  const auto want = last_json_line(alone.out);
  std::ostringstream jobs;
  for (int i = 0; i < 3; ++i)
    jobs << "[[job]]\nkind = \"program\"\ncommand = [\"" << bin
         << "\", \"--steps\", \"300000\"]\ntotal_steps = 300000\nstep_time = 0.000002\n\n";
  const auto jf = dir.write("jobs.toml", jobs.str());
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.25}));
  auto o = run_shell(std::string(TESSERA_BINARY) + " run --local 2 --cluster " + cl + " --jobs " +
                     jf + " --round-length 0.3 --checkpoint-dir " + dir.file("ckpt") + " --json " +
                     dir.file("sum.json") + run_timeout(60));
  INFO(o.out);
  REQUIRE(o.code == 0);
  const auto sum = load_json(dir.file("sum.json"));
  int moved = 0;
  for (const auto& j : sum["jobs"]) {
    CHECK(j["steps"].get<int>() == 300000);
    moved += j["restarts"].get<int>() > 0 ? 1 : 0;
  }
  CHECK(moved > 0);
  // Every job printed the uninterrupted run's numbers, to the last digit.
  std::istringstream lines(o.out);
  std::string line;
  int same = 0;
  while (std::getline(lines, line))
    if (line.rfind("[job ", 0) == 0 && has(line, "weight_error"))
      same += json::parse(line.substr(line.find('{'))) == want ? 1 : 0;
  CHECK(same == 3);
}
