// Tests of cluster files and the cluster shorthand (runtime/core/cluster_config.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "runtime/core/cluster_config.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// The cluster file fails with a message starting "<path>:<line>: field '<field>': ".
std::string cluster_error(const std::string& name, const std::string& text, int line,
                          const std::string& field) {
  const auto p = temp_file(name + ".toml", text);
  return input_error_message(load_cluster(p), p, line, field);
}

}  // namespace

TEST_CASE("config/gavel_108.toml: 36 v100 + 36 p100 + 36 k80, 4 per server", "[io]") {
  auto r = load_cluster(config_file("gavel_108.toml"));
  REQUIRE(r);
  const cluster& c = *r;
  CHECK(c.total_gpus() == 108);
  REQUIRE(c.servers.size() == 27);
  REQUIRE(c.types.size() == 3);
  CHECK(c.types[0].name == "v100");
  CHECK(c.types[1].name == "p100");
  CHECK(c.types[2].name == "k80");
  for (const auto& t : c.types) {
    CHECK(t.gpus == 36);
    CHECK(t.mean_speed == 1.0);
  }
  for (const auto& s : c.servers) CHECK(s.gpus == 4);
  CHECK(c.servers[0].name == "v100-0");
  CHECK(c.servers[9].name == "p100-0");
  CHECK(c.servers[26].name == "k80-8");
  CHECK(c.servers[26].type_index == 2);
}

TEST_CASE("config/small_cluster.toml: explicit servers", "[io]") {
  auto r = load_cluster(config_file("small_cluster.toml"));
  REQUIRE(r);
  REQUIRE(r->servers.size() == 3);
  CHECK(r->total_gpus() == 12);
  CHECK(r->servers[1].gpu_type == "p100");
  CHECK(r->servers[1].name == "p100-0");
  CHECK(r->servers[2].speed == 1.0);
}

TEST_CASE("cluster file: servers with count, speed, names, upper-case types", "[io]") {
  const auto p = temp_file("servers.toml", R"(
[cluster]
name = "mixed"
shorthand = "8 k80, 4 per server"

[[cluster.server]]
gpu_type = "V100"
gpus = 8
speed = 0.5
count = 2

[[cluster.server]]
gpu_type = "k80"
gpus = 2
name = "old"
)");
  auto r = load_cluster(p);
  REQUIRE(r);
  REQUIRE(r->servers.size() == 5);
  CHECK(r->servers[0].name == "k80-0");
  CHECK(r->servers[1].name == "k80-1");
  CHECK(r->servers[2].name == "v100-0");
  CHECK(r->servers[2].gpu_type == "v100");
  CHECK(r->servers[3].name == "v100-1");
  CHECK(r->servers[3].speed == 0.5);
  CHECK(r->servers[4].name == "old");
  const int k80 = r->type_index("k80");
  REQUIRE(k80 >= 0);
  CHECK(r->types[k80].gpus == 10);
  CHECK(r->types[r->type_index("v100")].mean_speed == 0.5);
}

TEST_CASE("cluster file: TOML syntax error reports file:line:column and the description", "[io]") {
  const auto p = temp_file("syntax.toml", "[cluster]\nname = \"x\"\nshorthand = 36 v100\n");
  auto r = load_cluster(p);
  REQUIRE_FALSE(r);
  const auto& msg = r.err().message;
  INFO(msg);
  CHECK(r.err().kind == error_kind::invalid_input);
  CHECK(msg.rfind(p + ":3:", 0) == 0);
  // column, then the parser's own description
  const auto rest = msg.substr(p.size() + 3);
  CHECK(std::isdigit(static_cast<unsigned char>(rest[0])));
  CHECK(rest.find(": ") != std::string::npos);
  CHECK(rest.size() > rest.find(": ") + 5);
}

TEST_CASE("cluster file: missing field names the line of the table lacking it", "[io]") {
  const auto msg = cluster_error("missing", R"([cluster]
name = "x"

[[cluster.server]]
gpu_type = "v100"
gpus = 4

[[cluster.server]]
gpu_type = "p100"
speed = 1.0
)",
                                 8, "gpus");
  CHECK(has(msg, "missing"));
}

TEST_CASE("cluster file: wrong type names the field's line", "[io]") {
  const auto msg = cluster_error("wrongtype", R"([cluster]
[[cluster.server]]
gpu_type = "v100"
gpus = "four"
)",
                                 4, "gpus");
  CHECK(has(msg, "got a string"));
}

TEST_CASE("cluster file: negative count", "[io]") {
  cluster_error("negcount", R"([cluster]
[[cluster.server]]
gpu_type = "v100"
gpus = 4
count = -2
)",
                5, "count");
}

TEST_CASE("cluster file: zero GPUs", "[io]") {
  const auto msg = cluster_error("zerogpus", R"([cluster]
[[cluster.server]]
gpu_type = "v100"
gpus = 0
)",
                                 4, "gpus");
  CHECK(has(msg, "got 0"));
}

TEST_CASE("cluster file: non-positive speed", "[io]") {
  cluster_error("speed",
                "[cluster]\n[[cluster.server]]\ngpu_type = \"v100\"\ngpus = 4\nspeed = 0.0\n", 5,
                "speed");
}

TEST_CASE("cluster file: unknown key is an error naming it", "[io]") {
  const auto msg = cluster_error("unknown", R"([cluster]
[[cluster.server]]
gpu_type = "v100"
gpu = 4
)",
                                 4, "gpu");
  CHECK(has(msg, "unknown key"));
  cluster_error("unknown_top", "[cluster]\nshorthand = \"4 v100\"\n[policy]\nname = \"las\"\n", 3,
                "policy");
  cluster_error("unknown_cluster", "[cluster]\nshorthand = \"4 v100\"\nsize = 4\n", 3, "size");
}

TEST_CASE("cluster file: no servers, no [cluster], duplicate names, bad shorthand", "[io]") {
  cluster_error("noservers", "[cluster]\nname = \"empty\"\n", 1, "cluster");
  const auto p = temp_file("nocluster.toml", "# nothing here\n");
  auto r = load_cluster(p);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.rfind(p + ": field 'cluster': ", 0) == 0);
  cluster_error("dupname", R"([cluster]
[[cluster.server]]
gpu_type = "v100"
gpus = 4
name = "a"
[[cluster.server]]
gpu_type = "k80"
gpus = 4
name = "a"
)",
                9, "name");
  const auto msg = cluster_error("badshort", "[cluster]\n\nshorthand = \"36 v100 : zero p100\"\n",
                                 3, "shorthand");
  CHECK(has(msg, "'zero'"));
  CHECK_FALSE(load_cluster("/nonexistent/cluster.toml"));
}

TEST_CASE("cluster shorthand", "[io]") {
  auto a = parse_cluster_shorthand("36 v100 : 36 p100 : 36 k80, 4 per server", "--cluster");
  REQUIRE(a);
  CHECK(a->servers.size() == 27);
  CHECK(a->total_gpus() == 108);

  auto b = parse_cluster_shorthand("10 V100, 4 per server", "");
  REQUIRE(b);
  REQUIRE(b->servers.size() == 3);
  CHECK(b->servers[0].gpus == 4);
  CHECK(b->servers[2].gpus == 2);  // the last server holds the rest
  CHECK(b->servers[2].gpu_type == "v100");
  CHECK(b->servers[2].name == "v100-2");

  auto c = parse_cluster_shorthand("8 v100:4 k80 , 8:2 GPUs per server", "");
  REQUIRE(c);
  REQUIRE(c->servers.size() == 3);
  CHECK(c->servers[0].gpus == 8);
  CHECK(c->servers[1].gpus == 2);

  auto d = parse_cluster_shorthand("3 p100", "");  // Gavel's default: 1 GPU per server
  REQUIRE(d);
  CHECK(d->servers.size() == 3);

  for (const char* bad : {"", "v100", "0 v100", "-4 v100", "4 v100 p100", "4 v100 : 4 v100",
                          "4 v100, 2 per rack", "4 v100, 0 per server", "4 v100, 2, 3",
                          "4 v100 : 4 k80, 1:2:3 per server", "2000000 v100"}) {
    INFO(bad);
    auto r = parse_cluster_shorthand(bad, "--cluster");
    REQUIRE_FALSE(r);
    CHECK(r.err().kind == error_kind::invalid_input);
    CHECK(r.err().message.rfind("--cluster: ", 0) == 0);
  }
}
