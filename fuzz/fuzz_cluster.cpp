// libFuzzer target: cluster TOML files and the cluster shorthand (runtime/core/cluster_config.hpp).
// The same input is read as a file and as a shorthand string ("36 v100 : 36 p100, 4 per
// server"), which a cluster file's `shorthand` key and the CLI pass to the same parser.
#include "fuzz/fuzz_support.hpp"
#include "runtime/core/cluster_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessera::fuzz::scratch_file file(".toml");
  (void)tessera::load_cluster(file.write(data, size));
  (void)tessera::parse_cluster_shorthand(tessera::fuzz::as_text(data, size), "fuzz");
  return 0;
}
