// The control API's documents (actors/api_json.hpp): the JSON of docs/api.md and the
// Prometheus text of the metrics scrape.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <sstream>

#include "actors/api.hpp"
#include "actors/api_json.hpp"

using namespace tessera;
using namespace tessera::actors;

TEST_CASE("job, node, round and cluster documents carry docs/api.md's fields", "[api]") {
  job_status j;
  j.summary.id = 3;
  j.summary.kind = "mlp";
  j.state = "running";
  j.summary.total_steps = 400;
  j.summary.steps = 120;
  j.placements = {{7, 3, 0, 1, 2}};
  const auto short_form = to_json(j, false);
  const auto long_form = to_json(j, true);
  for (const char* key : {"id",      "kind",        "job_type",    "scale",
                          "state",   "total_steps", "steps",       "steps_per_second",
                          "loss",    "accuracy",    "arrival",     "first_start",
                          "finish",  "restarts",    "lost_rounds", "program_failures",
                          "failure", "copies",      "checkpoint",  "gpu_seconds"}) {
    INFO(key);
    CHECK(short_form.contains(key));
  }
  CHECK_FALSE(short_form.contains("placements"));
  REQUIRE(long_form["placements"].size() == 1);
  CHECK(long_form["placements"][0]["round"] == 7);
  CHECK(long_form["placements"][0]["rank"] == 1);
  CHECK(long_form["placements"][0]["gpus"] == 2);

  node_status n;
  n.rank = 1;
  n.state = "alive";
  n.assignment = {{7, 3, 0, 1, 2}};
  n.silence = 0.25;
  n.loss_bound = 3.5;
  const auto nj = to_json(n);
  CHECK(nj["assignment"][0]["job"] == 3);
  CHECK(nj["silence"] == 0.25);
  CHECK(nj["loss_bound"] == 3.5);
  CHECK_FALSE(nj["assignment"][0].contains("round"));

  cluster_status c;
  c.nodes_by_state = {{"alive", 2}, {"lost", 1}};
  c.jobs = {{"running", 2}};
  c.utilisation = {{"v100", 0.5}};
  const auto cj = to_json(c);
  CHECK(cj["nodes_alive"] == 2);
  CHECK(cj["jobs"]["running"] == 2);
  CHECK(cj["utilisation"]["v100"] == 0.5);
}

TEST_CASE(
    "the metrics text is Prometheus' format: cumulative histograms, every state, "
    "escaped labels",
    "[api]") {
  cluster_status c;
  c.jobs = {{"running", 2}, {"finished", 5}};
  c.nodes_by_state = {{"alive", 3}};
  c.utilisation = {{"v\"100\n", 0.25}};
  for (double s : {0.0005, 0.003, 0.003, 0.2, 7.0}) c.round_seconds.observe(s);
  c.rounds_total = 5;
  const auto text = metrics_text(c, {{"GET", 200, 11}, {"POST", 401, 2}});
  CHECK(text.find("tessera_jobs{state=\"running\"} 2\n") != std::string::npos);
  CHECK(text.find("tessera_jobs{state=\"queued\"} 0\n") != std::string::npos);
  CHECK(text.find("tessera_nodes{state=\"alive\"} 3\n") != std::string::npos);
  CHECK(text.find("tessera_rounds_total 5\n") != std::string::npos);
  CHECK(text.find("tessera_api_requests_total{method=\"POST\",code=\"401\"} 2\n") !=
        std::string::npos);
  CHECK(text.find("tessera_gpu_utilisation{type=\"v\\\"100\\n\"} 0.25\n") != std::string::npos);
  // Buckets are cumulative and end at +Inf with the count.
  std::regex bucket(R"re(tessera_round_seconds_bucket\{le="([^"]+)"\} (\d+))re");
  std::istringstream lines(text);
  std::string line;
  long previous = -1;
  int buckets = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, bucket)) continue;
    const long count = std::stol(m[2]);
    CHECK(count >= previous);
    previous = count;
    ++buckets;
    if (m[1] == "0.001") CHECK(count == 1);
    if (m[1] == "0.005") CHECK(count == 3);
    if (m[1] == "+Inf") CHECK(count == 5);
  }
  CHECK(buckets == 13);
  CHECK(text.find("tessera_round_seconds_count 5\n") != std::string::npos);
  // Every sample line is `name{labels} value` or `name value`; comments start with '#'.
  std::istringstream again(text);
  std::regex sample(R"([a-z_]+(\{[^}]*\})? [-+0-9.eInf]+)");
  while (std::getline(again, line)) {
    INFO(line);
    CHECK((line.rfind("# ", 0) == 0 || std::regex_match(line, sample)));
  }
}

TEST_CASE("only the query parameters a route reads pass, and they make the cache key",
          "[api][bounds]") {
  auto req = [](const std::string& method, const std::string& path,
                std::map<std::string, std::string> query) {
    http::request r;
    r.method = method;
    r.path = path;
    r.query = std::move(query);
    return r;
  };
  CHECK(query_refusal(req("GET", "/v1/jobs", {{"state", "running"}})).empty());
  CHECK(query_refusal(req("POST", "/v1/jobs", {{"base_dir", "/tmp"}})).empty());
  CHECK(query_refusal(req("GET", "/v1/rounds", {{"limit", "5"}})).empty());
  CHECK(query_refusal(req("GET", "/v1/cluster", {})).empty());
  CHECK(query_refusal(req("GET", "/v1/jobs", {{"x", "1"}})) ==
        "query 'x': GET /v1/jobs takes only 'after', 'limit', 'state'");
  CHECK(query_refusal(req("GET", "/v1/jobs", {{"base_dir", "/tmp"}})) ==
        "query 'base_dir': GET /v1/jobs takes only 'after', 'limit', 'state'");
  CHECK(query_refusal(req("GET", "/metrics", {{"t", "9"}})) ==
        "query 't': GET /metrics takes no query parameters");
  // Property: the key depends on the method, path and parameters only, never on their order.
  CHECK(cache_key(req("GET", "/v1/rounds", {{"limit", "5"}})) ==
        cache_key(req("GET", "/v1/rounds", {{"limit", "5"}})));
  CHECK(cache_key(req("GET", "/v1/rounds", {{"limit", "5"}})) !=
        cache_key(req("GET", "/v1/rounds", {{"limit", "6"}})));
  CHECK(cache_key(req("GET", "/v1/jobs", {})) != cache_key(req("GET", "/v1/nodes", {})));
}

TEST_CASE("a served cluster's journal health is in the cluster document and the metrics",
          "[api][journal]") {
  cluster_status c;
  CHECK_FALSE(to_json(c).contains("journal"));  // no journal: nothing said
  CHECK(metrics_text(c, {}).find("tessera_journal") == std::string::npos);
  c.journal.present = true;
  c.journal.writable = false;
  c.journal.error = "journal: cannot write 443 bytes at offset 999: No space left on device";
  c.journal.held_records = 7;
  c.journal.write_errors = 12;
  c.journal.paused_rounds = 4;
  c.journal.bytes = 999;
  const auto j = to_json(c)["journal"];
  CHECK(j["writable"] == false);
  CHECK(j["error"] == c.journal.error);
  CHECK(j["held_records"] == 7);
  CHECK(j["write_errors"] == 12);
  CHECK(j["paused_rounds"] == 4);
  const auto text = metrics_text(c, {});
  for (const char* line :
       {"tessera_journal_writable 0\n", "tessera_journal_write_errors_total 12\n",
        "tessera_journal_held_records 7\n", "tessera_journal_paused_rounds_total 4\n",
        "tessera_journal_bytes 999\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
}
