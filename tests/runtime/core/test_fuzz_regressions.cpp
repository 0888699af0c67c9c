// Inputs the fuzz targets (fuzz/) found, kept under tests/data/fuzz/<target>/ and replayed
// against the reader each came from: every one must give an error or a value (no crash, no
// hang), plus a check specific to what was wrong. The protocol's findings are replayed by
// tests/actors/test_wire_doubles.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/cluster_config.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// The saved inputs of fuzz target `target` (tests/data/fuzz/<target>/*), sorted; fails the
/// test when there are none.
std::vector<std::string> fuzz_inputs(const std::string& target) {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(TESSERA_TEST_DATA_DIR) + "/fuzz/" + target))
    out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  REQUIRE_FALSE(out.empty());
  return out;
}

}  // namespace

TEST_CASE("fuzz findings: cluster files and shorthands", "[io][fuzz]") {
  for (const auto& path : fuzz_inputs("cluster")) {
    INFO(path);
    auto file = load_cluster(path);
    auto shorthand = parse_cluster_shorthand(file_contents(path), "fuzz");
    if (file) CHECK(file->total_gpus() > 0);
    if (shorthand) CHECK(shorthand->total_gpus() > 0);
  }
  // timeout-f96391cb: "963366 dk}...", 963,366 one-GPU servers (within the GPU cap) took over
  // 10 s to name under the sanitizers; the server count now has a cap of its own.
  auto r = parse_cluster_shorthand(file_contents(fuzz_inputs("cluster").front()), "fuzz");
  REQUIRE_FALSE(r);
  CHECK(has(r.err().message, "more than 65536 servers"));
}

TEST_CASE("cluster: at most 65536 servers, in the shorthand and in the file", "[io][fuzz]") {
  CHECK(parse_cluster_shorthand("65536 v100", "cli"));
  CHECK(parse_cluster_shorthand("131072 v100, 2 per server", "cli"));
  auto over = parse_cluster_shorthand("65537 v100", "cli");
  REQUIRE_FALSE(over);
  CHECK(has(over.err().message, "more than 65536 servers"));
  const std::string text =
      "[cluster]\nshorthand = \"65536 k80\"\n[[cluster.server]]\ngpu_type = \"v100\"\ngpus = 1\n";
  const auto p = temp_file("too_many_servers.toml", text);
  const auto msg = input_error_message(load_cluster(p), p, 3, "count");
  CHECK(has(msg, "more than 65536 servers"));
}
