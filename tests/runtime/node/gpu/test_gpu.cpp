// Tests of a node's GPUs as plain data (runtime/node/gpu): the model name -> GPU type table, the
// check against a server entry, device indices for a round's copies, CUDA_VISIBLE_DEVICES for
// children, the discovery setting with an injected probe, and the CUDA probe itself (on a
// machine without a GPU it finds none and says why).
#include <catch2/catch.hpp>

#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/node/gpu/cuda_probe.hpp"
#include "runtime/node/gpu/devices.hpp"
#include "runtime/node/gpu/discovery.hpp"

using namespace tessera;
using namespace tessera::gpu;

namespace {

server make_server(const std::string& name, const std::string& type, int gpus) {
  server s;
  s.name = name;
  s.gpu_type = type;
  s.gpus = gpus;
  return s;
}

std::vector<device_info> devices_of(const std::vector<std::string>& names,
                                    std::uint64_t memory = 0) {
  std::vector<device_info> out;
  for (const auto& n : names) out.push_back({static_cast<int>(out.size()), n, memory});
  return out;
}

constexpr std::uint64_t gib = 1024ull * 1024 * 1024;

}  // namespace

TEST_CASE("gpu: model names map to the cluster file's GPU types", "[gpu]") {
  const std::vector<std::pair<std::string, std::optional<std::string>>> cases{
      {"NVIDIA H100 80GB HBM3", "h100"},
      {"NVIDIA H100 PCIe", "h100"},
      {"NVIDIA H100 NVL", "h100"},
      {"nvidia h100 80gb hbm3", "h100"},
      {"NVIDIA H200", "h200"},
      {"NVIDIA H200 NVL", "h200"},
      {"NVIDIA GH200 480GB", "gh200"},
      {"Tesla V100-SXM2-16GB", "v100"},
      {"Tesla V100-SXM2-32GB", "v100"},
      {"Tesla V100-PCIE-32GB", "v100"},
      {"Tesla V100S-PCIE-32GB", "v100"},
      {"Tesla P100-PCIE-16GB", "p100"},
      {"Tesla P100-SXM2-16GB", "p100"},
      {"Tesla P100", "p100"},
      {"Tesla K80", "k80"},
      {"Tesla T4", "t4"},
      {"NVIDIA A100-SXM4-40GB", "a100"},
      {"NVIDIA A100-SXM4-80GB", "a100"},
      {"NVIDIA A100 80GB PCIe", "a100"},
      {"NVIDIA A10", "a10"},
      {"NVIDIA A10G", "a10g"},
      {"NVIDIA L4", "l4"},
      {"NVIDIA L40S", "l40s"},
      {"NVIDIA B200", "b200"},
      // Not in the table: consumer and workstation models, near misses, nothing.
      {"NVIDIA GeForce RTX 4090", std::nullopt},
      {"Quadro RTX 8000", std::nullopt},
      {"NVIDIA H1000", std::nullopt},
      {"XH100", std::nullopt},
      {"Tesla V1000-SXM2", std::nullopt},
      {"NVIDIA", std::nullopt},
      {"", std::nullopt},
  };
  for (const auto& [model, type] : cases) {
    INFO("model '" << model << "'");
    CHECK(type_of_model(model) == type);
  }
  const auto known = known_types();
  CHECK_THAT(known, Catch::StartsWith("a10, a100,"));
  CHECK_THAT(known, Catch::Contains("h100, h200, h800, k40, k80"));
  CHECK(known.find("v100") == known.rfind("v100"));  // v100s adds no second v100
}

TEST_CASE("gpu: a device is of a type by the table, else by a token of its name", "[gpu]") {
  CHECK(is_of_type({0, "Tesla V100S-PCIE-32GB", 0}, "v100"));
  CHECK_FALSE(is_of_type({0, "Tesla V100S-PCIE-32GB", 0}, "v100s"));
  CHECK_FALSE(is_of_type({0, "NVIDIA H100 80GB HBM3", 0}, "nvidia"));
  CHECK_FALSE(is_of_type({0, "NVIDIA H100 80GB HBM3", 0}, "h200"));
  // Unknown to the table: a token of the name is the type.
  CHECK(is_of_type({0, "NVIDIA GeForce RTX 4090", 0}, "4090"));
  CHECK_FALSE(is_of_type({0, "NVIDIA GeForce RTX 4090", 0}, "rtx4090"));
  CHECK(describe({2, "NVIDIA H100 80GB HBM3", 80 * gib}) ==
        "2: NVIDIA H100 80GB HBM3 (80.0 GiB, type h100)");
  CHECK(describe({0, "NVIDIA GeForce RTX 4090", 0}) ==
        "0: NVIDIA GeForce RTX 4090 (not in the GPU type table)");
}

TEST_CASE("gpu: devices that disagree with the server entry are refused, saying both sides",
          "[gpu]") {
  const auto srv = make_server("v100-0", "v100", 4);
  CHECK(check_devices(srv,
                      devices_of({"Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB",
                                  "Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB"}),
                      "c.toml"));
  // Count: one H100 where four V100s are declared.
  const auto count = check_devices(srv, devices_of({"NVIDIA H100 80GB HBM3"}, 80 * gib), "c.toml");
  REQUIRE_FALSE(count);
  CHECK(count.err().kind == error_kind::invalid_input);
  const auto& m = count.err().message;
  CHECK_THAT(m, Catch::StartsWith("c.toml: field 'gpus': server 'v100-0' declares 4 GPUs of "
                                  "type v100, but its node found 1 GPU, not all of type v100:"));
  CHECK_THAT(m, Catch::Contains("0: NVIDIA H100 80GB HBM3 (80.0 GiB, type h100)"));
  CHECK_THAT(m, Catch::Contains("TESSERA_GPU_DISCOVERY=off"));
  // Type: the right count, one device of another type.
  const auto type = check_devices(srv,
                                  devices_of({"Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB",
                                              "Tesla V100-SXM2-16GB", "Tesla K80"}),
                                  "c.toml");
  REQUIRE_FALSE(type);
  CHECK_THAT(type.err().message,
             Catch::StartsWith("c.toml: field 'gpu_type': server 'v100-0' declares 4 GPUs of "
                               "type v100, but its node found 4 GPUs, not all of type v100:"));
  CHECK_THAT(type.err().message, Catch::Contains("3: Tesla K80 (type k80)"));
  // Count only: two of the right type.
  const auto two =
      check_devices(srv, devices_of({"Tesla V100-SXM2-16GB", "Tesla V100-SXM2-16GB"}), "c.toml");
  REQUIRE_FALSE(two);
  CHECK_THAT(two.err().message, Catch::Contains("field 'gpus'"));
  CHECK_THAT(two.err().message, Catch::Contains("found 2 GPUs:"));
  CHECK_FALSE(check_devices(srv, {}, "c.toml"));
}

TEST_CASE("gpu: device indices are handed out in order, never twice in a round", "[gpu]") {
  using lists = std::vector<std::vector<int>>;
  auto fixed = assign_devices({2, 1, 1}, 4);
  REQUIRE(fixed);
  CHECK(*fixed == lists{{0, 1}, {2}, {3}});
  auto none = assign_devices({}, 4);
  REQUIRE(none);
  CHECK(none->empty());
  auto zero = assign_devices({0, 2}, 2);
  REQUIRE(zero);
  CHECK(*zero == lists{{}, {0, 1}});
  auto over = assign_devices({2, 3}, 4);
  REQUIRE_FALSE(over);
  CHECK(over.err().message == "the round asks this node for 5 GPUs (2 copies), it has 4");
  CHECK_FALSE(assign_devices({1, -1}, 4));
  CHECK_FALSE(assign_devices({1}, 0));

  // Property, over random small rounds: each copy gets exactly its count, no index twice,
  // every index one of the node's, the same answer twice; more than the node has is refused.
  std::mt19937 rng(17);
  int refused = 0, placed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int gpus = 1 + static_cast<int>(rng() % 8);
    std::vector<std::int32_t> want(rng() % 5);
    int total = 0;
    for (auto& w : want) total += (w = static_cast<std::int32_t>(rng() % 4));
    const auto d = assign_devices(want, gpus);
    INFO("trial " << trial << ": " << want.size() << " copies, " << total << " of " << gpus);
    if (total > gpus) {
      CHECK_FALSE(d);
      ++refused;
      continue;
    }
    REQUIRE(d);
    ++placed;
    REQUIRE(d->size() == want.size());
    std::set<int> seen;
    for (std::size_t i = 0; i < d->size(); ++i) {
      CHECK(static_cast<std::int32_t>((*d)[i].size()) == want[i]);
      for (const int x : (*d)[i]) {
        CHECK(x >= 0);
        CHECK(x < gpus);
        CHECK(seen.insert(x).second);
      }
    }
    CHECK(*assign_devices(want, gpus) == *d);
  }
  CHECK(refused > 50);  // both branches were exercised
  CHECK(placed > 50);
}

TEST_CASE("gpu: a child's CUDA_VISIBLE_DEVICES follows the node's own", "[gpu]") {
  CHECK(visible_devices({}, "") == "");
  CHECK(visible_devices({1}, "") == "1");
  CHECK(visible_devices({0, 2}, "") == "0,2");
  CHECK(visible_devices({1}, "4,5") == "5");
  CHECK(visible_devices({0, 1}, "GPU-aa11, GPU-bb22") == "GPU-aa11,GPU-bb22");
  CHECK(visible_devices({3}, "4,5") == "3");
  CHECK(visible_devices({}, "4,5") == "");
}

TEST_CASE("gpu: the discovery setting is auto, off or a fake device list", "[gpu]") {
  const std::string where = "TESSERA_GPU_DISCOVERY";
  for (const char* text : {"", "auto", " auto "}) {
    auto d = parse_discovery(text, where);
    REQUIRE(d);
    CHECK(d->mode == discovery_mode::automatic);
  }
  auto off = parse_discovery("off", where);
  REQUIRE(off);
  CHECK(off->mode == discovery_mode::off);
  auto two = parse_discovery("fake:2*NVIDIA H100 80GB HBM3", where);
  REQUIRE(two);
  CHECK(two->mode == discovery_mode::fake);
  REQUIRE(two->fake.size() == 2);
  CHECK(two->fake[1].index == 1);
  CHECK(two->fake[1].name == "NVIDIA H100 80GB HBM3");
  auto mixed = parse_discovery("fake:Tesla V100-SXM2-16GB, 2 * Tesla K80", where);
  REQUIRE(mixed);
  REQUIRE(mixed->fake.size() == 3);
  CHECK(mixed->fake[0].name == "Tesla V100-SXM2-16GB");
  CHECK(mixed->fake[2].name == "Tesla K80");
  CHECK(mixed->fake[2].index == 2);
  for (const char* bad : {"on", "fake", "fake:", "fake:0*Tesla K80", "fake:2*", "fake:x*Tesla K80",
                          "fake:2000*Tesla K80", "fake:Tesla K80,,Tesla K80"}) {
    INFO("'" << bad << "'");
    auto d = parse_discovery(bad, where);
    REQUIRE_FALSE(d);
    CHECK(d.err().kind == error_kind::invalid_input);
    CHECK_THAT(d.err().message, Catch::StartsWith(where + ": "));
  }
}

TEST_CASE("gpu: a node's discovery asks the probe only when automatic, then checks", "[gpu]") {
  const auto srv = make_server("h100-0", "h100", 2);
  int calls = 0;
  auto two_h100 = [&] {
    ++calls;
    return probe_result{devices_of({"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}, 80 * gib),
                        ""};
  };
  discovery how;
  how.visible = "2,3";
  auto found = discover_node_gpus(srv, how, two_h100, "c.toml");
  REQUIRE(found);
  CHECK(calls == 1);
  CHECK(found->real());
  CHECK(found->visible == "2,3");
  CHECK_THAT(summary(*found, srv), Catch::StartsWith("2 GPUs found (0: NVIDIA H100 80GB HBM3"));
  CHECK_THAT(summary(*found, srv), Catch::EndsWith("steps are not throttled"));
  // The probe finds none: the node runs declared and throttled, saying why.
  auto none = discover_node_gpus(
      srv, how,
      [] {
        return probe_result{{}, "cudaGetDeviceCount: no driver"};
      },
      "c.toml");
  REQUIRE(none);
  CHECK_FALSE(none->real());
  CHECK(summary(*none, srv) ==
        "no GPU found (cudaGetDeviceCount: no driver): runs on its 2 "
        "declared h100 GPUs, throttled by its speed factor 1");
  // Off and fake never ask the probe.
  how.mode = discovery_mode::off;
  auto off = discover_node_gpus(srv, how, two_h100, "c.toml");
  REQUIRE(off);
  CHECK_FALSE(off->real());
  how.mode = discovery_mode::fake;
  how.fake = devices_of({"NVIDIA H100 PCIe", "NVIDIA H100 PCIe"});
  auto fake = discover_node_gpus(srv, how, two_h100, "c.toml");
  REQUIRE(fake);
  CHECK(fake->real());
  CHECK(calls == 1);
  // Found devices that disagree refuse the node.
  how.fake = devices_of({"Tesla K80"});
  auto bad = discover_node_gpus(srv, how, two_h100, "c.toml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.err().message, Catch::Contains("server 'h100-0' declares 2 GPUs of type h100"));
  CHECK_THAT(bad.err().message, Catch::Contains("0: Tesla K80 (type k80)"));
}

TEST_CASE("gpu: the CUDA probe describes the devices of this machine", "[gpu][cuda]") {
  const auto p = probe_cuda_devices();
  if (!cuda_built()) {
    std::cout << "SKIPPED real GPU discovery: " << p.why_none << '\n';
    CHECK(p.devices.empty());
    CHECK_THAT(p.why_none, Catch::Contains("no CUDA support built"));
    return;
  }
  if (p.devices.empty()) {
    std::cout << "SKIPPED real GPU discovery: it needs a CUDA GPU (" << p.why_none << ")\n";
    CHECK_FALSE(p.why_none.empty());
    return;
  }
  for (std::size_t i = 0; i < p.devices.size(); ++i) {
    const auto& d = p.devices[i];
    INFO(describe(d));
    CHECK(d.index == static_cast<int>(i));
    CHECK_FALSE(d.name.empty());
    CHECK(d.memory_bytes > gib);
    CHECK(type_of_model(d.name).has_value());
  }
  // The devices found pass the check against a server entry that declares them.
  const auto type = type_of_model(p.devices.front().name).value_or("?");
  const auto srv = make_server("here", type, static_cast<int>(p.devices.size()));
  discovery how;
  auto g = discover_node_gpus(srv, how, probe_cuda_devices, "here.toml");
  INFO((g ? summary(*g, srv) : g.err().message));
  CHECK(g);
}
