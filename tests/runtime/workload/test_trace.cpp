// Tests of Gavel's trace format reader and writer (runtime/workload/trace.cpp).
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/workload/trace.hpp"
#include "tests/support.hpp"

using namespace tessera;
using tessera::test::file_contents;
using tessera::test::temp_file;

namespace {

const char* const bundled_traces[] = {"artifact_evaluation", "max_min_fairness", "medium_test",
                                      "minimize_makespan", "small_test"};

std::string bundled_trace(const std::string& name) {
  return std::string(TESSERA_DATA_DIR) + "/gavel/traces/" + name + ".trace";
}

const throughput_table& table() {
  static const throughput_table t = *throughput_table::load_bundled();
  return t;
}

/// Every field of two jobs is equal.
void check_same(const job& a, const job& b) {
  CHECK(a.id == b.id);
  CHECK(a.job_type == b.job_type);
  CHECK(a.scale_factor == b.scale_factor);
  CHECK(a.total_steps == b.total_steps);
  CHECK(a.arrival == b.arrival);
  CHECK(a.priority_weight == b.priority_weight);
  CHECK(a.slo == b.slo);
  CHECK(a.command == b.command);
  CHECK(a.working_dir == b.working_dir);
  CHECK(a.num_steps_arg == b.num_steps_arg);
  CHECK(a.needs_data_dir == b.needs_data_dir);
}

void check_same(const std::vector<job>& a, const std::vector<job>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i]);
}

std::vector<job> round_trip(const std::vector<job>& jobs) {
  std::stringstream ss;
  write_trace(ss, jobs);
  auto back = parse_trace(ss, "round-trip");
  REQUIRE(back);
  return *back;
}

/// A good trace line with field `field` (0-based) replaced by `value`.
std::string line_with(std::size_t field, const std::string& value) {
  std::vector<std::string> f = {"ResNet-18 (batch size 64)",
                                "python3 main.py --data_dir=%s/cifar10 --batch_size 64",
                                "image_classification/cifar10",
                                "--num_steps",
                                "1",
                                "1000",
                                "2",
                                "1",
                                "-1.000000",
                                "0.000000"};
  f[field] = value;
  std::string s;
  for (std::size_t i = 0; i < f.size(); ++i) s += (i ? "\t" : "") + f[i];
  return s;
}

/// Parses a trace whose 4th line is `bad` (after a comment, a good line and a blank line)
/// and returns the error message; fails the test when parsing succeeds.
std::string error_for(const std::string& bad, const throughput_table* t = nullptr) {
  std::stringstream ss;
  ss << "# header comment\n" << line_with(0, "ResNet-18 (batch size 64)") << "\n\n" << bad << "\n";
  auto r = parse_trace(ss, "bad.trace", t);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::invalid_input);
  return r.err().message;
}

/// The message names file, line 4 and the field.
void check_names(const std::string& msg, const std::string& field) {
  INFO(msg);
  CHECK(msg.rfind("bad.trace:4: field '" + field + "': ", 0) == 0);
}

}  // namespace

TEST_CASE("bundled Gavel traces parse, and their job types are in the table", "[io]") {
  for (const char* name : bundled_traces) {
    INFO(name);
    auto r = read_trace(bundled_trace(name), &table());
    REQUIRE(r);
    REQUIRE_FALSE(r->empty());
    for (std::size_t i = 0; i < r->size(); ++i) CHECK((*r)[i].id == static_cast<job_id>(i));
  }
  // Spot checks of the first line of small_test.trace (read with `head -1 | cat -A`).
  auto r = read_trace(bundled_trace("small_test"));
  REQUIRE(r);
  CHECK(r->size() == 20);
  const job& j = r->front();
  CHECK(j.job_type == "Transformer (batch size 128)");
  CHECK(j.command ==
        "python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size 128 "
        "-proj_share_weight");
  CHECK(j.working_dir == "translation");
  CHECK(j.num_steps_arg == "-step");
  CHECK(j.needs_data_dir);
  CHECK(j.total_steps == 346);
  CHECK(j.scale_factor == 2);
  CHECK(j.priority_weight == 1);
  CHECK(j.slo == -1);
  CHECK(j.arrival == 0);
}

TEST_CASE("writing a bundled trace reproduces Gavel's text, arrival with 6 decimals", "[io]") {
  for (const char* name : bundled_traces) {
    INFO(name);
    const std::string path = bundled_trace(name);
    auto r = read_trace(path);
    REQUIRE(r);
    std::stringstream out;
    write_trace(out, *r);
    // Gavel's bundled files write the arrival as an integer ("0", "11195"); ours has 6
    // decimals. Everything else must match byte for byte.
    std::stringstream expected;
    std::istringstream in(file_contents(path));
    std::string line;
    while (std::getline(in, line)) {
      const auto tab = line.rfind('\t');
      expected << line.substr(0, tab + 1) << line.substr(tab + 1) << ".000000\n";
    }
    CHECK(out.str() == expected.str());
    check_same(round_trip(*r), *r);
  }
}

TEST_CASE("trace round trip keeps every field, including awkward values", "[io]") {
  auto r = read_trace(std::string(TESSERA_TEST_DATA_DIR) + "/io/tiny.trace", &table());
  REQUIRE(r);
  REQUIRE(r->size() == 3);
  CHECK((*r)[1].job_type == "A3C");
  CHECK_FALSE((*r)[1].needs_data_dir);
  CHECK((*r)[1].priority_weight == 2.5);
  CHECK((*r)[1].slo == 7200);
  CHECK((*r)[1].arrival == 12.5);
  check_same(round_trip(*r), *r);

  std::vector<job> jobs = *r;
  jobs[0].total_steps = 1234.75;       // fractional steps
  jobs[0].arrival = 1234.56789012345;  // more than 6 decimals
  jobs[1].slo = 0.1;                   // not exact in binary
  jobs[2].priority_weight = 1.0 / 3.0;
  jobs[2].arrival = 1e7 + 0.25;
  check_same(round_trip(jobs), jobs);

  std::stringstream ss;
  write_trace(ss, jobs);
  CHECK(ss.str().find("\t-1.000000\t") != std::string::npos);  // SLO none as Gavel writes it
}

TEST_CASE("trace files: write then read, and refusal of unwritable fields", "[io]") {
  auto r = read_trace(bundled_trace("medium_test"));
  REQUIRE(r);
  const auto path = temp_file("written.trace", "");
  REQUIRE(write_trace_file(path, *r));
  auto back = read_trace(path);
  REQUIRE(back);
  check_same(*back, *r);

  auto jobs = *r;
  jobs[3].command = "python3\tmain.py";
  auto s = write_trace_file(path, jobs);
  REQUIRE_FALSE(s);
  CHECK(s.err().message.find("job 3: field 'command'") != std::string::npos);

  auto missing = read_trace("/nonexistent/x.trace");
  REQUIRE_FALSE(missing);
  CHECK(missing.err().kind == error_kind::io);
  CHECK(missing.err().message.find("/nonexistent/x.trace") != std::string::npos);
}

TEST_CASE("bad trace: too few fields", "[io]") {
  const std::string full = line_with(0, "ResNet-18 (batch size 64)");
  const std::string seven = full.substr(0, full.find("\t2\t1\t-1"));  // 6 fields
  const auto msg = error_for(seven + "\t2");
  check_names(msg, "priority_weight");
  CHECK(msg.find("found 7") != std::string::npos);
}

TEST_CASE("bad trace: too many fields", "[io]") {
  const auto msg = error_for(line_with(0, "A3C") + "\textra");
  check_names(msg, "arrival_time");
  CHECK(msg.find("found 11") != std::string::npos);
}

TEST_CASE("bad trace: space-separated line", "[io]") {
  const auto msg = error_for("A3C cmd rl --max-steps 0 100 1 1 -1 0");
  check_names(msg, "command");
  CHECK(msg.find("found 1") != std::string::npos);
}

TEST_CASE("bad trace: non-numeric total_steps", "[io]") {
  const auto msg = error_for(line_with(5, "lots"));
  check_names(msg, "total_steps");
  CHECK(msg.find("'lots'") != std::string::npos);
}

TEST_CASE("bad trace: negative total_steps", "[io]") {
  check_names(error_for(line_with(5, "-5")), "total_steps");
}

TEST_CASE("bad trace: zero total_steps", "[io]") {
  check_names(error_for(line_with(5, "0")), "total_steps");
}

TEST_CASE("bad trace: scale_factor zero", "[io]") {
  const auto msg = error_for(line_with(6, "0"));
  check_names(msg, "scale_factor");
  CHECK(msg.find("positive integer") != std::string::npos);
}

TEST_CASE("bad trace: scale_factor not an integer", "[io]") {
  check_names(error_for(line_with(6, "2.5")), "scale_factor");
}

TEST_CASE("bad trace: priority weight not positive", "[io]") {
  check_names(error_for(line_with(7, "0")), "priority_weight");
  check_names(error_for(line_with(7, "-1")), "priority_weight");
}

TEST_CASE("bad trace: negative arrival", "[io]") {
  const auto msg = error_for(line_with(9, "-3.000000"));
  check_names(msg, "arrival_time");
  CHECK(msg.find("'-3.000000'") != std::string::npos);
}

TEST_CASE("bad trace: needs_data_dir not 0/1", "[io]") {
  check_names(error_for(line_with(4, "yes")), "needs_data_dir");
  check_names(error_for(line_with(4, "2")), "needs_data_dir");
}

TEST_CASE("bad trace: SLO neither -1 nor positive", "[io]") {
  check_names(error_for(line_with(8, "0")), "slo");
}

TEST_CASE("bad trace: empty job type", "[io]") {
  check_names(error_for(line_with(0, "")), "job_type");
}

TEST_CASE("bad trace: unknown job type when a table is given", "[io]") {
  const auto msg = error_for(line_with(0, "GPT-3 (batch size 1)"), &table());
  check_names(msg, "job_type");
  CHECK(msg.find("unknown job type 'GPT-3 (batch size 1)' at scale 2") != std::string::npos);
  // Known type at a scale the table lacks: A3C only has scale 1.
  const auto msg2 = error_for(line_with(0, "A3C"), &table());
  CHECK(msg2.find("unknown job type 'A3C' at scale 2") != std::string::npos);
  // Without a table the same line is fine.
  std::stringstream ss(line_with(0, "GPT-3 (batch size 1)") + "\n");
  CHECK(parse_trace(ss, "x"));
}
