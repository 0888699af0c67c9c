/// @file cmd_run.cpp
/// `tessera run`: its command line, handed to the actor runtime (actors/run.hpp).

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <ostream>

#include <boost/program_options.hpp>
#include <unistd.h>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "actors/service.hpp"
#include "launcher/run_command.hpp"
#include "launcher/run_report.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/slurm_cluster.hpp"
#include "runtime/node/gpu/discovery.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// Everything `tessera run` reads from its command line.
struct run_options {
  actors::run_settings s;
  std::vector<std::string> policy_args;
  int local = 0;                  ///< --local; 0 when not given
  std::string launcher = "auto";  ///< how --local starts its processes: auto, mpirun, fork
  int rank = -1;                  ///< internal: this process is node <rank> of a --local run
  std::string scheduler;          ///< internal: host:port of that run's scheduler
  std::string join;               ///< --join host:port: this process is a node joining a cluster
  std::string server;             ///< --server: which server of the cluster file it is
  std::string secret_from;        ///< --secret-from: the scheduler's secret, an existing file
};

const char* const usage =
    "usage: tessera run --cluster C.toml --jobs J.toml [--policy P] [--local N]\n"
    "       mpirun -np N tessera run --cluster C.toml --jobs J.toml [--policy P]\n"
    "       tessera run --cluster C.toml --join HOST:PORT --server NAME --secret-file F\n"
    "         (a node joining a running cluster; `tessera node` is the same)";

const char* const serve_usage =
    "usage: tessera serve --cluster C.toml --state-dir DIR [--listen HOST:PORT] [--local N]\n"
    "       mpirun -np N tessera serve --cluster C.toml --state-dir DIR [--listen HOST:PORT]\n"
    "A cluster that stays up: jobs are submitted, watched and cancelled through its control\n"
    "API (`tessera submit`, `status`, `cancel`, `nodes`, `watch`, the dashboard; docs/api.md)\n"
    "until `tessera shutdown`, SIGTERM or SIGINT: the round in flight ends, its checkpoints\n"
    "are written, every process exits 0. --jobs, when given, is submitted at the start.";

void add_options(po::options_description& d, run_options& o) {
  auto& s = o.s;
  d.add_options()("cluster", po::value(&s.cluster_file)->required(),
                  "cluster TOML file; one node per server")(
      "jobs", po::value(&s.jobs_file),
      "job-set TOML file (each [[job]] has a kind); required but for a joining node")(
      "policy", po::value(&s.policy)->default_value(s.policy), "policy (see `tessera policies`)")(
      "policy-arg", po::value(&o.policy_args)->composing(),
      "policy option key=value (repeatable; value a number, or true/false)")(
      "round-length", po::value(&s.round_length)->default_value(s.serve ? 30.0 : 1.0),
      s.serve ? "seconds per round: a standing cluster's rounds are long, so placements change "
                "rarely and a program's process stays warm across them"
              : "seconds per round")(
      "local", po::value(&o.local)->default_value(0),
      "start this many node processes here (fork/exec), no mpirun needed")(
      "launcher", po::value(&o.launcher)->default_value(o.launcher),
      "how --local starts its node processes: mpirun (under `tessera mpirun` on this host: "
      "forked copies and copies spread over nodes work as under mpirun), fork (fork/exec: no "
      "aggregator between the processes, so jobs are not forked and a spread copy runs on one "
      "node), auto (mpirun when it is on PATH, else fork)")(
      "checkpoint-dir", po::value(&s.checkpoint_dir),
      "shared directory for job checkpoints (default: a new one under the temp directory)")(
      "json", po::value(&s.json_out), "write the summary as JSON to this file")(
      "timeline", po::value(&s.timeline_file),
      "write who ran where in each round (JSON Lines, runtime/core/timeline.hpp) to this file")(
      "connect-timeout", po::value(&s.connect_timeout)->default_value(20.0),
      "seconds to wait for nodes to register, counted from the last node that made progress "
      "(a slow start that keeps moving is waited for)")(
      "min-nodes", po::value(&s.min_nodes)->default_value(0),
      "when the registration wait ends with nodes missing, start with those present if at "
      "least this many (0: every node of the cluster file is needed); the others may join "
      "later")("max-open-jobs", po::value(&s.max_open_jobs)->default_value(100000),
               "serve: jobs not ended the cluster holds at most; a submission past it gets 429 "
               "(one submission holds at most 10000 jobs, 413 beyond)")(
      "timeout", po::value(&s.timeout)->default_value(600.0),
      "give up when the run has not ended after this many seconds")(
      "heartbeat-interval", po::value(&s.heartbeat_interval)->default_value(0.25),
      "seconds between heartbeats (node -> scheduler, and CAF's own)")(
      "heartbeat-timeout", po::value(&s.heartbeat_timeout)->default_value(3.0),
      "seconds of silence a node is always allowed: the floor of its loss bound, which grows "
      "with the spread of its heartbeats' gaps on a busy host")(
      "heartbeat-ceiling", po::value(&s.heartbeat_ceiling)->default_value(0.0),
      "seconds of silence after which a node is always lost, however uneven its heartbeats "
      "(0: ten times --heartbeat-timeout, at least 20 s)")(
      "secret-file", po::value(&s.secret_file),
      "the cluster secret: the scheduler writes it to this new file (mode 0600) for nodes "
      "that join later; a joining node reads it")(
      "secret-from", po::value(&o.secret_from),
      "the cluster secret as it is: read from this existing file (64 hex digits, mode 0600 or "
      "0400, owned by you; a Kubernetes Secret mounted with subPath) instead of made anew; "
      "joining nodes read the same file with --secret-file")(
      "token-file", po::value(&s.token_file),
      "serve: the API token as it is, read from this existing file (the rules of "
      "--secret-from) instead of STATE_DIR/token, which is made at the first start")(
      "bind", po::value(&s.bind),
      "address the scheduler listens on (default: loopback when every node runs on this host)")(
      "port", po::value(&s.port)->default_value(0), "port it listens on (0: any free port)")(
      "state-dir", po::value(&s.state_dir),
      "the control API's state: token, address, journal (required by `tessera serve`; with "
      "`run --listen`, default: the checkpoint directory)")(
      "listen", po::value(&s.listen),
      "HOST:PORT of the control API (serve: default 127.0.0.1:0, any free port, written to "
      "STATE_DIR/address; run: no API unless given)")(
      "repair-journal", po::bool_switch(&s.repair_journal),
      "serve --resume: a journal whose end is damaged (a corrupt record) is opened by dropping "
      "that record and everything after it, reported, instead of refused")(
      "allow-host", po::value(&s.allow_hosts)->composing(),
      "a DNS name clients reach the control API by (repeatable); requests naming another host "
      "are refused 421 (DNS rebinding); localhost, this host's name and IP addresses always "
      "pass")(
      "resume", po::bool_switch(&s.resume),
      "serve: carry on with the jobs of STATE_DIR/journal (after the scheduler's process was "
      "killed): queued and running jobs resume from their last checkpoints")(
      "status-file", po::value(&s.status_file),
      "write the run's exit code to this file when it ends (what `tessera mpirun` reads)")(
      "join", po::value(&o.join), "host:port of a running cluster's scheduler to join as a node")(
      "server", po::value(&o.server), "with --join: the server of the cluster file this node is")(
      "verbose,v", po::bool_switch(&s.verbose), "one line per round on stderr")(
      "quiet,q", po::bool_switch(&s.quiet), "no summary table on stdout")("help,h",
                                                                          "show this help");
}

void add_internal_options(po::options_description& d, run_options& o) {
  d.add_options()("rank", po::value(&o.rank),
                  "internal: this process is node <rank> of a --local run")(
      "scheduler", po::value(&o.scheduler), "internal: host:port of the scheduler");
}

/// Where messages about the command line go. Under mpirun every rank reads the same command
/// line, so only rank 0 reports what is wrong with it; the others stay silent.
std::ostream& problems() {
  static std::ostream silent(nullptr);
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::string(r) == "0" ? std::cerr : silent;
  return std::cerr;
}

/// Checks the numbers of the command line (bounds: launcher/common.hpp).
status check_numbers(const run_options& o) {
  namespace b = option_bounds;
  const auto& s = o.s;
  for (const auto& st :
       {check_option("--round-length", s.round_length, b::min_run_round, b::max_run_round,
                     "seconds"),
        check_option("--connect-timeout", s.connect_timeout, b::min_connect_timeout,
                     b::max_connect_timeout, "seconds"),
        check_option("--timeout", s.timeout, b::min_run_timeout, b::max_run_timeout, "seconds"),
        check_option("--heartbeat-interval", s.heartbeat_interval, b::min_heartbeat,
                     b::max_heartbeat, "seconds"),
        check_option("--heartbeat-timeout", s.heartbeat_timeout, b::min_heartbeat,
                     b::max_heartbeat_timeout, "seconds"),
        check_option("--heartbeat-ceiling", s.heartbeat_ceiling, 0, b::max_heartbeat_timeout,
                     "seconds, 0 for the default"),
        check_option("--local", o.local, 0, b::max_local_nodes, "node processes"),
        check_option("--min-nodes", s.min_nodes, 0, b::max_local_nodes, "node processes"),
        check_option("--max-open-jobs", s.max_open_jobs, 1, 1e7, "jobs"),
        check_option("--port", s.port, 0, 65535, "a TCP port, 0 for any free one")})
    if (!st) return st;
  if (!(s.heartbeat_timeout > s.heartbeat_interval))
    return error{error_kind::invalid_input,
                 "--heartbeat-timeout must be above --heartbeat-interval"};
  if (s.heartbeat_ceiling > 0 && s.heartbeat_ceiling < s.heartbeat_timeout)
    return error{error_kind::invalid_input,
                 "--heartbeat-ceiling must be 0 or at least --heartbeat-timeout"};
  return {};
}

/// Checks the numbers, parses the policy options and prepares the checkpoint directory.
/// The GPU discovery setting from this process's environment, its edge: TESSERA_GPU_DISCOVERY
/// (auto, off, fake:<devices>; runtime/node/gpu/discovery.hpp) and CUDA_VISIBLE_DEVICES.
result<gpu::discovery> gpu_discovery_from_environment() {
  const char* v = std::getenv("TESSERA_GPU_DISCOVERY");
  auto d = gpu::parse_discovery(v ? v : "", "TESSERA_GPU_DISCOVERY");
  if (!d) return d;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) d->visible = visible;
  return d;
}

status finish_settings(run_options& o) {
  auto& s = o.s;
  if (auto st = check_numbers(o); !st) return st;
  auto gpus = gpu_discovery_from_environment();
  if (!gpus) return gpus.err();
  s.gpu = std::move(*gpus);
  auto pa = parse_policy_args(o.policy_args);
  if (!pa) return pa.err();
  s.policy_args = std::move(*pa);
  if (!o.secret_from.empty()) {
    if (!s.secret_file.empty())
      return error{error_kind::invalid_input,
                   "--secret-from reads an existing secret, --secret-file makes a new one: give "
                   "one of them"};
    if (o.rank >= 0 || !o.join.empty())
      return error{error_kind::invalid_input,
                   "a joining node reads the cluster's secret with --secret-file"};
    s.secret_file = o.secret_from;
    s.secret_exists = true;
  }
  if (o.rank >= 0 || !o.join.empty()) return {};  // a node uses its scheduler's directory
  if (!s.token_file.empty() && !s.serve && s.listen.empty())
    return error{error_kind::invalid_input,
                 "--token-file is the control API's token: it goes with serve or --listen"};
  if (s.jobs_file.empty() && !s.serve)
    return error{error_kind::invalid_input, "the option '--jobs' is required but missing"};
  if (s.resume && !s.jobs_file.empty())
    return error{error_kind::invalid_input,
                 "--resume takes the jobs of the journal; submit new ones once it runs "
                 "(--jobs would add the file's jobs again)"};
  if (s.resume && !s.serve)
    return error{error_kind::invalid_input, "--resume is an option of tessera serve"};
  if (s.repair_journal && !s.resume)
    return error{error_kind::invalid_input, "--repair-journal goes with serve --resume"};
  if (s.serve && s.state_dir.empty())
    return error{error_kind::invalid_input, "the option '--state-dir' is required but missing"};
  if (s.serve)
    if (auto st = actors::prepare_state_dir(s.state_dir); !st) return st;  // 0700 when new
  if (s.checkpoint_dir.empty())
    s.checkpoint_dir = s.serve ? s.state_dir + "/checkpoints"
                               : (std::filesystem::temp_directory_path() /
                                  ("tessera-run-" + std::to_string(::getpid())))
                                     .string();
  if (!s.listen.empty() && s.state_dir.empty()) s.state_dir = s.checkpoint_dir;
  std::error_code ec;
  std::filesystem::create_directories(s.checkpoint_dir, ec);
  if (ec)
    return error{error_kind::invalid_input,
                 "cannot create --checkpoint-dir " + s.checkpoint_dir + ": " + ec.message()};
  return {};
}

/// A node's scheduler as `flag` (--scheduler, --join) gives it: host:port.
result<actors::node_process> parse_scheduler(const std::string& flag, const std::string& where,
                                             int rank) {
  const auto colon = where.rfind(':');
  if (colon == std::string::npos)
    return error{error_kind::invalid_input, flag + " expects host:port, got '" + where + "'"};
  actors::node_process p;
  p.rank = rank;
  p.host = where.substr(0, colon);
  try {
    p.port = std::stoi(where.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (p.port <= 0 || p.port > 65535)
    return error{error_kind::invalid_input, flag + ": bad port in '" + where + "'"};
  return p;
}

/// The rank of server `name` in the cluster file, for --join --server.
result<int> server_rank(const run_options& o) {
  if (o.server.empty())
    return error{error_kind::invalid_input,
                 "--join needs --server NAME (a server of " + o.s.cluster_file + ")"};
  auto cl = load_cluster(o.s.cluster_file);
  if (!cl) return cl.err();
  for (std::size_t i = 0; i < cl->servers.size(); ++i)
    if (cl->servers[i].name == o.server) return static_cast<int>(i);
  std::string names;
  for (const auto& sv : cl->servers) names += (names.empty() ? "" : ", ") + sv.name;
  return error{error_kind::invalid_input, "--server " + o.server + ": " + o.s.cluster_file +
                                              " has no such server (it lists " + names + ")"};
}

/// True when `name` is an executable on PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string d;
  while (std::getline(dirs, d, ':'))
    if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

/// Open MPI's network for a run whose ranks all live on this host: no TCP transport between
/// ranks (shared memory only: the TCP BTL listens on every address of the host), and the
/// launcher's own out-of-band channel advertised on loopback. Open MPI 4.1 binds that
/// channel's listeners (IPv4 and IPv6) to the wildcard address whatever it is told (traced with
/// `strace -k`: orte_oob_tcp_start_listening), so those two in mpirun remain: docs/design.md,
/// "What listens".
const std::vector<std::pair<std::string, std::string>> local_mpi_network{
    {"btl", "self,vader"}, {"oob_tcp_if_include", "lo"}};

/// A --local run under mpirun on this host (`tessera mpirun`: recovery on, the run's own exit
/// code): this binary again with `prefix` and the same arguments less --local and --launcher,
/// one rank per node. Open MPI refuses root unless told; a local run as root is told here.
int local_under_mpirun(const std::vector<std::string>& args, const std::vector<std::string>& prefix,
                       int n) {
  std::vector<std::string> argv{"-np", std::to_string(n), "--oversubscribe"};
  for (const auto& [name, value] : local_mpi_network)
    argv.insert(argv.end(), {"--mca", name, value});
  argv.insert(argv.end(), {"--", self_exe()});
  argv.insert(argv.end(), prefix.begin(), prefix.end());
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--local" || args[i] == "--launcher") {
      ++i;
      continue;
    }
    if (args[i].rfind("--local=", 0) == 0 || args[i].rfind("--launcher=", 0) == 0) continue;
    argv.push_back(args[i]);
  }
  if (::geteuid() == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  return cmd_mpirun(argv);
}

/// Whether a --local run of `n` processes goes under mpirun; says so when it cannot although
/// the job set may need it.
bool use_mpirun(const run_options& o, int n) {
  if (n < 2 || o.launcher == "fork") {
    if (n >= 2)
      std::cerr << "tessera: --launcher fork: no aggregator joins fork-started processes, so "
                   "no job is forked and a copy spread over servers runs on its first node\n";
    return false;
  }
  // A cluster file of another size is reported by the local layout, naming --local (and
  // with a secret file, servers beyond N may join that way).
  if (auto cl = load_cluster(o.s.cluster_file); !cl || static_cast<int>(cl->servers.size()) != n)
    return false;
  if (on_path("mpirun")) return true;
  std::cerr << "tessera: mpirun is not on PATH, so --local " << n
            << " starts its processes itself: no job is forked and a copy spread over servers "
               "runs on its first node (install openmpi-bin for the full runtime)\n";
  return false;
}

/// How a --local run starts its node processes: this binary again, with `prefix` and the same
/// arguments less --local, told its rank and the scheduler's address.
actors::node_command local_node_command(const std::vector<std::string>& args,
                                        const std::vector<std::string>& prefix) {
  // The scheduler's own options with a value: a node is told its secret file below.
  const std::vector<std::string> dropped = {"--local", "--secret-file", "--secret-from",
                                            "--token-file"};
  std::vector<std::string> base = prefix;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const bool named = std::find(dropped.begin(), dropped.end(), args[i]) != dropped.end();
    const bool joined = std::any_of(dropped.begin(), dropped.end(), [&](const std::string& d) {
      return args[i].rfind(d + "=", 0) == 0;
    });
    if (named) ++i;
    if (named || joined) continue;
    base.push_back(args[i]);
  }
  return [exe = self_exe(), base](int rank, int port, const std::string& secret_file) {
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), base.begin(), base.end());
    argv.insert(argv.end(), {"--rank", std::to_string(rank), "--scheduler",
                             "127.0.0.1:" + std::to_string(port), "--secret-file", secret_file});
    return argv;
  };
}

}  // namespace

int run_command(const std::vector<std::string>& args, const train::trainable_registry& kinds,
                const std::vector<std::string>& exec_prefix, const actors::node_setup& setup,
                const actors::scheduler_setup& sched_setup, bool serve) {
  run_options o;
  o.s.serve = serve;
  po::options_description d("tessera run options");
  add_options(d, o);
  po::options_description all;
  all.add(d);
  po::options_description internal("internal options");
  add_internal_options(internal, o);
  all.add(internal);
  if (int rc = parse_options(args, all, d, serve ? serve_usage : usage, problems()); rc >= 0)
    return rc;
  if (auto why = slurm_step_problem(env_value, actors::under_mpirun());
      o.rank < 0 && o.join.empty() && !why.empty()) {  // joining nodes need no MPI
    // Every task reads the same environment: one of them says why.
    if (env_value("SLURM_PROCID").value_or("0") == "0") problems() << "tessera: " << why << '\n';
    return exit_code::bad_input;
  }
  if (auto st = finish_settings(o); !st) {
    problems() << "tessera: " << st.err().message << '\n';
    return exit_code_for(st.err());
  }
  // Rank 0 (or this process of a local run) prints the summary and writes its JSON.
  o.s.report = report_run;
  if (actors::under_mpirun() && o.rank < 0) {
    if (o.local > 0) {
      problems() << "tessera: --local and mpirun exclude each other\n";
      return exit_code::bad_input;
    }
    return actors::run_mpi(o.s, kinds, setup, sched_setup);
  }
  if (!o.join.empty()) {
    auto rank = server_rank(o);
    if (!rank) return report(rank.err());
    auto p = parse_scheduler("--join", o.join, *rank);
    if (!p) return report(p.err());
    o.s.joined = true;
    return actors::run_node_process(o.s, *p, kinds, setup);
  }
  if (o.rank >= 0) {
    auto p = parse_scheduler("--scheduler", o.scheduler, o.rank);
    if (!p) return report(p.err());
    return actors::run_node_process(o.s, *p, kinds, setup);
  }
  if (o.launcher != "auto" && o.launcher != "mpirun" && o.launcher != "fork")
    return report(error{error_kind::invalid_input,
                        "--launcher: expected auto, mpirun or fork, got '" + o.launcher + "'"});
  if (use_mpirun(o, o.local)) return local_under_mpirun(args, exec_prefix, o.local);
  o.s.local = o.local > 0 ? o.local : 1;
  const int code =
      actors::run_local(o.s, kinds, local_node_command(args, exec_prefix), setup, sched_setup);
  actors::write_status_file(o.s.status_file, code);
  return code;
}

int cmd_run(const std::vector<std::string>& args) {
  return run_command(args, train::builtin_trainables(), {"run"});
}

int cmd_serve(const std::vector<std::string>& args) {
  return run_command(args, train::builtin_trainables(), {"serve"}, {}, {}, true);
}

int cmd_node(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << "usage: tessera node --join HOST:PORT --server NAME --cluster C.toml "
                   "--secret-file F [tessera run's timing options]\n"
                   "Runs one node of a running cluster (started by `tessera run --secret-file "
                   "F`): it registers with the secret, gets work from the next round, and on "
                   "SIGTERM finishes its round and leaves.\n";
      return exit_code::ok;
    }
  return run_command(args, train::builtin_trainables(), {"node"});
}

}  // namespace tessera::cli
