// Production-derived traces read into tessera's job model (runtime/workload/trace_import.hpp):
// small files in each format, written here, with every rule of the import and its errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <tuple>
#include <sstream>

#include "runtime/workload/trace.hpp"
#include "runtime/workload/trace_import.hpp"
#include "tests/support.hpp"

using namespace tessera;

namespace {

const throughput_table& table() {
  static const throughput_table t = *throughput_table::load_bundled();
  return t;
}

const std::vector<job_template>& templates() {
  static const std::vector<job_template> t = *bundled_job_templates();
  return t;
}

result<std::vector<job>> import_text(trace_format f, const std::string& text, import_summary& s,
                                     std::uint64_t seed = 0) {
  std::istringstream in(text);
  import_options o;
  o.seed = seed;
  return import_trace(f, in, "t.log", templates(), table(), o, s);
}

const char* helios_header =
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    "duration,queue\n";

/// A Helios line: job `id` with `gpus` GPUs in `state`, submitted at `submit`, run `run` s.
std::string helios_line(int id, int gpus, const std::string& state, const std::string& submit,
                        int run) {
  return std::to_string(id) + ",u,vc,\"name, with a comma\"," + std::to_string(gpus) + ",4,1," +
         state + "," + submit + ",,," + std::to_string(run) + ",0\n";
}

/// Every imported job keeps the rule: a known type at its scale, steps = run x throughput.
void check_rule(const std::vector<job>& jobs, const std::vector<double>& runs) {
  REQUIRE(jobs.size() == runs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    INFO("job " << i);
    CHECK(jobs[i].id == static_cast<job_id>(i));
    const auto tput = table().isolated("v100", job_key{jobs[i].job_type, jobs[i].scale_factor});
    REQUIRE(tput);
    CHECK(jobs[i].total_steps == std::max(1.0, std::ceil(runs[i] * *tput)));
    if (i > 0) CHECK(jobs[i].arrival >= jobs[i - 1].arrival);
  }
}

}  // namespace

TEST_CASE("helios: completed GPU jobs are imported by the rule, the rest dropped by reason",
          "[trace][import]") {
  const std::string text = std::string(helios_header) +
                           helios_line(1, 1, "COMPLETED", "2020-04-01 00:00:10", 600) +
                           helios_line(2, 3, "COMPLETED", "2020-04-01 00:00:00", 120) +
                           helios_line(3, 0, "COMPLETED", "2020-04-01 00:01:00", 60) +
                           helios_line(4, 1, "FAILED", "2020-04-01 00:02:00", 60) +
                           helios_line(5, 1, "CANCELLED", "2020-04-01 00:02:00", 60) +
                           helios_line(6, 4096, "COMPLETED", "2020-04-01 00:03:00", 60) +
                           helios_line(7, 2, "COMPLETED", "2020-04-01 00:04:00", 0) + "\n";
  import_summary s;
  auto jobs = import_text(trace_format::helios, text, s);
  REQUIRE(jobs);
  CHECK(s.read == 7);
  CHECK(s.kept == 2);
  CHECK(s.dropped == std::map<std::string, std::size_t>{{"state FAILED", 1},
                                                        {"state CANCELLED", 1},
                                                        {"no GPU", 1},
                                                        {"no run time", 1},
                                                        {"more GPUs than any table scale (8)", 1}});
  check_rule(*jobs, {120, 600});        // sorted by submit time: job 2 first
  CHECK((*jobs)[0].scale_factor == 4);  // 3 GPUs: the next scale the table knows
  CHECK((*jobs)[0].arrival == 0);
  CHECK((*jobs)[1].arrival == 10);
  CHECK((*jobs)[1].scale_factor == 1);
}

TEST_CASE("helios: the same seed draws the same types, and the output reads back as a trace",
          "[trace][import]") {
  std::string text = helios_header;
  for (int i = 0; i < 200; ++i)
    text += helios_line(i, 1 << (i % 4), "COMPLETED", std::to_string(1000 + 7 * i), 60 + i);
  import_summary a, b, c;
  auto x = import_text(trace_format::helios, text, a, 1);
  auto y = import_text(trace_format::helios, text, b, 1);
  auto z = import_text(trace_format::helios, text, c, 2);
  REQUIRE(x);
  REQUIRE(y);
  REQUIRE(z);
  std::set<std::string> types;
  bool differs = false;
  for (std::size_t i = 0; i < x->size(); ++i) {
    CHECK((*x)[i].job_type == (*y)[i].job_type);
    differs = differs || (*x)[i].job_type != (*z)[i].job_type;
    types.insert((*x)[i].job_type);
  }
  CHECK(differs);
  CHECK(types.size() > 5);  // a draw over the templates, not one type
  tessera::test::scratch_dir dir("trace_import");
  const auto path = dir.file("out.trace");
  REQUIRE(write_trace_file(path, *x));
  auto back = read_trace(path, &table());
  REQUIRE(back);
  REQUIRE(back->size() == x->size());
  for (std::size_t i = 0; i < x->size(); ++i) {
    CHECK((*back)[i].total_steps == (*x)[i].total_steps);
    CHECK((*back)[i].arrival == Approx((*x)[i].arrival));
  }
}

TEST_CASE("helios: a malformed field or a missing column names the file, line and field",
          "[trace][import]") {
  import_summary s;
  auto bad_number = import_text(trace_format::helios,
                                std::string(helios_header) +
                                    helios_line(1, 1, "COMPLETED", "2020-04-01 00:00:10", 60) +
                                    "2,u,vc,n,x,4,1,COMPLETED,2020-04-01 00:00:10,,,60,0\n",
                                s);
  REQUIRE_FALSE(bad_number);
  CHECK(bad_number.err().message == "t.log:3: field 'gpu_num': expected a number, got 'x'");
  auto bad_time =
      import_text(trace_format::helios,
                  std::string(helios_header) + "1,u,vc,n,1,4,1,COMPLETED,April 1st,,,60,0\n", s);
  REQUIRE_FALSE(bad_time);
  CHECK_THAT(bad_time.err().message, Catch::StartsWith("t.log:2: field 'submit_time': expected"));
  auto no_column = import_text(trace_format::helios, "job_id,state,submit_time,duration\n", s);
  REQUIRE_FALSE(no_column);
  CHECK(no_column.err().message == "t.log:1: field 'gpu_num': no such column in the header");
  auto short_line = import_text(trace_format::helios, std::string(helios_header) + "1,u,vc\n", s);
  REQUIRE_FALSE(short_line);
  CHECK_THAT(short_line.err().message, Catch::StartsWith("t.log:2: expected at least 12 fields"));
}

TEST_CASE("philly: jobs that ran are imported with their last attempt's GPUs and time",
          "[trace][import]") {
  const std::string text = R"([
    {"jobid": "a", "status": "Pass", "submitted_time": "2017-10-03 01:00:00",
     "attempts": [{"start_time": "2017-10-03 01:00:05", "end_time": "2017-10-03 01:01:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0"]}]},
                  {"start_time": "2017-10-03 02:00:00", "end_time": "2017-10-03 02:10:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]},
    {"jobid": "b", "status": "Killed", "submitted_time": "2017-10-03 00:59:00",
     "attempts": [{"start_time": "2017-10-03 01:00:00", "end_time": "2017-10-03 01:05:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]},
                              {"ip": "m2", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
    {"jobid": "c", "status": "Failed", "submitted_time": "2017-10-03 01:00:00",
     "attempts": []},
    {"jobid": "d", "status": "Pass", "submitted_time": "2017-10-03 01:00:00", "attempts": []},
    {"jobid": "e", "status": "Pass", "submitted_time": "2017-10-03 01:00:00",
     "attempts": [{"start_time": "2017-10-03 01:00:00", "end_time": null,
                   "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}
  ])";
  import_summary s;
  auto jobs = import_text(trace_format::philly, text, s);
  REQUIRE(jobs);
  CHECK(s.read == 5);
  CHECK(s.kept == 2);
  CHECK(s.dropped == std::map<std::string, std::size_t>{
                         {"status Failed", 1}, {"never ran", 1}, {"no run time", 1}});
  check_rule(*jobs, {300, 600});
  CHECK((*jobs)[0].scale_factor == 8);  // b: 4 + 4 GPUs on two hosts
  CHECK((*jobs)[1].scale_factor == 2);  // a: its last attempt's 2 GPUs
  CHECK((*jobs)[1].arrival == 60);
}

TEST_CASE("philly: a malformed job names its index and field", "[trace][import]") {
  import_summary s;
  auto bad = import_text(trace_format::philly,
                         R"([{"status": "Pass", "submitted_time": "2017-10-03 01:00:00",
                              "attempts": []},
                             {"status": "Pass", "submitted_time": "yesterday", "attempts": []}])",
                         s);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::StartsWith("t.log, job[1]: field 'submitted_time'"));
  auto not_json = import_text(trace_format::philly, "[{", s);
  REQUIRE_FALSE(not_json);
  CHECK_THAT(not_json.err().message, Catch::StartsWith("t.log: malformed JSON"));
  CHECK_FALSE(parse_trace_format("alibaba"));
  CHECK_THAT(parse_trace_format("alibaba").err().message, Catch::Contains("helios, philly, pai"));
}

TEST_CASE("pai: terminated jobs with their tasks' GPUs, converted on their own GPU type",
          "[trace][import]") {
  // job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
  std::istringstream tasks(
      "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,"
      "gpu_type\n"
      "j1,worker,2,Terminated,100,400,600,29,100,V100\n"
      "j1,ps,1,Terminated,100,400,600,29,,\n"
      "j2,worker,1,Terminated,50,150,600,29,50,P100\n"
      "j3,worker,1,Terminated,60,70,600,29,,\n"
      "j4,worker,1,Failed,60,70,600,29,100,T4\n"
      "j5,worker,3,Terminated,80,180,600,29,100,MISC\n");
  const std::string jobs =
      "j1,i1,u,Terminated,100,400\n"
      "j2,i2,u,Terminated,50,150\n"
      "j3,i3,u,Terminated,60,70\n"
      "j4,i4,u,Failed,60,70\n"
      "j5,i5,u,Terminated,80,180\n"
      "j6,i6,u,Running,90,\n";
  std::istringstream in(jobs);
  import_options o;
  o.tasks = &tasks;
  o.tasks_name = "tasks.csv";
  import_summary s;
  auto out = import_trace(trace_format::pai, in, "jobs.csv", templates(), table(), o, s);
  REQUIRE(out);
  CHECK(s.read == 6);
  CHECK(s.kept == 3);
  CHECK(s.dropped == std::map<std::string, std::size_t>{
                         {"no GPU", 1}, {"status Failed", 1}, {"status Running", 1}});
  REQUIRE(out->size() == 3);
  const auto& [j2, j5, j1] = std::tie((*out)[0], (*out)[1], (*out)[2]);  // by start time
  CHECK(j2.scale_factor == 1);  // half a GPU rounds up to one
  CHECK(j2.total_steps ==
        std::ceil(100 * *table().isolated("p100", job_key{j2.job_type, 1})));  // its own type
  CHECK(j5.scale_factor == 4);  // 3 GPUs; MISC is no table type: the reference's throughput
  CHECK(j5.total_steps == std::ceil(100 * *table().isolated("v100", job_key{j5.job_type, 4})));
  CHECK(j1.scale_factor == 2);  // 2 instances x 1 GPU, the ps task none
  CHECK(j1.arrival == 50);
  std::istringstream again(jobs);
  import_options none;
  auto missing = import_trace(trace_format::pai, again, "jobs.csv", templates(), table(), none, s);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.err().message, Catch::Contains("--tasks"));
}

TEST_CASE("trace times: the timestamp form is UTC, and seconds pass through", "[trace][import]") {
  auto day = parse_trace_time("1970-01-02 00:00:00");
  REQUIRE(day);
  CHECK(*day == 86400);
  auto philly = parse_trace_time("2017-10-03 01:12:56");  // date -u -d ... +%s
  REQUIRE(philly);
  CHECK(*philly == 1506993176);
  CHECK(*parse_trace_time("12.5") == 12.5);
  CHECK_FALSE(parse_trace_time("2017-10-03"));
  CHECK_FALSE(parse_trace_time("2017-13-03 00:00:00"));
  CHECK_FALSE(parse_trace_time("-3"));
  CHECK(*parse_trace_time("1007") == 1007);  // seconds, not the year 1007
}
