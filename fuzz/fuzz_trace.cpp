// libFuzzer target: Gavel trace text (runtime/workload/trace.hpp). Parses the input with and
// without the bundled throughput table; a trace that parses must survive write_trace and read back
// as the same jobs (the round trip write_trace documents).
#include <sstream>

#include "fuzz/fuzz_support.hpp"
#include "runtime/workload/trace.hpp"

namespace {

using tessera::job;

/// Same value, NaN equal to NaN (the reader refuses NaN today; this keeps the check honest
/// if it starts to accept it).
bool same(double a, double b) { return a == b || (a != a && b != b); }

/// `s` as write_trace writes it: tabs and line breaks ('\r' too) become spaces.
std::string flattened(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

/// True when `b` is `a` read back from write_trace (ids are renumbered, so not compared).
bool same_job(const job& a, const job& b) {
  return flattened(a.job_type) == b.job_type && flattened(a.command) == b.command &&
         flattened(a.working_dir) == b.working_dir &&
         flattened(a.num_steps_arg) == b.num_steps_arg && a.needs_data_dir == b.needs_data_dir &&
         a.scale_factor == b.scale_factor && same(a.total_steps, b.total_steps) &&
         same(a.priority_weight, b.priority_weight) && same(a.slo, b.slo) &&
         same(a.arrival, b.arrival);
}

/// Writes `jobs` and reads them back; aborts when they differ.
void check_round_trip(const std::vector<job>& jobs) {
  std::stringstream text;
  tessera::write_trace(text, jobs);
  auto back = tessera::parse_trace(text, "rewritten.trace");
  if (!back) tessera::fuzz::fail("a written trace does not read back");
  if (back->size() != jobs.size()) tessera::fuzz::fail("a written trace reads back other jobs");
  for (std::size_t i = 0; i < jobs.size(); ++i)
    if (!same_job(jobs[i], (*back)[i])) tessera::fuzz::fail("a written job reads back changed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto table = tessera::throughput_table::load_bundled();
  if (!table) tessera::fuzz::fail("cannot load the bundled throughput table");
  const std::string text = tessera::fuzz::as_text(data, size);
  std::istringstream plain(text);
  if (auto jobs = tessera::parse_trace(plain, "fuzz.trace")) check_round_trip(*jobs);
  std::istringstream checked(text);
  (void)tessera::parse_trace(checked, "fuzz.trace", &*table);
  return 0;
}
