// libFuzzer target: job-set TOML files (runtime/core/job_file.hpp), as a simulation reads them
// (load_jobs, with and without the bundled throughput table) and as a real run does
// (load_run_jobs, with the built-in trainable kinds).
#include "fuzz/fuzz_support.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/node/train/trainable.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessera::fuzz::scratch_file file(".toml");
  static const auto table = tessera::throughput_table::load_bundled();
  static const std::vector<std::string> kinds = tessera::train::builtin_trainables().kinds();
  if (!table) tessera::fuzz::fail("cannot load the bundled throughput table");
  const std::string& path = file.write(data, size);
  (void)tessera::load_jobs(path);
  (void)tessera::load_jobs(path, &*table);
  (void)tessera::load_run_jobs(path);
  (void)tessera::load_run_jobs(path, &kinds);
  return 0;
}
