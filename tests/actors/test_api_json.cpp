// The control API's documents (actors/api_json.hpp): the JSON of docs/api.md and the
// Prometheus text of the metrics scrape.
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>

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
