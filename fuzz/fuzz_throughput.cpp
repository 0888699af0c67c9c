// libFuzzer target: throughput-table JSON (runtime/core/throughput.hpp) and Gavel's job-key form
// "('ResNet-18 (batch size 64)', 2)". A table that loads is queried for every key it lists.
#include "fuzz/fuzz_support.hpp"
#include "runtime/core/throughput.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessera::fuzz::scratch_file file(".json");
  (void)tessera::parse_job_key(tessera::fuzz::as_text(data, size));
  auto table = tessera::throughput_table::load(file.write(data, size));
  if (!table) return 0;
  for (const auto& gpu : table->gpu_types()) {
    const auto keys = table->job_keys(gpu);
    for (const auto& key : keys) {
      if (!table->knows(key) || !table->knows_job_type(key.job_type) || !table->isolated(gpu, key))
        tessera::fuzz::fail("a listed job key is not known");
      (void)table->isolated(gpu, key, false);
      (void)table->colocated(gpu, key, keys.front());
    }
  }
  return 0;
}
