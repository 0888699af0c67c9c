// A cluster from a Slurm allocation (runtime/core/slurm_cluster.hpp): host lists, task
// counts and GRES lines as Slurm 22.05 writes them (the scontrol text below follows the
// layout of `scontrol show job -d` on that version), checked without a Slurm; and the
// `tessera cluster from-slurm` command on such an environment.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>

#include "runtime/core/cluster_config.hpp"
#include "runtime/core/slurm_cluster.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

using strings = std::vector<std::string>;

std::function<std::optional<std::string>(const std::string&)> env_of(
    std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const char* scontrol_text =
    "JobId=42 JobName=train\n"
    "   UserId=ada(1000) GroupId=ada(1000) MCS_label=N/A\n"
    "   NodeList=gpu[01-02],t4-a\n"
    "   JOB_GRES=gpu:a100:8,gpu:t4:2\n"
    "     Nodes=gpu[01-02] CPU_IDs=0-15 Mem=64000 GRES=gpu:a100:4(IDX:0-3)\n"
    "     Nodes=t4-a CPU_IDs=0-3 Mem=16000 GRES=gpu:t4:2(IDX:0-1)\n"
    "   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0\n";

}  // namespace

TEST_CASE("slurm host lists expand as Slurm writes them", "[slurm]") {
  CHECK(*expand_hostlist("n1") == strings{"n1"});
  CHECK(*expand_hostlist("n[1-3]") == strings{"n1", "n2", "n3"});
  CHECK(*expand_hostlist("gpu[01-03,7],cpu-a") ==
        strings{"gpu01", "gpu02", "gpu03", "gpu7", "cpu-a"});
  CHECK(*expand_hostlist("r[1-2]n[1-2]-ib") == strings{"r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"});
  CHECK(*expand_hostlist("node[098-101]") == strings{"node098", "node099", "node100", "node101"});
  for (const char* bad : {"", "n[1-3", "n[3-1]", "n[a-b]", "a,,b", "n[1-999999]"}) {
    INFO(bad);
    auto r = expand_hostlist(bad);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.err().message, Catch::Contains("host list"));
  }
}

TEST_CASE("slurm host lists: a compressed list expands to every host it stands for",
          "[slurm][property]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    // Random prefixes with random disjoint ranges; the expansion is checked against a
    // direct enumeration.
    std::string list;
    strings expect;
    const int groups = 1 + static_cast<int>(rng() % 3);
    for (int g = 0; g < groups; ++g) {
      const std::string prefix = "p" + std::to_string(g) + "x";
      int at = static_cast<int>(rng() % 5);
      std::string body;
      const int ranges = 1 + static_cast<int>(rng() % 3);
      for (int r = 0; r < ranges; ++r) {
        const int len = static_cast<int>(rng() % 4);
        body += (body.empty() ? "" : ",") + std::to_string(at) +
                (len ? "-" + std::to_string(at + len) : "");
        for (int k = at; k <= at + len; ++k) expect.push_back(prefix + std::to_string(k));
        at += len + 2;
      }
      list += (list.empty() ? "" : ",") + prefix + "[" + body + "]";
    }
    INFO(list);
    auto got = expand_hostlist(list);
    REQUIRE(got);
    CHECK(*got == expect);
  }
}

TEST_CASE("slurm task counts per node expand, and must cover the nodes", "[slurm]") {
  CHECK(*expand_tasks_per_node("2(x3),1", 4) == std::vector<int>{2, 2, 2, 1});
  CHECK(*expand_tasks_per_node("1", 1) == std::vector<int>{1});
  CHECK_FALSE(expand_tasks_per_node("1(x2)", 3));
  CHECK_FALSE(expand_tasks_per_node("two", 1));
}

TEST_CASE("slurm GRES lines give each node its GPU type and count", "[slurm]") {
  auto g = parse_job_gres(scontrol_text);
  REQUIRE(g);
  REQUIRE(g->size() == 3);
  CHECK(g->at("gpu01").type == "a100");
  CHECK(g->at("gpu02").count == 4);
  CHECK(g->at("t4-a").type == "t4");
  CHECK(g->at("t4-a").count == 2);
  auto untyped = parse_job_gres("     Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:0-1)\n");
  REQUIRE(untyped);
  CHECK(untyped->at("n1").type.empty());
  CHECK(untyped->at("n1").count == 2);
  auto cnt = parse_job_gres("     Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:v100(CNT:3)\n");
  REQUIRE(cnt);
  CHECK(cnt->at("n2").type == "v100");
  CHECK(cnt->at("n2").count == 3);
  auto none = parse_job_gres("     Nodes=n1 CPU_IDs=0 Mem=0 GRES=\n");
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE(
    "a slurm allocation: GPUs from the grant, else the defaults, else an error naming the fix",
    "[slurm]") {
  const auto env =
      env_of({{"SLURM_JOB_NODELIST", "gpu[01-02],t4-a"}, {"SLURM_TASKS_PER_NODE", "1(x3)"}});
  auto a = read_slurm_allocation(env, scontrol_text, {});
  REQUIRE(a);
  CHECK(a->nodes == strings{"gpu01", "gpu02", "t4-a"});
  CHECK(a->gpus[0].type == "a100");
  CHECK(a->gpus[2].count == 2);
  // A CPU partition: no grant, so the operator's defaults, or an error naming them.
  const auto cpu = env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}});
  auto bare = read_slurm_allocation(cpu, "", {});
  REQUIRE_FALSE(bare);
  CHECK_THAT(bare.err().message, Catch::Contains("node n1") && Catch::Contains("--gpus N"));
  auto typeless = read_slurm_allocation(cpu, "", {"", 1});
  REQUIRE_FALSE(typeless);
  CHECK_THAT(typeless.err().message, Catch::Contains("--gpu-type"));
  auto given = read_slurm_allocation(cpu, "", {"k80", 2});
  REQUIRE(given);
  CHECK(given->gpus[1].type == "k80");
  CHECK(given->gpus[1].count == 2);
  auto outside = read_slurm_allocation(env_of({}), "", {"k80", 1});
  REQUIRE_FALSE(outside);
  CHECK_THAT(outside.err().message, Catch::Contains("SLURM_JOB_NODELIST"));
}

TEST_CASE("a slurm cluster file reads back as a cluster, speeds from the table", "[slurm]") {
  auto table = throughput_table::load_bundled();
  REQUIRE(table);
  CHECK(*type_speed(*table, "v100", "v100") == Approx(1.0));
  const double k80 = *type_speed(*table, "k80", "v100");
  CHECK(k80 > 0.05);
  CHECK(k80 < 1.0);  // Gavel's table: a K80 is slower than a V100 on every job type
  CHECK_FALSE(type_speed(*table, "a100", "v100"));
  slurm_allocation a{{"n1", "n2"}, {1, 1}, {{"v100", 4}, {"a100", 8}}};
  tessera::test::scratch_dir dir("slurm_cluster");
  const auto path = dir.write("cluster.toml", slurm_cluster_toml(a, *table, "v100"));
  auto cl = load_cluster(path);
  REQUIRE(cl);
  REQUIRE(cl->servers.size() == 2);
  CHECK(cl->servers[0].name == "n1");
  CHECK(cl->servers[1].gpus == 8);
  CHECK(cl->servers[1].speed == Approx(1.0));  // unknown to the table: 1, and a comment says so
}

TEST_CASE("tessera cluster from-slurm writes the allocation's cluster file", "[slurm][cli]") {
  tessera::test::scratch_dir dir("slurm_cli");
  const auto sc = dir.write("scontrol.txt", scontrol_text);
  const auto out = dir.file("cluster.toml");
  auto r = tessera::test::run_shell(
      "SLURM_JOB_NODELIST='gpu[01-02],t4-a' SLURM_TASKS_PER_NODE='1(x3)' " +
      tessera::test::tessera_binary() + " cluster from-slurm --scontrol " + sc + " -o " + out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto cl = load_cluster(out);
  REQUIRE(cl);
  CHECK(cl->servers.size() == 3);
  CHECK(cl->servers[2].gpu_type == "t4");
  auto outside =
      tessera::test::run_shell("env -u SLURM_JOB_NODELIST " + tessera::test::tessera_binary() +
                               " cluster from-slurm --gpus 1 --gpu-type k80");
  CHECK(outside.code == 2);
  CHECK_THAT(outside.out, Catch::Contains("SLURM_JOB_NODELIST is not set"));
  CHECK(tessera::test::run_tessera("cluster --help").code == 0);
}

TEST_CASE("srun without a PMI plugin: the step's tasks are refused, naming the fix", "[slurm]") {
  CHECK(slurm_step_problem(env_of({}), false).empty());
  CHECK(slurm_step_problem(env_of({{"SLURM_STEP_NUM_TASKS", "1"}}), false).empty());
  CHECK(slurm_step_problem(env_of({{"SLURM_STEP_NUM_TASKS", "3"}}), true).empty());
  const auto why = slurm_step_problem(env_of({{"SLURM_STEP_NUM_TASKS", "3"}}), false);
  CHECK_THAT(why, Catch::Contains("3 tasks") && Catch::Contains("srun --mpi=pmix"));
  // The command: one message from task 0, none from the others, exit 2 from every one.
  auto first = tessera::test::run_shell(
      "env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE SLURM_STEP_NUM_TASKS=3 "
      "SLURM_PROCID=0 " +
      tessera::test::tessera_binary() + " run --cluster x.toml --jobs y.toml");
  CHECK(first.code == 2);
  CHECK_THAT(first.out, Catch::Contains("srun --mpi=pmix"));
  auto other = tessera::test::run_shell(
      "env -u OMPI_COMM_WORLD_SIZE -u PMIX_RANK -u PMI_SIZE SLURM_STEP_NUM_TASKS=3 "
      "SLURM_PROCID=2 " +
      tessera::test::tessera_binary() + " run --cluster x.toml --jobs y.toml");
  CHECK(other.code == 2);
  CHECK(other.out.empty());
}

TEST_CASE("spare servers for nodes that join later: parsed, refused when malformed or taken",
          "[slurm]") {
  slurm_allocation a{{"n1"}, {1}, {{"v100", 1}}};
  REQUIRE(add_spare(a, "n4:A100:4"));
  CHECK(a.nodes == strings{"n1", "n4"});
  CHECK(a.gpus[1].type == "a100");
  CHECK(a.gpus[1].count == 4);
  CHECK(a.spare == 1);
  for (const char* bad : {"n5", "n5:a100", "n5:a100:0", "n5:a100:x", "n1:v100:1", ":v100:1"}) {
    INFO(bad);
    auto st = add_spare(a, bad);
    REQUIRE_FALSE(st);
    CHECK_THAT(st.err().message, Catch::Contains(bad));
  }
  auto table = throughput_table::load_bundled();
  REQUIRE(table);
  const auto text = slurm_cluster_toml(a, *table, "v100");
  CHECK_THAT(text, Catch::Contains("name = \"n4\"") &&
                       Catch::Contains("not in the allocation: a node joins as it"));
}
