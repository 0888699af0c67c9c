/// @file cmd_run.cpp
/// `tessera run`: its command line, handed to the actor runtime (actors/run.hpp).

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <ostream>

#include <boost/program_options.hpp>
#include <unistd.h>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "launcher/run_command.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// Everything `tessera run` reads from its command line.
struct run_options {
  actors::run_settings s;
  std::vector<std::string> policy_args;
  int local = 0;          ///< --local; 0 when not given
  int rank = -1;          ///< internal: this process is node <rank> of a --local run
  std::string scheduler;  ///< internal: host:port of that run's scheduler
};

const char* const usage =
    "usage: tessera run --cluster C.toml --jobs J.toml [--policy P] [--local N]\n"
    "       mpirun -np N tessera run --cluster C.toml --jobs J.toml [--policy P]";

void add_options(po::options_description& d, run_options& o) {
  auto& s = o.s;
  d.add_options()
    ("cluster", po::value(&s.cluster_file)->required(), "cluster TOML file; one node per server")
    ("jobs", po::value(&s.jobs_file)->required(), "job-set TOML file (each [[job]] has a kind)")
    ("policy", po::value(&s.policy)->default_value(s.policy), "policy (see `tessera policies`)")
    ("policy-arg", po::value(&o.policy_args)->composing(),
     "policy option key=value (repeatable; value a number, or true/false)")
    ("round-length", po::value(&s.round_length)->default_value(1.0), "seconds per round")
    ("local", po::value(&o.local)->default_value(0),
     "start this many node processes here (fork/exec), no mpirun needed")
    ("checkpoint-dir", po::value(&s.checkpoint_dir),
     "shared directory for job checkpoints (default: a new one under the temp directory)")
    ("json", po::value(&s.json_out), "write the summary as JSON to this file")
    ("connect-timeout", po::value(&s.connect_timeout)->default_value(20.0),
     "seconds for nodes to reach the scheduler and register")
    ("timeout", po::value(&s.timeout)->default_value(600.0),
     "give up when the run has not ended after this many seconds")
    ("heartbeat-interval", po::value(&s.heartbeat_interval)->default_value(0.25),
     "seconds between heartbeats (node -> scheduler, and CAF's own)")
    ("heartbeat-timeout", po::value(&s.heartbeat_timeout)->default_value(3.0),
     "seconds of silence after which a node is lost")
    ("verbose,v", po::bool_switch(&s.verbose), "one line per round on stderr")
    ("quiet,q", po::bool_switch(&s.quiet), "no summary table on stdout")
    ("help,h", "show this help");
}

void add_internal_options(po::options_description& d, run_options& o) {
  d.add_options()
    ("rank", po::value(&o.rank), "internal: this process is node <rank> of a --local run")
    ("scheduler", po::value(&o.scheduler), "internal: host:port of the scheduler");
}

/// Where messages about the command line go. Under mpirun every rank reads the same command
/// line, so only rank 0 reports what is wrong with it; the others stay silent.
std::ostream& problems() {
  static std::ostream silent(nullptr);
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* r = std::getenv(v)) return std::string(r) == "0" ? std::cerr : silent;
  return std::cerr;
}

/// Checks the numbers, parses the policy options and prepares the checkpoint directory.
status finish_settings(run_options& o) {
  auto& s = o.s;
  if (s.round_length <= 0 || s.connect_timeout <= 0 || s.timeout <= 0 ||
      s.heartbeat_interval <= 0 || s.heartbeat_timeout <= s.heartbeat_interval)
    return error{error_kind::invalid_input,
                 "--round-length, --connect-timeout, --timeout and the heartbeat settings must "
                 "be positive, and --heartbeat-timeout above the interval"};
  auto pa = parse_policy_args(o.policy_args);
  if (!pa) return pa.err();
  s.policy_args = std::move(*pa);
  if (o.rank >= 0) return {};  // a node of a --local run uses its scheduler's directory
  if (s.checkpoint_dir.empty())
    s.checkpoint_dir = (std::filesystem::temp_directory_path() /
                        ("tessera-run-" + std::to_string(::getpid())))
                           .string();
  std::error_code ec;
  std::filesystem::create_directories(s.checkpoint_dir, ec);
  if (ec)
    return error{error_kind::invalid_input, "cannot create --checkpoint-dir " +
                                                s.checkpoint_dir + ": " + ec.message()};
  return {};
}

/// The scheduler of a --local run as --scheduler gives it (host:port).
result<actors::node_process> parse_scheduler(const run_options& o) {
  const auto colon = o.scheduler.rfind(':');
  if (colon == std::string::npos)
    return error{error_kind::invalid_input,
                 "--scheduler expects host:port, got '" + o.scheduler + "'"};
  actors::node_process p;
  p.rank = o.rank;
  p.host = o.scheduler.substr(0, colon);
  try {
    p.port = std::stoi(o.scheduler.substr(colon + 1));
  } catch (const std::exception&) {
  }
  if (p.port <= 0 || p.port > 65535)
    return error{error_kind::invalid_input, "--scheduler: bad port in '" + o.scheduler + "'"};
  return p;
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

/// How a --local run starts its node processes: this binary again, with `prefix` and the same
/// arguments less --local, told its rank and the scheduler's address.
actors::node_command local_node_command(const std::vector<std::string>& args,
                                        const std::vector<std::string>& prefix) {
  std::vector<std::string> base = prefix;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--local") {
      ++i;
      continue;
    }
    if (args[i].rfind("--local=", 0) == 0) continue;
    base.push_back(args[i]);
  }
  return [exe = self_exe(), base](int rank, int port) {
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), base.begin(), base.end());
    argv.insert(argv.end(), {"--rank", std::to_string(rank), "--scheduler",
                             "127.0.0.1:" + std::to_string(port)});
    return argv;
  };
}

}  // namespace

int run_command(const std::vector<std::string>& args, const train::trainable_registry& kinds,
                const std::vector<std::string>& exec_prefix, const actors::node_setup& setup,
                const actors::scheduler_setup& sched_setup) {
  run_options o;
  po::options_description d("tessera run options");
  add_options(d, o);
  po::options_description all;
  all.add(d);
  po::options_description internal("internal options");
  add_internal_options(internal, o);
  all.add(internal);
  if (int rc = parse_options(args, all, d, usage, problems()); rc >= 0) return rc;
  if (auto st = finish_settings(o); !st) {
    problems() << "tessera: " << st.err().message << '\n';
    return exit_code_for(st.err());
  }
  if (actors::under_mpirun() && o.rank < 0) {
    if (o.local > 0) {
      problems() << "tessera: --local and mpirun exclude each other\n";
      return exit_code::bad_input;
    }
    return actors::run_mpi(o.s, kinds, setup, sched_setup);
  }
  if (o.rank >= 0) {
    auto p = parse_scheduler(o);
    if (!p) return report(p.err());
    return actors::run_node_process(o.s, *p, kinds, setup);
  }
  o.s.local = o.local > 0 ? o.local : 1;
  return actors::run_local(o.s, kinds, local_node_command(args, exec_prefix), setup,
                           sched_setup);
}

int cmd_run(const std::vector<std::string>& args) {
  return run_command(args, train::builtin_trainables(), {"run"});
}

}  // namespace tessera::cli
