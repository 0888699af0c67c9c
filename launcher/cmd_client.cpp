/// @file cmd_client.cpp
/// The control API's command-line clients (docs/api.md): `tessera submit`, `status`,
/// `cancel`, `nodes`, `watch` and `shutdown`. Each finds the server from --server, else
/// $TESSERA_SERVER, else STATE_DIR/address (--state-dir or $TESSERA_STATE_DIR), and the token
/// from --token-file, else $TESSERA_TOKEN, else STATE_DIR/token.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "launcher/watch_view.hpp"
#include "runtime/service/http/client.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// Where the server is and how to prove the token.
struct client_settings {
  std::string server, state_dir, token_file;
  double timeout = 10;
  bool json = false;
};

void add_client_options(po::options_description& d, client_settings& c) {
  d.add_options()("server", po::value(&c.server),
                  "HOST:PORT of the cluster's API (default: "
                  "$TESSERA_SERVER, else STATE_DIR/address)")(
      "state-dir", po::value(&c.state_dir),
      "the cluster's --state-dir (default: "
      "$TESSERA_STATE_DIR): its address and token files")("token-file", po::value(&c.token_file),
                                                          "file holding the API token (default: "
                                                          "$TESSERA_TOKEN, else STATE_DIR/token)")(
      "timeout", po::value(&c.timeout)->default_value(10.0), "seconds to wait for an answer")(
      "help,h", "show this help");
}

/// The first word of a file (an address or a token), or an error naming it.
result<std::string> first_word(const std::string& path, const char* what) {
  std::ifstream f(path);
  std::string w;
  if (!(f >> w))
    return error{error_kind::invalid_input,
                 "cannot read the " + std::string(what) + " from " + path};
  return w;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// A client of the server the settings name.
result<std::unique_ptr<http::client>> connect(client_settings c) {
  if (c.state_dir.empty()) c.state_dir = env("TESSERA_STATE_DIR");
  std::string where = !c.server.empty() ? c.server : env("TESSERA_SERVER");
  if (where.empty()) {
    if (c.state_dir.empty())
      return error{error_kind::invalid_input,
                   "no server: give --server HOST:PORT, --state-dir DIR, or set "
                   "TESSERA_SERVER or TESSERA_STATE_DIR"};
    auto w = first_word(c.state_dir + "/address", "server address");
    if (!w) return w.err();
    where = *w;
  }
  auto addr = http::parse_server_address(where);
  if (!addr) return addr.err();
  http::client_options opt;
  if (!c.token_file.empty()) {
    auto t = first_word(c.token_file, "token");
    if (!t) return t.err();
    opt.token = *t;
  } else if (!env("TESSERA_TOKEN").empty()) {
    opt.token = env("TESSERA_TOKEN");
  } else if (!c.state_dir.empty()) {
    auto t = first_word(c.state_dir + "/token", "token");
    if (!t) return t.err();
    opt.token = *t;
  }
  opt.timeout = std::chrono::milliseconds(static_cast<long>(c.timeout * 1000));
  return std::make_unique<http::client>(*addr, opt);
}

/// The answer's JSON, or an error carrying the server's message (exit 2 for a 4xx).
result<nlohmann::json> answer_json(result<http::reply> r) {
  if (!r) return r.err();
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status >= 400) {
    const std::string msg = j.is_object() && j.contains("error") && j["error"].is_string()
                                ? j["error"].get<std::string>()
                                : r->body;
    return error{r->status < 500 ? error_kind::invalid_input : error_kind::io,
                 "the server answered " + std::to_string(r->status) + ": " + msg};
  }
  if (j.is_discarded()) return error{error_kind::io, "the server's answer is not JSON"};
  return j;
}

/// Parses a client command's options (positional ones into `pos`); -1 to go on.
int parse_client(const std::vector<std::string>& args, po::options_description& d,
                 const char* usage, std::vector<std::string>& pos, int max_pos) {
  po::options_description all;
  all.add(d);
  all.add_options()("args", po::value(&pos)->composing(), "");
  po::positional_options_description p;
  p.add("args", max_pos);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(p).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "tessera: " << e.what() << '\n' << usage << '\n';
    return exit_code::bad_input;
  }
  if (vm.count("help")) {
    std::cout << usage << '\n' << d;
    return exit_code::ok;
  }
  return -1;
}

/// A field of a server's answer as text to print: what a program wrote (its stderr's tail in
/// `failure`) may hold terminal escapes, so control characters are shown escaped.
std::string text_of(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return "-";
  return printable(j[key].is_string() ? j[key].get<std::string>() : j[key].dump());
}

void print_jobs(const nlohmann::json& jobs) {
  std::cout << std::left << std::setw(6) << "ID" << std::setw(20) << "KIND" << std::setw(12)
            << "STATE" << std::setw(22) << "STEPS" << std::setw(10) << "STEPS/S"
            << "LOSS\n";
  for (const auto& j : jobs) {
    std::ostringstream steps;
    steps << text_of(j, "steps") << "/" << text_of(j, "total_steps");
    std::ostringstream rate;
    rate << std::fixed << std::setprecision(1) << j.value("steps_per_second", 0.0);
    std::cout << std::left << std::setw(6) << text_of(j, "id") << std::setw(20)
              << text_of(j, "kind").substr(0, 19) << std::setw(12) << text_of(j, "state")
              << std::setw(22) << steps.str() << std::setw(10) << rate.str() << j.value("loss", 0.0)
              << '\n';
  }
}

}  // namespace

int cmd_submit(const std::vector<std::string>& args) {
  client_settings c;
  po::options_description d("tessera submit options");
  add_client_options(d, c);
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera submit FILE [--server HOST:PORT | --state-dir DIR]\n"
      "Submits a job set (TOML as --jobs files, or JSON of the same shape: *.json) to a\n"
      "running cluster; prints the new jobs' ids. Program workdirs are relative to FILE.";
  if (int rc = parse_client(args, d, usage, pos, 1); rc >= 0) return rc;
  if (pos.size() != 1) {
    std::cerr << "tessera: submit takes one FILE\n" << usage << '\n';
    return exit_code::bad_input;
  }
  std::ifstream f(pos[0], std::ios::binary);
  if (!f) return report(error{error_kind::invalid_input, pos[0] + ": cannot open"});
  std::stringstream body;
  body << f.rdbuf();
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto dir = fs::absolute(fs::path(pos[0]), ec).parent_path().string();
  const bool json = fs::path(pos[0]).extension() == ".json";
  std::string target = "/v1/jobs?base_dir=";
  for (char ch : dir) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) || ch == '/' || ch == '-' || ch == '_' || ch == '.') {
      target += ch;
    } else {
      static const char hex[] = "0123456789ABCDEF";
      target += '%';
      target += hex[u >> 4];
      target += hex[u & 15];
    }
  }
  auto j =
      answer_json((*cl)->post(target, body.str(), json ? "application/json" : "application/toml"));
  if (!j) return report(j.err());
  for (const auto& id : (*j)["ids"]) std::cout << id.get<std::int64_t>() << '\n';
  return exit_code::ok;
}

int cmd_status(const std::vector<std::string>& args) {
  client_settings c;
  po::options_description d("tessera status options");
  add_client_options(d, c);
  d.add_options()("json", po::bool_switch(&c.json), "print the server's JSON");
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera status [ID] [--json] [--server HOST:PORT | --state-dir DIR]\n"
      "Every job's state, or one job's with its placement history.";
  if (int rc = parse_client(args, d, usage, pos, 1); rc >= 0) return rc;
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  auto j = answer_json((*cl)->get(pos.empty() ? "/v1/jobs" : "/v1/jobs/" + pos[0]));
  if (!j) return report(j.err());
  if (c.json) {
    std::cout << j->dump(2) << '\n';
    return exit_code::ok;
  }
  if (pos.empty()) {
    print_jobs((*j)["jobs"]);
    return exit_code::ok;
  }
  print_jobs(nlohmann::json::array({*j}));
  for (const auto& p : (*j)["placements"])
    std::cout << "  round " << text_of(p, "round") << ": copy " << text_of(p, "copy") << " on node "
              << text_of(p, "rank") << " (" << text_of(p, "gpus") << " GPUs)\n";
  if (!text_of(*j, "failure").empty() && text_of(*j, "failure") != "-")
    std::cout << "  failure: " << text_of(*j, "failure") << '\n';
  return exit_code::ok;
}

int cmd_cancel(const std::vector<std::string>& args) {
  client_settings c;
  po::options_description d("tessera cancel options");
  add_client_options(d, c);
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera cancel ID [--server HOST:PORT | --state-dir DIR]\n"
      "Cancels a job at the next round boundary; its checkpoint is kept.";
  if (int rc = parse_client(args, d, usage, pos, 1); rc >= 0) return rc;
  if (pos.size() != 1) {
    std::cerr << "tessera: cancel takes one job ID\n" << usage << '\n';
    return exit_code::bad_input;
  }
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  auto j = answer_json((*cl)->post("/v1/jobs/" + pos[0] + "/cancel", "", ""));
  if (!j) return report(j.err());
  std::cout << "job " << text_of(*j, "id") << ": " << text_of(*j, "state") << '\n';
  return exit_code::ok;
}

int cmd_nodes(const std::vector<std::string>& args) {
  client_settings c;
  po::options_description d("tessera nodes options");
  add_client_options(d, c);
  d.add_options()("json", po::bool_switch(&c.json), "print the server's JSON");
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera nodes [--json] [--server HOST:PORT | --state-dir DIR]\n"
      "The cluster's nodes: state, GPU type, speed, current assignment.";
  if (int rc = parse_client(args, d, usage, pos, 0); rc >= 0) return rc;
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  auto j = answer_json((*cl)->get("/v1/nodes"));
  if (!j) return report(j.err());
  if (c.json) {
    std::cout << j->dump(2) << '\n';
    return exit_code::ok;
  }
  std::cout << std::left << std::setw(6) << "RANK" << std::setw(14) << "NAME" << std::setw(10)
            << "TYPE" << std::setw(6) << "GPUS" << std::setw(8) << "SPEED" << std::setw(9)
            << "STATE"
            << "ASSIGNMENT\n";
  for (const auto& n : (*j)["nodes"]) {
    std::string as;
    for (const auto& a : n["assignment"])
      as += (as.empty() ? "" : ", ") + std::string("job ") + text_of(a, "job") + "." +
            text_of(a, "copy") + " x" + text_of(a, "gpus");
    std::cout << std::left << std::setw(6) << text_of(n, "rank") << std::setw(14)
              << text_of(n, "name") << std::setw(10) << text_of(n, "gpu_type") << std::setw(6)
              << text_of(n, "gpus") << std::setw(8) << text_of(n, "speed") << std::setw(9)
              << text_of(n, "state") << (as.empty() ? "-" : as) << '\n';
  }
  return exit_code::ok;
}

int cmd_watch(const std::vector<std::string>& args) {
  client_settings c;
  double interval = 1;
  int count = 0;
  po::options_description d("tessera watch options");
  add_client_options(d, c);
  d.add_options()("interval", po::value(&interval)->default_value(1.0), "seconds between screens")(
      "count", po::value(&count)->default_value(0),
      "stop after this many screens (0: until interrupted or the cluster stops)");
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera watch [--interval S] [--server HOST:PORT | --state-dir DIR]\n"
      "A live table of the cluster's jobs (progress bars) and nodes.";
  if (int rc = parse_client(args, d, usage, pos, 0); rc >= 0) return rc;
  if (auto st = check_option("--interval", interval, 0.05, 3600, "seconds"); !st)
    return report(st.err());
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  int width = 100;
  if (const char* cols = std::getenv("COLUMNS")) width = std::max(40, std::atoi(cols));
  for (int shown = 0; count == 0 || shown < count; ++shown) {
    auto cluster = answer_json((*cl)->get("/v1/cluster"));
    if (!cluster) {
      if (shown > 0) {
        std::cout << "tessera: the cluster is gone (" << cluster.err().message << ")\n";
        return exit_code::ok;
      }
      return report(cluster.err());
    }
    auto jobs = answer_json((*cl)->get("/v1/jobs"));
    auto nodes = answer_json((*cl)->get("/v1/nodes"));
    if (!jobs || !nodes) return report(!jobs ? jobs.err() : nodes.err());
    if (tty) std::cout << "\x1b[H\x1b[2J";
    std::cout << render_watch(*cluster, *jobs, *nodes, width, tty, tty) << std::flush;
    if (count == 0 || shown + 1 < count)
      std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>(interval * 1000)));
  }
  return exit_code::ok;
}

int cmd_shutdown(const std::vector<std::string>& args) {
  client_settings c;
  po::options_description d("tessera shutdown options");
  add_client_options(d, c);
  std::vector<std::string> pos;
  const char* usage =
      "usage: tessera shutdown [--server HOST:PORT | --state-dir DIR]\n"
      "Stops the cluster after the round in flight (checkpoints written).";
  if (int rc = parse_client(args, d, usage, pos, 0); rc >= 0) return rc;
  auto cl = connect(c);
  if (!cl) return report(cl.err());
  auto j = answer_json((*cl)->post("/v1/shutdown", "", ""));
  if (!j) return report(j.err());
  std::cout << "the cluster stops after the round in flight\n";
  return exit_code::ok;
}

}  // namespace tessera::cli
