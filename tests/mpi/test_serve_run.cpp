// `tessera serve`: a live cluster driven through its control API (docs/api.md) with the real
// HTTP client (runtime/service/http/client.hpp) and the CLI clients.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>

#include "runtime/service/http/client.hpp"
#include "tests/mpi/mpi_support.hpp"

using namespace tessera;
using namespace tessera::test;

namespace {

/// A served cluster of `speeds` (one node process each, --local) in a fresh state dir.
struct served {
  scratch_dir dir;
  std::string state;
  std::unique_ptr<background> proc;
  std::string address, token;

  served(const std::string& name, const std::vector<double>& speeds, const std::string& extra = "",
         const std::string& launch = "")
      : dir(name), state(dir.str() + "/state") {
    const auto cl = dir.write("cluster.toml", cluster_toml(speeds));
    const std::string cmd = launch.empty() ? std::string(TESSERA_BINARY) + " serve --local " +
                                                 std::to_string(speeds.size())
                                           : launch;
    proc = std::make_unique<background>(
        cmd + " --cluster " + cl + " --state-dir " + state + " --round-length 0.5 " + extra,
        dir.str() + "/serve.out");
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(30 * time_scale());
    while (std::chrono::steady_clock::now() < until && address.empty()) {
      std::ifstream a(state + "/address"), t(state + "/token");
      a >> address;
      t >> token;
      if (address.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    INFO(proc->output());
    REQUIRE_FALSE(address.empty());
  }
  /// A client with the token (or `token_override`).
  std::unique_ptr<http::client> client(std::optional<std::string> token_override = {}) const {
    auto a = http::parse_server_address(address);
    REQUIRE(a);
    http::client_options o;
    o.token = token_override ? *token_override : token;
    o.timeout = std::chrono::seconds(10);
    return std::make_unique<http::client>(*a, o);
  }
  json get(const std::string& target) const {
    auto r = client()->get(target);
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
  }
  /// Waits until job `id` is in `state` (or `seconds` pass); its last status.
  json await_state(std::int64_t id, const std::string& state_name, double seconds) const {
    json j;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      j = get("/v1/jobs/" + std::to_string(id));
      if (j["state"] == state_name) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return j;
  }
  /// `tessera <args> --state-dir STATE`.
  command_result cli(const std::string& args) const {
    return run_tessera(args + " --state-dir " + state);
  }
};

}  // namespace

TEST_CASE("serve: submit, status, cancel and shutdown through the API and the CLI", "[serve]") {
  served s("serve_api", {1.0, 0.5});
  struct stat st {};
  REQUIRE(::stat((s.state + "/token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // Submit: TOML through the CLI, JSON through the client.
  const auto jobs = s.dir.write("jobs.toml", jobs_toml(2, 40, 0.01));
  auto sub = s.cli("submit " + jobs);
  INFO(sub.out);
  REQUIRE(sub.code == 0);
  CHECK(sub.out == "0\n1\n");
  auto r = s.client()->post(
      "/v1/jobs", R"({"job": [{"kind": "mlp", "total_steps": 100000, "step_time": 0.01}]})",
      "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 201);
  CHECK(json::parse(r->body)["ids"] == json::array({2}));

  // The first two finish; the long one is cancelled while it runs, at a round boundary.
  CHECK(s.await_state(0, "finished", 30)["steps"] == 40);
  CHECK(s.await_state(1, "finished", 30)["steps"] == 40);
  auto running = s.await_state(2, "running", 30);
  REQUIRE(running["state"] == "running");
  auto c = s.cli("cancel 2");
  INFO(c.out);
  CHECK(c.code == 0);
  auto cancelled = s.await_state(2, "cancelled", 10);
  CHECK(cancelled["state"] == "cancelled");
  CHECK_FALSE(cancelled["checkpoint"].get<std::string>().empty());  // its checkpoint is kept
  CHECK_FALSE(cancelled["placements"].empty());
  auto again = s.client()->post("/v1/jobs/2/cancel", "", "");
  REQUIRE(again);
  CHECK(again->status == 409);

  auto status = s.cli("status --json");
  REQUIRE(status.code == 0);
  auto all = json::parse(status.out);
  REQUIRE(all["jobs"].size() == 3);
  auto nodes = s.get("/v1/nodes");
  REQUIRE(nodes["nodes"].size() == 2);
  CHECK(nodes["nodes"][1]["state"] == "alive");
  CHECK(nodes["nodes"][1]["speed"] == 0.5);
  auto rounds = s.get("/v1/rounds?limit=5");
  CHECK_FALSE(rounds["rounds"].empty());
  CHECK(rounds["rounds"].size() <= 5);
  auto cluster = s.get("/v1/cluster");
  CHECK(cluster["jobs"]["finished"] == 2);
  CHECK(cluster["jobs"]["cancelled"] == 1);

  // Metrics need no token; everything else does.
  auto metrics = s.client(std::string())->get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("tessera_jobs{state=\"finished\"} 2") != std::string::npos);
  CHECK(metrics->body.find("tessera_api_requests_total{method=\"GET\",code=\"200\"}") !=
        std::string::npos);
  auto dash = s.client(std::string())->get("/");
  REQUIRE(dash);
  CHECK(dash->status == 200);
  CHECK(dash->content_type.find("text/html") != std::string::npos);

  auto down = s.cli("shutdown");
  INFO(down.out);
  CHECK(down.code == 0);
  const int code = s.proc->wait(30);
  INFO(s.proc->output());
  CHECK(code == 0);
}

TEST_CASE("serve: bad requests get 4xx with a message and the cluster stays up", "[serve]") {
  served s("serve_bad", {1.0});
  auto call = [&](const std::string& method, const std::string& target, const std::string& body,
                  const std::string& type, std::optional<std::string> token = {}) {
    auto r = s.client(token)->call(method, target, body, type);
    REQUIRE(r);
    return *r;
  };
  CHECK(call("GET", "/v1/jobs", "", "", std::string("wrong")).status == 401);
  CHECK(call("GET", "/v1/jobs", "", "", std::string()).status == 401);
  auto bad_json = call("POST", "/v1/jobs", R"({"job": [{"kind": "mlp", "total_steps": -3}]})",
                       "application/json");
  CHECK(bad_json.status == 400);
  CHECK(bad_json.body.find("job[0]: field 'total_steps'") != std::string::npos);
  auto torn_json = call("POST", "/v1/jobs", R"({"job": [)", "application/json");
  CHECK(torn_json.status == 400);
  CHECK(torn_json.body.find("malformed JSON") != std::string::npos);
  auto bad_toml = call("POST", "/v1/jobs", "[[job]]\nkind = \"mlp\"\ntotal_steps = \"x\"\n",
                       "application/toml");
  CHECK(bad_toml.status == 400);
  CHECK(bad_toml.body.find("request body:3: field 'total_steps'") != std::string::npos);
  auto unknown_kind =
      call("POST", "/v1/jobs", "[[job]]\nkind = \"nope\"\ntotal_steps = 5\n", "application/toml");
  CHECK(unknown_kind.status == 400);
  CHECK(unknown_kind.body.find("unknown job kind") != std::string::npos);
  CHECK(call("POST", "/v1/jobs", std::string((16u << 20) + 10, ' '), "application/toml").status ==
        413);
  CHECK(call("GET", "/v1/jobs/99", "", "").status == 404);
  CHECK(call("POST", "/v1/jobs/99/cancel", "", "").status == 404);
  CHECK(call("GET", "/v1/nothing", "", "").status == 404);
  CHECK(call("GET", "/v1/rounds?limit=0", "", "").status == 400);
  // Query parameters a route does not read are refused: before, each cache-busting query
  // kept an answer of its own (1,100 polls took the scheduler from 59 to 995 MB).
  auto busting = call("GET", "/v1/jobs?x=17", "", "");
  CHECK(busting.status == 400);
  CHECK(busting.body.find("query 'x': GET /v1/jobs takes only 'after', 'limit', 'state'") !=
        std::string::npos);
  CHECK(call("GET", "/v1/cluster?t=1", "", "").status == 400);
  // One submission holds at most 10,000 jobs (100,000 wedged the scheduler for 150 s).
  std::string many = "{\"job\": [";
  for (int i = 0; i < 10001; ++i)
    many += std::string(i ? "," : "") + R"({"kind": "softmax_regression", "total_steps": 5})";
  many += "]}";
  auto too_many = call("POST", "/v1/jobs", many, "application/json");
  CHECK(too_many.status == 413);
  CHECK(too_many.body.find("at most 10000 jobs, this one 10001") != std::string::npos);
  // After all that, the cluster still takes a job and runs it.
  auto ok = call("POST", "/v1/jobs", R"({"kind": "softmax_regression", "total_steps": 20,
                                         "step_time": 0.01})",
                 "application/json");
  REQUIRE(ok.status == 201);
  CHECK(s.await_state(0, "finished", 30)["state"] == "finished");
  auto cli_bad = s.cli("status 99");
  CHECK(cli_bad.code == 2);
  CHECK(cli_bad.out.find("404") != std::string::npos);
  ::kill(s.proc->program(), SIGTERM);  // SIGTERM stops a served cluster as shutdown does
  const int code = s.proc->wait(30);
  INFO(s.proc->output());
  CHECK(code == 0);
}

namespace {

/// The pid of rank 0 of an mpirun job whose command line holds `needle`, or -1.
pid_t rank0_of(const std::string& needle) {
  auto r = run_shell("pgrep -f -- '" + needle + "'");
  std::istringstream pids(r.out);
  pid_t pid = -1;
  while (pids >> pid) {
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
    std::string var;
    while (std::getline(env, var, '\0'))
      if (var == "OMPI_COMM_WORLD_RANK=0") return pid;
  }
  return -1;
}

}  // namespace

TEST_CASE(
    "serve: rank 0 SIGKILLed mid-run under mpirun, then --resume: every job finishes "
    "once, bitwise equal to an uninterrupted run",
    "[serve][resume]") {
  scratch_dir dir("serve_resume");
  const auto cl = dir.write("cluster.toml", cluster_toml({1.0, 0.5, 0.25}));
  const auto jobs = dir.write("jobs.toml", jobs_toml(5, 300, 0.01));
  const std::string state = dir.file("state");
  const std::string common = " --cluster " + cl + " --state-dir " + state +
                             " --round-length 0.5 --checkpoint-dir " + dir.file("ckpt");
  std::set<std::int64_t> ended_before;
  std::map<std::int64_t, json> ended_as;  // as the API showed them before the kill
  {
    background first(
        mpirun(3, false, std::string(TESSERA_BINARY) + " serve") + common + " --jobs " + jobs,
        dir.file("first.out"));
    REQUIRE_FALSE(first.await("control API on http://([0-9.:]+)", 30).empty());
    std::string address, token;
    std::ifstream(state + "/address") >> address;
    std::ifstream(state + "/token") >> token;
    auto a = http::parse_server_address(address);
    REQUIRE(a);
    http::client_options o;
    o.token = token;
    http::client c(*a, o);
    // Kill once some job has ended and some has not.
    json list;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
      auto r = c.get("/v1/jobs");
      REQUIRE(r);
      list = json::parse(r->body)["jobs"];
      int ended = 0;
      for (const auto& j : list) ended += j["state"] == "finished" ? 1 : 0;
      if (ended >= 1 && ended < 4) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const pid_t rank0 = rank0_of("state-dir " + state);
    REQUIRE(rank0 > 0);
    REQUIRE(::kill(rank0, SIGKILL) == 0);
    for (const auto& j : list)
      if (j["state"] == "finished") {
        ended_before.insert(j["id"].get<std::int64_t>());
        ended_as[j["id"].get<std::int64_t>()] = j;
      }
    first.wait(60);
    INFO(first.output());
    REQUIRE_FALSE(ended_before.empty());
    REQUIRE(ended_before.size() < 5);
  }
  background second(mpirun(3, false, std::string(TESSERA_BINARY) + " serve") + common +
                        " --resume --json " + dir.file("sum.json"),
                    dir.file("second.out"));
  REQUIRE_FALSE(second.await("control API on http://([0-9.:]+)", 30).empty());
  CHECK(second.output().find("resumed 5 jobs") != std::string::npos);
  // Wait for every job to end, then stop.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    auto st = run_tessera("status --json --state-dir " + state);
    if (st.code == 0) {
      // The parsed document is kept in a variable: a range-for over a member of the temporary
      // would iterate a destroyed object.
      const json listed = json::parse(st.out);
      int ended = 0;
      for (const auto& j : listed["jobs"]) ended += j["state"] == "finished" ? 1 : 0;
      if (ended == 5) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(run_tessera("shutdown --state-dir " + state).code == 0);
  const int code = second.wait(60);
  INFO(second.output());
  REQUIRE(code == 0);
  const auto sum = load_json(dir.file("sum.json"));
  REQUIRE(sum["jobs"].size() == 5);  // none missing, none twice
  std::set<std::int64_t> ids;
  for (const auto& j : sum["jobs"]) {
    ids.insert(j["id"].get<std::int64_t>());
    CHECK(j["state"] == "finished");
    CHECK(j["steps"] == 300);
    // A job that had ended before the kill never ran again, and keeps what it ended with
    // (before: JCT -1, loss 0 after a resume).
    if (auto was = ended_as.find(j["id"].get<std::int64_t>()); was != ended_as.end()) {
      CHECK(j["jct"].get<double>() == Approx(was->second["jct"].get<double>()));
      CHECK(j["jct"].get<double>() > 0);
      CHECK(j["finish"].get<double>() == Approx(was->second["finish"].get<double>()));
      CHECK(j["loss"].get<double>() == Approx(was->second["loss"].get<double>()));
      CHECK(j["rounds"] == was->second["rounds"]);
    }
  }
  CHECK(ids.size() == 5);
  check_bitwise(sum);
}

TEST_CASE("serve: jobs not ended past --max-open-jobs are refused 429", "[serve][bounds]") {
  served s("serve_open_cap", {1.0}, "--max-open-jobs 3");
  auto post = [&](int jobs) {
    std::string body = "{\"job\": [";
    for (int i = 0; i < jobs; ++i)
      body += std::string(i ? "," : "") +
              R"({"kind": "softmax_regression", "total_steps": 100000, "step_time": 0.01})";
    body += "]}";
    auto r = s.client()->call("POST", "/v1/jobs", body, "application/json");
    REQUIRE(r);
    return *r;
  };
  CHECK(post(2).status == 201);
  auto over = post(2);
  CHECK(over.status == 429);
  CHECK(over.body.find("holds 2 jobs not ended, at most 3") != std::string::npos);
  CHECK(post(1).status == 201);
  CHECK(post(1).status == 429);
}

TEST_CASE("serve: a served cluster's nodes live as long as the cluster, past any batch time-out",
          "[serve][lifetime]") {
  // A batch run's node gives up --timeout + --connect-timeout + 30 s after it starts (36 s
  // here); a served node must not: before the fix both nodes quit at 36 s and rank 0 ran alone.
  served s("serve_lifetime", {1.0, 1.0}, "--timeout 1 --connect-timeout 5");
  std::this_thread::sleep_for(std::chrono::seconds(40));
  const auto nodes = s.get("/v1/nodes")["nodes"];
  REQUIRE(nodes.size() == 2);
  for (const auto& n : nodes) CHECK(n["state"] == "alive");
  CHECK_THAT(s.proc->output(), !Catch::Contains("gave up"));
}

TEST_CASE("serve: a --local node process that dies is started again and rejoins",
          "[serve][keeper]") {
  // fork/exec: an MPI world cannot take a new rank (there a new node joins with `tessera node
  // --join`); the fork launcher's processes are this process's children, started again.
  served s("serve_keeper", {1.0, 1.0, 1.0}, "--launcher fork");
  // Killed once registered: a node that dies before it registered comes back as a plain
  // registration, not a join.
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(60 * time_scale());
  while (s.get("/v1/nodes")["nodes"][2]["state"] != "alive" &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t pid = find_process_all({"--state-dir " + s.state + " ", "--rank 2 --scheduler"});
  REQUIRE(pid > 0);
  ::kill(pid, SIGKILL);
  const bool ended =
      !s.proc->await("node rank 2 \\(pid [0-9]+\\) ended \\((signal 9)\\)", 30).empty();
  const bool joined = !s.proc->await("node rank 2 \\([^)]*\\) (joined)", 60).empty();
  INFO(s.proc->output());
  CHECK(ended);
  CHECK(joined);
  const pid_t again = find_process_all({"--state-dir " + s.state + " ", "--rank 2 --scheduler"});
  CHECK(again > 0);
  CHECK(again != pid);
  const auto nodes = s.get("/v1/nodes")["nodes"];
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[2]["state"] == "alive");
}

TEST_CASE("serve: --local node processes end when rank 0 is SIGKILLed", "[serve][keeper]") {
  // A served node never gives up on registering, so one whose rank 0 died must end by other
  // means: the loss of its link to the scheduler ends it, and PR_SET_PDEATHSIG too, should the
  // link's loss go unnoticed (this test passes with either alone).
  served s("serve_orphans", {1.0, 1.0}, "--launcher fork");
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(60 * time_scale());
  while (s.get("/v1/nodes")["nodes"][1]["state"] != "alive" &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const pid_t node = find_process_all({"--state-dir " + s.state + " ", "--rank 1 --scheduler"});
  REQUIRE(node > 0);
  REQUIRE(::kill(s.proc->program(), SIGKILL) == 0);
  s.proc->wait(30);
  bool gone = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(30 * time_scale());
  while (!gone && std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(node) + "/stat");
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(gone);
}

TEST_CASE("serve: the cluster secret and the API token as an orchestrator hands them over",
          "[serve][secrets]") {
  // A Kubernetes Secret mounted with subPath: existing files, mode 0400, that serve must read
  // as they are (--secret-from, --token-file) and a joining node reads too (--secret-file).
  scratch_dir keys("serve_secrets_keys");
  const auto secret = keys.file("secret"), token_file = keys.file("token");
  auto hex32 = [](const std::string& byte) {
    std::string h;
    for (int i = 0; i < 32; ++i) h += byte;
    return h;
  };
  for (const auto& [path, byte] : {std::pair{secret, "07"}, std::pair{token_file, "09"}}) {
    std::ofstream(path) << hex32(byte) << '\n';
    REQUIRE(::chmod(path.c_str(), 0400) == 0);
  }
  // serve --local 1 on a 2-server cluster: the second server joins.
  served s("serve_secrets", {1.0, 1.0},
           "--secret-from " + secret + " --token-file " + token_file + " --min-nodes 1",
           std::string(TESSERA_BINARY) + " serve --local 1 --launcher fork");
  const auto cl = s.dir.str() + "/cluster.toml";
  struct stat st {};
  CHECK(::stat((s.state + "/token").c_str(), &st) != 0);  // nothing made beside the given one
  s.token = hex32("09");
  auto ok = s.client()->get("/v1/nodes");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  auto wrong = s.client(hex32("0a"))->get("/v1/nodes");
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
  std::string scheduler;
  std::ifstream(s.state + "/scheduler") >> scheduler;
  REQUIRE_FALSE(scheduler.empty());
  background joiner(std::string(TESSERA_BINARY) + " node --join " + scheduler +
                        " --server node-1 --cluster " + cl + " --secret-file " + secret,
                    s.dir.file("join.out"));
  // Registered (a join once jobs run; before that, a late registration): alive in the list.
  json nodes;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(30 * time_scale());
  while (std::chrono::steady_clock::now() < until) {
    nodes = s.get("/v1/nodes")["nodes"];
    if (nodes.size() == 2 && nodes[1]["state"] == "alive") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(s.proc->output());
  INFO(joiner.output());
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[1]["state"] == "alive");
  CHECK_THAT(s.proc->output(), Catch::Contains("(token in " + token_file + ")"));
}

TEST_CASE("serve: the job list pages in id order, a state filter pages too", "[serve][pages]") {
  served s("serve_pages", {1.0});
  // Given ids out of order, then automatic ones after the largest: 3, 7, 9, 10, 11, 12, 13.
  const std::string job =
      R"("kind": "softmax_regression", "total_steps": 100000, "step_time": 0.01)";
  auto post = [&](const std::string& body) {
    auto r = s.client()->post("/v1/jobs", body, "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 201);
  };
  post("{\"job\": [{\"id\": 9, " + job + "}, {\"id\": 3, " + job + "}, {\"id\": 7, " + job + "}]}");
  post("{\"job\": [{" + job + "}, {" + job + "}, {" + job + "}, {" + job + "}]}");
  for (std::int64_t id : {3, 10, 12}) REQUIRE(s.cli("cancel " + std::to_string(id)).code == 0);
  for (std::int64_t id : {3, 10, 12})
    REQUIRE(s.await_state(id, "cancelled", 20)["state"] == "cancelled");

  // Every page holds at most `limit` jobs in id order, and the pages together are the list.
  auto pages = [&](const std::string& query, std::size_t limit) {
    std::vector<std::int64_t> ids;
    std::string after;
    for (int page = 0; page < 20; ++page) {
      auto p = s.get("/v1/jobs?limit=" + std::to_string(limit) + query + after);
      REQUIRE(p["jobs"].size() <= limit);
      for (const auto& j : p["jobs"]) ids.push_back(j["id"].get<std::int64_t>());
      if (p["next"].is_null()) return ids;
      CHECK(p["next"] == ids.back());
      after = "&after=" + std::to_string(p["next"].get<std::int64_t>());
    }
    FAIL("the pages did not end");
    return ids;
  };
  CHECK(pages("", 3) == std::vector<std::int64_t>{3, 7, 9, 10, 11, 12, 13});
  CHECK(pages("", 7) == std::vector<std::int64_t>{3, 7, 9, 10, 11, 12, 13});
  CHECK(pages("", 1000) == std::vector<std::int64_t>{3, 7, 9, 10, 11, 12, 13});
  CHECK(pages("&state=cancelled", 2) == std::vector<std::int64_t>{3, 10, 12});
  CHECK(s.get("/v1/jobs?after=11")["jobs"].size() == 2);  // limit defaults to 100
  CHECK(s.get("/v1/jobs?after=13")["jobs"].empty());
  // Without limit or after, the whole list in submission order, as before.
  auto all = s.get("/v1/jobs");
  REQUIRE(all["jobs"].size() == 7);
  CHECK(all["jobs"][0]["id"] == 9);
  CHECK_FALSE(all.contains("next"));
  for (const std::string bad : {"limit=0", "limit=1001", "limit=x", "after=-1", "after=1.5"}) {
    INFO(bad);
    auto b = s.client()->get("/v1/jobs?" + bad);
    REQUIRE(b);
    CHECK(b->status == 400);
  }
}
