// Sia's workloads and measurements (runtime/workload/sia_workload.hpp) on a small folder in
// Sia's layout written here. The golden numbers are worked by hand from these files in the
// comments beside them; tests/scripts' sia check compares against Sia's own simulator.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "runtime/workload/sia_workload.hpp"
#include "runtime/workload/trace.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// A `traces/bert` folder (Sia trains bert 2 epochs, slowdown 1.2) with two validated batch
/// sizes and placements on 4-GPU "aws" servers: "1", "2", "3", "4" and "24".
struct sia_folder {
  scratch_dir dir{"sia_traces"};
  sia_folder() {
    std::filesystem::create_directories(dir.path() / "traces" / "bert");
    // Epoch progress 100 then 200 at batch 12 (gain 1: the smallest batch), 90 then 210 at
    // 48 (grad_sqr 1, grad_var 3): progress(1) = min(100, 90), progress(2) = min(200, 210).
    dir.write("traces/bert/validation-12.csv",
              "progress,iteration,metric,grad_sqr,grad_var\n100,100,0.1,1,1\n200,200,0.2,1,1\n");
    dir.write("traces/bert/validation-48.csv",
              "progress,iteration,metric,grad_sqr,grad_var\n90,25,0.1,1,3\n210,50,0.2,1,3\n");
    std::string p = "local_bsz,step_time,sync_time,placement\n";
    for (const char* id : {"1", "2", "3", "4", "24"}) {
      const double gpus = id[0] - '0' + (id[1] ? id[1] - '0' : 0);
      p += "4," + std::to_string(0.1 * gpus / 2 + 0.1) + ",0.05," + id + "\n";
      p += "8," + std::to_string(0.1 * gpus / 2 + 0.2) + ",0.06," + id + "\n";
      p += "12," + std::to_string(0.1 * gpus / 2 + 0.3) + ",0.1," + id + "\n";
    }
    dir.write("traces/bert/placements-aws.csv", p);
  }
  std::string root() const { return dir.str(); }
};

sia_data load(const sia_folder& f) {
  auto d = sia_data::load(f.root(), {"aws"});
  INFO((d ? "" : d.err().message));
  REQUIRE(d);
  return *d;
}

}  // namespace

TEST_CASE("sia: steps divide each epoch's progress by the batch's statistical efficiency",
          "[sia][import]") {
  const sia_folder f;
  const auto d = load(f);
  // Batch 12 is the smallest validated: gain 1, steps = progress(2) = 200.
  CHECK(*d.steps("bert", 12) == Approx(200).epsilon(1e-12));
  // Batch 48: scale 4, gain = (3 + 1) / (3 / 4 + 1) = 16 / 7; steps = 200 * 7 / 16.
  CHECK(*d.steps("bert", 48) == Approx(87.5).epsilon(1e-12));
  // Batch 24: a third of the way from 12 to 48, grad_var 5/3, scale 2: gain 16/11.
  CHECK(*d.steps("bert", 24) == Approx(137.5).epsilon(1e-12));
  // Larger batches need fewer steps, never fewer than progress / scale.
  for (int b = 12; b <= 48; ++b) {
    CHECK(*d.steps("bert", b) <= *d.steps("bert", std::max(12, b - 1)) + 1e-9);
    CHECK(*d.steps("bert", b) >= 200.0 * 12 / b - 1e-9);
  }
  auto outside = d.steps("bert", 96);
  REQUIRE_FALSE(outside);
  CHECK_THAT(outside.err().message,
             Catch::Contains("batch size 96 is outside the validated ones (12..48)"));
  CHECK_FALSE(d.steps("gpt_pmp", 12));
}

TEST_CASE("sia: throughput packs the GPUs onto servers and accumulates as Sia's simulator does",
          "[sia][import]") {
  const sia_folder f;
  const auto d = load(f);
  // 4 GPUs at batch 48: per-GPU batch 12, no accumulation; step 0.1*4/2 + 0.3 = 0.5 s;
  // calibrated by 1 / 1.2.
  CHECK(*d.throughput("bert", "aws", 4, 4, 48) == Approx(1 / 1.2 / 0.5).epsilon(1e-9));
  // 4 GPUs at batch 24: per-GPU batch 6, halfway between the rows at 4 and 8.
  CHECK(*d.throughput("bert", "aws", 4, 4, 24) == Approx(1 / 1.2 / 0.35).epsilon(1e-9));
  // 2 GPUs at batch 48: per-GPU 24 is twice the largest profiled (12): one accumulation step
  // at 12, costing step - sync more: 0.4 + (0.4 - 0.1).
  CHECK(*d.throughput("bert", "aws", 4, 2, 48) == Approx(1 / 1.2 / 0.7).epsilon(1e-9));
  // 3 GPUs at batch 40: per-GPU 14 -> accumulation 1 at 7, so Sia runs batch 42, not 40; the
  // rate is scaled so that steps(40) / rate is Sia's time at 42.
  const double t7 = 0.1 * 3 / 2 + 0.1 + 0.75 * 0.1, s7 = 0.05 + 0.75 * 0.01;
  CHECK(
      *d.throughput("bert", "aws", 4, 3, 40) ==
      Approx(1 / 1.2 / (t7 + t7 - s7) * *d.steps("bert", 40) / *d.steps("bert", 42)).epsilon(1e-9));
  // 6 GPUs on 4-GPU servers: placement "24" (the least rotation of 4 then 2).
  CHECK(*d.throughput("bert", "aws", 4, 6, 48) ==
        Approx(1 / 1.2 / (0.1 * 6 / 2 + 0.2)).epsilon(1e-9));
  // 5 GPUs would be "14": never profiled, and said so.
  auto none = d.throughput("bert", "aws", 4, 5, 40);
  REQUIRE_FALSE(none);
  CHECK_THAT(none.err().message, Catch::Contains("bert on aws, placement 14: not profiled"));
  CHECK_FALSE(d.throughput("bert", "rtx", 8, 4, 48));
}

TEST_CASE("sia: a workload's lines become jobs by time, unknown shapes are dropped by reason",
          "[sia][import]") {
  const sia_folder f;
  const auto d = load(f);
  std::istringstream in(
      "name,category,time,application,batch_size,num_replicas\n"
      "bert-0,rigid,300,bert,48,4\n"
      "bert-1,,120.5,bert,24,2\n"
      "gpt-2,,130,gpt_pmp,48,8\n"
      "bert-3,,140,bert,96,4\n");
  import_summary s;
  auto jobs = import_sia_workload(in, "w.csv", d, s);
  REQUIRE(jobs);
  REQUIRE(jobs->size() == 2);
  CHECK(s.read == 4);
  CHECK(s.kept == 2);
  CHECK(s.dropped.at("application not in Sia's data (gpt_pmp)") == 1);
  CHECK(s.dropped.at("batch size outside the validated ones") == 1);
  const auto& a = (*jobs)[0];
  CHECK(a.id == 0);
  CHECK(a.arrival == 120.5);
  CHECK(a.job_type == "bert (batch size 24)");
  CHECK(a.scale_factor == 2);
  CHECK(a.total_steps == 138);  // 137.5 rounded up
  CHECK((*jobs)[1].arrival == 300);
  CHECK((*jobs)[1].total_steps == Approx(87.5).margin(0.5));
  CHECK(parse_sia_job_type(a.job_type) == std::pair<std::string, int>{"bert", 24});
  CHECK_FALSE(parse_sia_job_type("ResNet-18 (batch size x)"));
  CHECK_FALSE(parse_sia_job_type("bert"));
}

TEST_CASE("sia: malformed workloads and folders name the file, line and field", "[sia][import]") {
  const sia_folder f;
  const auto d = load(f);
  import_summary s;
  std::istringstream bad_number(
      "name,time,application,num_replicas,batch_size\nb,1,bert,four,48\n");
  auto r = import_sia_workload(bad_number, "w.csv", d, s);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("w.csv:2: field 'num_replicas': expected a number"));
  std::istringstream no_column("name,time,application,batch_size\nb,1,bert,48\n");
  r = import_sia_workload(no_column, "w.csv", d, s);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("w.csv:1: field 'num_replicas': missing column"));
  std::istringstream fraction("name,time,application,num_replicas,batch_size\nb,1,bert,1.5,48\n");
  r = import_sia_workload(fraction, "w.csv", d, s);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.err().message, Catch::Contains("expected a positive whole number"));

  f.dir.write("traces/bert/placements-aws.csv",
              "local_bsz,step_time,sync_time,placement\n4,x,0,1\n");
  auto broken = sia_data::load(f.root(), {"aws"});
  REQUIRE_FALSE(broken);
  CHECK_THAT(broken.err().message, Catch::Contains("placements-aws.csv:2: field 'step_time'"));
  f.dir.write("traces/bert/validation-48.csv",
              "progress,iteration,metric,grad_sqr,grad_var\n1,1,1,1,1\n");
  auto short_curve = sia_data::load(f.root(), {});
  REQUIRE_FALSE(short_curve);
  CHECK_THAT(short_curve.err().message, Catch::Contains("1 epochs, Sia trains bert for 2"));
  scratch_dir empty("sia_empty");
  CHECK_FALSE(sia_data::load(empty.str(), {}));
}

TEST_CASE("sia: the table covers every job shape on every GPU type and reads back equal",
          "[sia][import]") {
  const sia_folder f;
  const auto d = load(f);
  std::vector<job> jobs = {make_job(0, sia_job_type("bert", 48), 4, 10),
                           make_job(1, sia_job_type("bert", 48), 6, 10),
                           make_job(2, sia_job_type("bert", 40), 5, 10)};
  std::vector<std::string> missing;
  auto t = sia_throughput_table(d, jobs, {{"t4", "aws", 4}, {"a100", "dgx-ext", 8}}, missing);
  REQUIRE(t);
  CHECK(t->job_keys("t4").size() == 2);  // 5 GPUs: placement "14" not profiled
  CHECK(*t->isolated("t4", {sia_job_type("bert", 48), 6}) ==
        *d.throughput("bert", "aws", 4, 6, 48));
  CHECK(missing.size() == 4);  // 1 on t4, 3 on a100 (no dgx-ext data)
  const auto path = temp_file("sia_table.json", t->to_json());
  auto back = throughput_table::load(path);
  REQUIRE(back);
  for (const auto& k : t->job_keys("t4")) CHECK(back->isolated("t4", k) == t->isolated("t4", k));
  auto wrong =
      sia_throughput_table(d, {make_job(0, "ResNet-18", 1, 1)}, {{"t4", "aws", 4}}, missing);
  REQUIRE_FALSE(wrong);
}

TEST_CASE("cli: table import sia and trace import sia, then simulate on Sia's kind of cluster",
          "[cli][sia]") {
  const sia_folder f;
  const std::string cluster = f.dir.write(
      "cluster.toml",
      "[cluster]\nname = \"t4s\"\n[[cluster.server]]\nname = \"a\"\ngpu_type = \"t4\"\ngpus = 4\n"
      "[[cluster.server]]\nname = \"b\"\ngpu_type = \"t4\"\ngpus = 4\n");
  std::string w = "name,time,application,num_replicas,batch_size\n";
  for (int i = 0; i < 6; ++i)
    w += "bert-" + std::to_string(i) + "," + std::to_string(60 * i) + ",bert," +
         (i % 2 ? "4,48\n" : "2,24\n");
  w += "gpt-6,400,gpt_pmp,8,48\n";
  const std::string workload = f.dir.write("workload.csv", w);
  const std::string table = f.dir.file("table.json"), trace = f.dir.file("w.trace");
  const std::string restarts = f.dir.file("restarts.csv");
  auto t =
      run_tessera("table import sia --sia-dir " + f.root() + " --cluster " + cluster +
                  " --workload " + workload + " -o " + table + " --restart-costs-out " + restarts);
  INFO(t.out);
  REQUIRE(t.code == 0);
  CHECK_THAT(t.out, Catch::Contains("wrote 2 entries (1 GPU types) to " + table));
  auto i = run_tessera("trace import sia " + workload + " --sia-dir " + f.root() + " -o " + trace);
  INFO(i.out);
  REQUIRE(i.code == 0);
  CHECK_THAT(i.out, Catch::Contains("read 7 jobs, wrote 6 to " + trace +
                                    "; dropped: 1 application not in Sia's data (gpt_pmp)"));
  // Sia's bert restarts in 120 s (its applications.py): one line per job type.
  CHECK(file_contents(restarts) ==
        "job_type,seconds\n\"bert (batch size 24)\",120\n\"bert (batch size 48)\",120\n");
  auto s =
      run_tessera("simulate -q --trace " + trace + " --cluster " + cluster + " --throughputs " +
                  table + " --policy sia --round-length 60 " + "--restart-costs " + restarts);
  INFO(s.out);
  CHECK(s.code == 0);
  CHECK_THAT(s.out, Catch::Contains("6/6"));
  const std::string bad = f.dir.write("bad.csv", "job_type,seconds\nbert,-3\n");
  auto b = run_tessera("simulate -q --trace " + trace + " --cluster " + cluster +
                       " --throughputs " + table + " --restart-costs " + bad);
  CHECK(b.code == 2);
  CHECK_THAT(b.out, Catch::Contains(bad + ":2: field 'seconds': expected a number in [0, 86400]"));
  auto no_dir = run_tessera("trace import sia " + workload + " -o " + trace);
  CHECK(no_dir.code == 2);
  CHECK_THAT(no_dir.out, Catch::Contains("sia needs --sia-dir"));
  auto no_kind =
      run_tessera("table import sia --sia-dir " + f.root() + " --cluster " +
                  config_file("small_cluster.toml") + " --workload " + workload + " -o " + table);
  CHECK(no_kind.code == 2);
  CHECK_THAT(no_kind.out,
             Catch::Contains("GPU type 'p100' has no Sia kind (give --kind p100=KIND)"));
  CHECK(run_tessera("table --help").code == 0);
}
