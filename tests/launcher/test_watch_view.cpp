// Tests of `tessera watch`'s screen (launcher/watch_view.hpp), from API answers as docs/api.md
// gives them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/watch_view.hpp"

using namespace tessera;
using nlohmann::json;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& screen) {
  std::vector<std::string> out;
  std::istringstream in(screen);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The whitespace-separated words of `line`.
std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The job table's last columns of job `id`'s row: steps/s, ETA, loss.
struct tail_columns {
  std::string rate, eta, loss;
};

// The line of the job table whose first column is `id`.
std::string job_line(const std::string& screen, int id) {
  for (const auto& line : lines_of(screen)) {
    std::istringstream in(line);
    std::string first;
    in >> first;
    if (first == std::to_string(id) && line.find('[') != std::string::npos) return line;
  }
  return "";
}

tail_columns tail_of(const std::string& screen, int id) {
  const auto w = words(job_line(screen, id));
  REQUIRE(w.size() >= 3);
  return {w[w.size() - 3], w[w.size() - 2], w[w.size() - 1]};
}

json example_cluster() {
  return json::parse(R"({"policy": "max_min_fairness_perf", "round": 7, "round_length": 10.0,
    "uptime": 75.3, "nodes_alive": 2, "nodes": 3, "gpus": 10,
    "jobs": {"queued": 1, "running": 2, "finished": 1, "failed": 1, "cancelling": 1},
    "utilisation": {"v100": 0.75, "k80": 1.0}, "shutting_down": false})");
}

json example_jobs() {
  return json::parse(R"({"jobs": [
    {"id": 3, "kind": "mlp", "job_type": "mlp", "scale": 2, "state": "running",
     "total_steps": 400, "steps": 120, "steps_per_second": 35.2, "loss": 0.41, "accuracy": 0,
     "arrival": 12.0, "first_start": 13.1, "finish": -1, "restarts": 1, "lost_rounds": 0,
     "program_failures": 0, "failure": "", "copies": 1, "checkpoint": "ckpt/job-3.r7.ckpt",
     "gpu_seconds": 44.0},
    {"id": 4, "kind": "softmax_regression", "state": "queued", "total_steps": 1000, "steps": 0,
     "steps_per_second": 0, "loss": 0},
    {"id": 5, "kind": "program", "state": "running", "total_steps": 3600, "steps": 0,
     "steps_per_second": 1.0, "loss": 2.5},
    {"id": 6, "kind": "mlp", "state": "finished", "total_steps": 200, "steps": 200,
     "steps_per_second": 4.0, "loss": 0.05},
    {"id": 7, "kind": "mlp", "state": "failed", "total_steps": 200, "steps": 50,
     "steps_per_second": 4.0, "loss": 0.9},
    {"id": 8, "kind": "mlp", "state": "cancelling", "total_steps": 200, "steps": 20,
     "steps_per_second": 2.0, "loss": 0.9}]})");
}

json example_nodes() {
  return json::parse(R"({"nodes": [
    {"rank": 1, "name": "s1", "gpu_type": "v100", "gpus": 4, "speed": 1.0, "host": "h",
     "pid": 4242, "state": "alive", "assignment": [{"job": 3, "copy": 0, "gpus": 2},
                                                  {"job": 5, "copy": 1, "gpus": 1}]},
    {"rank": 2, "name": "s2", "gpu_type": "k80", "gpus": 2, "state": "alive",
     "assignment": [{"job": 3, "copy": 1, "gpus": 2}]},
    {"rank": 3, "name": "s3", "gpu_type": "k80", "gpus": 4, "state": "lost", "assignment": []}]})");
}

}  // namespace

TEST_CASE("watch: the bar's fill is steps/total of its inner columns", "[watch]") {
  std::mt19937 rng(14);
  std::uniform_real_distribution<double> unit(0, 1);
  std::uniform_int_distribution<int> widths(8, 120);
  const std::vector<std::string> eighths = {"▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  for (int trial = 0; trial < 2000; ++trial) {
    const double total = 1 + unit(rng) * 1e6;
    const double steps = (unit(rng) * 1.6 - 0.3) * total;  // below 0 and past the total too
    const int width = widths(rng);
    const auto inner = static_cast<std::size_t>(width - 7);
    const double frac = std::clamp(steps / total, 0.0, 1.0);
    INFO("steps " << steps << " total " << total << " width " << width);

    const std::string ascii = cli::progress_bar(steps, total, width, false);
    CHECK(cli::display_width(ascii) == static_cast<std::size_t>(width));
    const auto filled = count(ascii, "#");
    CHECK(filled == static_cast<std::size_t>(std::floor(frac * static_cast<double>(inner))));
    CHECK(filled + count(ascii, ".") == inner);
    char pct[8];
    std::snprintf(pct, sizeof pct, "%3d%%", static_cast<int>(std::floor(frac * 100)));
    CHECK(ascii.substr(ascii.size() - 4) == pct);

    const std::string blocks = cli::progress_bar(steps, total, width, true);
    CHECK(cli::display_width(blocks) == static_cast<std::size_t>(width));
    std::size_t parts = 8 * count(blocks, "█");
    for (std::size_t e = 0; e < eighths.size(); ++e) parts += (e + 1) * count(blocks, eighths[e]);
    CHECK(parts == static_cast<std::size_t>(std::floor(frac * static_cast<double>(inner * 8))));
  }
  CHECK(cli::progress_bar(52, 100, 21, false) == "[#######.......]  52%");
  CHECK(cli::progress_bar(100, 100, 12, false) == "[#####] 100%");
  CHECK(cli::progress_bar(99.99, 100, 12, false) == "[####.]  99%");  // full only when done
  CHECK(cli::progress_bar(1, 2, 12, true) == "[██▌  ]  50%");
}

TEST_CASE("watch: a bar is never wider than its width", "[watch]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> any(-1e9, 1e9);
  for (int width = -3; width <= 200; ++width) {
    for (int trial = 0; trial < 20; ++trial) {
      const double steps = any(rng), total = trial % 4 ? any(rng) : 0;
      for (bool unicode : {false, true}) {
        INFO("width " << width << " steps " << steps << " total " << total);
        CHECK(cli::display_width(cli::progress_bar(steps, total, width, unicode)) ==
              static_cast<std::size_t>(std::max(width, 0)));
      }
    }
  }
  // Zero, negative and unknown totals: an empty bar and no percentage.
  CHECK(cli::progress_bar(5, 0, 12, false) == "[.....]    -");
  CHECK(cli::progress_bar(5, -10, 12, false) == "[.....]    -");
  CHECK(cli::progress_bar(NAN, 10, 12, false) == "[.....]   0%");
  CHECK(cli::progress_bar(5, INFINITY, 12, false) == "[.....]    -");
  CHECK(cli::progress_bar(52, 100, 5, false) == "  52%");  // too narrow for a bar
  CHECK(cli::display_width(cli::progress_bar(52, 100, 5, false)) == 5);
}

TEST_CASE("watch: the screen's lines fit the width", "[watch]") {
  json jobs = example_jobs();
  jobs["jobs"].push_back(json::parse(R"({"id": 123456,
    "kind": "a-kind-with-a-very-long-name-indeed",
    "state": "preempted", "total_steps": 1e11, "steps": 5e10, "steps_per_second": 1e-3,
    "loss": 1e-12})"));
  for (int width = 1; width <= 220; ++width) {
    for (bool colour : {false, true}) {
      for (bool unicode : {false, true}) {
        const std::string screen =
            cli::render_watch(example_cluster(), jobs, example_nodes(), width, colour, unicode);
        for (const auto& line : lines_of(screen)) {
          INFO("width " << width << " colour " << colour << " unicode " << unicode << ": " << line);
          CHECK(cli::display_width(line) <= static_cast<std::size_t>(width));
        }
      }
    }
  }
  // Wide enough, nothing is cut: each job's row ends in its loss.
  const std::string wide =
      cli::render_watch(example_cluster(), example_jobs(), example_nodes(), 120, false);
  CHECK(job_line(wide, 3).substr(job_line(wide, 3).size() - 4) == "0.41");
  CHECK(cli::display_width(job_line(wide, 3)) <= 120);
}

TEST_CASE("watch: ETA is the remaining steps over the rate", "[watch]") {
  CHECK(cli::format_eta(120, 400, 35.2) == "8s");     // 280 / 35.2 = 7.95 s
  CHECK(cli::format_eta(100, 400, 0.5) == "10m00s");  // 300 / 0.5
  CHECK(cli::format_eta(0, 3600, 1) == "1h00m");
  CHECK(cli::format_eta(0, 90000, 1) == "1d01h");
  CHECK(cli::format_eta(500, 400, 3) == "0s");    // past the total
  CHECK(cli::format_eta(-50, 100, 10) == "10s");  // negative steps count as none
  CHECK(cli::format_eta(10, 100, 0) == "-");      // no rate yet
  CHECK(cli::format_eta(10, 100, -1) == "-");
  CHECK(cli::format_eta(10, 0, 5) == "-");  // no total
  CHECK(cli::format_eta(10, -100, 5) == "-");
  CHECK(cli::format_eta(10, 100, NAN) == "-");
  CHECK(cli::format_eta(0, 1e11, 1e-9) == ">999d");
  CHECK(cli::format_duration(0) == "0s");
  CHECK(cli::format_duration(59.4) == "59s");
  CHECK(cli::format_duration(59.6) == "1m00s");
  CHECK(cli::format_duration(3599) == "59m59s");
  CHECK(cli::format_duration(86399) == "23h59m");
  CHECK(cli::format_duration(-1) == "-");
  CHECK(cli::format_duration(INFINITY) == "-");

  const std::string screen =
      cli::render_watch(example_cluster(), example_jobs(), example_nodes(), 120, false);
  CHECK(tail_of(screen, 3).eta == "8s");
  CHECK(tail_of(screen, 5).eta == "1h00m");
  // No rate (queued at 0 steps/s), and ended jobs whatever their rate: "-".
  CHECK(tail_of(screen, 4).eta == "-");
  CHECK(tail_of(screen, 6).rate == "4.0");
  CHECK(tail_of(screen, 6).eta == "-");
  CHECK(tail_of(screen, 7).eta == "-");
  CHECK(tail_of(screen, 8).eta == "1m30s");  // cancelling: still running until the round ends
}

TEST_CASE("watch: the header, every job's state and the nodes are shown", "[watch]") {
  const std::string screen =
      cli::render_watch(example_cluster(), example_jobs(), example_nodes(), 160, false);
  const auto lines = lines_of(screen);
  REQUIRE(!lines.empty());
  CHECK(lines[0] ==
        "tessera  policy max_min_fairness_perf  round 7  uptime 1m15s  nodes 2/3 "
        "alive  jobs: 1 queued, 2 running, 1 cancelling, 1 finished, 1 failed");
  for (const auto& [id, state] : std::vector<std::pair<int, std::string>>{{3, "running"},
                                                                          {4, "queued"},
                                                                          {5, "running"},
                                                                          {6, "finished"},
                                                                          {7, "failed"},
                                                                          {8, "cancelling"}}) {
    INFO(id);
    CHECK(job_line(screen, id).find(" " + state + " ") != std::string::npos);
  }
  CHECK(job_line(screen, 3).find("120/400") != std::string::npos);
  CHECK(tail_of(screen, 3).rate == "35.2");
  CHECK(tail_of(screen, 3).loss == "0.41");
  CHECK(tail_of(screen, 4).loss == "-");  // no loss before a step
  CHECK(screen.find("s1         v100 x4    alive    job 3 x2, job 5 x1 (copy 1), 1 idle") !=
        std::string::npos);
  CHECK(screen.find("s2         k80 x2     alive    job 3 x2 (copy 1)") != std::string::npos);
  CHECK(screen.find("s3         k80 x4     lost     -") != std::string::npos);

  // The counts come from the job list when the cluster has none (an older server).
  json cluster = example_cluster();
  cluster.erase("jobs");
  cluster["shutting_down"] = true;
  const auto counted =
      lines_of(cli::render_watch(cluster, example_jobs(), example_nodes(), 200, false))[0];
  CHECK(counted.find("jobs: 1 queued, 2 running, 1 cancelling, 1 finished, 1 failed  "
                     "SHUTTING DOWN") != std::string::npos);
}

TEST_CASE("watch: colours only when asked, and the server's text cannot drive the terminal",
          "[watch]") {
  json jobs = example_jobs();
  jobs["jobs"][0]["kind"] =
      "evil\x1b[2J\x1b]0;title\x07\nnext\xc2\x9b"
      "31m";
  const std::string plain = cli::render_watch(example_cluster(), jobs, example_nodes(), 120, false);
  CHECK(plain.find('\x1b') == std::string::npos);
  CHECK(plain.find('\x07') == std::string::npos);
  CHECK(plain.find("\xc2\x9b") == std::string::npos);
  CHECK(job_line(plain, 3).find("evil?[2J?]0;tit") != std::string::npos);
  CHECK(lines_of(plain).size() ==
        lines_of(cli::render_watch(example_cluster(), example_jobs(), example_nodes(), 120, false))
            .size());

  const std::string coloured =
      cli::render_watch(example_cluster(), jobs, example_nodes(), 120, true);
  CHECK(job_line(coloured, 3).find("\x1b[32mrunning") != std::string::npos);
  CHECK(coloured.find("\x1b[31mlost") != std::string::npos);
  // Every escape in the coloured screen is one of the view's own colour codes.
  for (auto at = coloured.find('\x1b'); at != std::string::npos;
       at = coloured.find('\x1b', at + 1)) {
    const auto end = coloured.find('m', at);
    REQUIRE(end != std::string::npos);
    const std::string code = coloured.substr(at + 1, end - at - 1);
    INFO(code);
    CHECK((code == "[0" || code == "[1" || code == "[1;31" || code == "[31" || code == "[32" ||
           code == "[33" || code == "[35" || code == "[36"));
  }
}

TEST_CASE("watch: missing or odd fields do not throw", "[watch]") {
  const std::vector<json> docs = {
      json(),
      json::object(),
      json::array(),
      json("text"),
      json(5),
      json(true),
      json::parse(R"({"jobs": 3, "nodes": "x", "policy": 7, "round": "r", "uptime": null})"),
      json::parse(R"([{}])"),
      json::parse(R"({"jobs": [{}], "nodes": [{}]})"),
      json::parse(R"({"jobs": [{"id": "x", "steps": "many", "total_steps": null, "state": 3,
                      "steps_per_second": [], "loss": {}}]})"),
      json::parse(R"({"nodes": [{"assignment": 3}, {"assignment": [{"job": null}, 7]}]})"),
      json::parse(R"({"jobs": {"running": "two", "queued": -1, "failed": 1e300}})")};
  for (const auto& cluster : docs)
    for (const auto& jobs : docs)
      for (const auto& nodes : docs) {
        INFO(cluster.dump() << " " << jobs.dump() << " " << nodes.dump());
        CHECK_NOTHROW(cli::render_watch(cluster, jobs, nodes, 80, true, true));
      }
  // An older server's job with only an id: the row shows what is known.
  const std::string screen =
      cli::render_watch(json::object(), json::parse(R"([{"id": 9}])"), json::array(), 100, false);
  CHECK(lines_of(screen)[0] == "tessera  policy ?  round -  uptime -  nodes ?/? alive  jobs: 1 ?");
  CHECK(job_line(screen, 9).find("?") != std::string::npos);
  CHECK(job_line(screen, 9).find("[") != std::string::npos);
  CHECK(tail_of(screen, 9).rate == "-");
  CHECK(tail_of(screen, 9).eta == "-");
  CHECK(tail_of(screen, 9).loss == "-");
  CHECK(screen.find("(no nodes)") != std::string::npos);
  const std::string empty =
      cli::render_watch(json::object(), json::array(), json::array(), 80, false);
  CHECK(empty.find("jobs: none") != std::string::npos);
  CHECK(empty.find("(no jobs)") != std::string::npos);
}
