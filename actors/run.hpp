#pragma once
/// @file run.hpp
/// Running a job set on real node processes with the actor runtime (what `tessera run` does;
/// its command line is launcher/cmd_run.cpp).
///
/// Process layouts (one node per server of the cluster file; rank i is server i):
/// - under `mpirun -np N` (run_mpi): rank 0 hosts the scheduler and a node, every other rank a
///   node. The scheduler's CAF port is published on an ephemeral port and broadcast over MPI
///   (MPI_Bcast); from then on only CAF messages flow. Add `--enable-recovery` to mpirun for a
///   run to survive a node process dying (otherwise mpirun itself aborts every rank).
/// - local (run_local): this process hosts the scheduler and node 0 and starts the other
///   nodes itself (fork/exec of a command line the caller gives, e.g. the same binary told
///   its rank), no mpirun; each of those runs run_node_process.
/// Trust: the scheduler's process generates the run's cluster secret (actors/auth.hpp) and
/// hands it to the nodes over MPI (mpirun) or in a file of mode 0600 in a private directory
/// (`--local`); with `secret_file` set it also writes it there, for nodes that join later
/// (`tessera node --join`). Only the gate (actors/gate.hpp) listens on the network, on
/// `bind` (default: loopback when every node runs on this host); CAF listens on no socket
/// (each admitted peer reaches it over a socketpair: actors/gate.hpp).
/// A node process that gets SIGTERM drains: it finishes its round, checkpoints and leaves.
/// GPUs: every node process discovers its GPUs before it starts (settings::gpu); found ones
/// that disagree with its server entry end the run (or that node) with bad input, naming the
/// server and both sides; without any it runs on its declared GPUs, throttled.
/// Rank 0 hands the run's summary (per-job JCT, final loss and accuracy) to the report the
/// caller gives (run_settings::report; the table and JSON of `tessera run` are
/// launcher/run_report.hpp). Every function returns an exit code (runtime/core/result.hpp): ok
/// when every job finished, failed when the run failed, bad_input when the inputs are wrong.
/// The layouts' code: actors/launch.cpp (shared), launch_local.cpp, launch_mpi.cpp.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/node/gpu/discovery.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera {
struct cluster;
}

namespace tessera::actors {

struct node_config;
struct scheduler_config;
struct run_summary;
struct run_settings;

/// What rank 0 (or a local run's process) does with the run's summary once the scheduler
/// sends it (e.g. print it, write it as JSON), given the run's settings and cluster. Returns
/// the run's exit code.
using run_report =
    std::function<int(const run_summary& sum, const run_settings& s, const cluster& cl)>;

/// What a run needs, in every process of it.
struct run_settings {
  std::string cluster_file;                      ///< cluster TOML file; one node per server
  std::string jobs_file;                         ///< job-set TOML file (each [[job]] a kind)
  std::string policy = "max_min_fairness_perf";  ///< policy name (policies/registry.hpp)
  std::map<std::string, double> policy_args;     ///< the policy's options
  double round_length = 1.0;                     ///< seconds per round
  int local = 1;                                 ///< node processes of a local run
  std::string checkpoint_dir;                    ///< shared directory for job checkpoints
  std::string json_out;                          ///< file for the report's JSON ("" = none)
  /// Seconds for nodes to reach the scheduler and register: the scheduler's wait counts from
  /// the last node that made progress, so a slow start that keeps moving is waited for.
  double connect_timeout = 20;
  /// Start with the nodes registered when the wait ends, if at least this many (0: all).
  int min_nodes = 0;
  /// Jobs not ended a served cluster holds at most (submissions past it get 429).
  double max_open_jobs = 100000;
  bool joined = false;               ///< this node process joined a running cluster (--join)
  double timeout = 600;              ///< the run gives up when it has not ended by then (s)
  double heartbeat_interval = 0.25;  ///< seconds between heartbeats (node's and CAF's)
  /// Seconds of silence a node is always allowed: the floor of its adaptive loss bound
  /// (actors/liveness.hpp; the ceiling is ten times it, at least 20 s).
  double heartbeat_timeout = 3;
  /// Seconds of silence after which a node is always lost (0: ten times the heartbeat
  /// time-out, at least 20 s); also CAF's connection time-out.
  double heartbeat_ceiling = 0;
  bool verbose = false;  ///< one line per round on stderr
  bool quiet = false;    ///< no summary table on stdout (the report's)
  /// The cluster secret's file: the scheduler's process creates it (it must not exist) for
  /// joining nodes; a node process (`--local` child, `tessera node`) reads it. "" = none.
  std::string secret_file;
  /// The scheduler's process reads `secret_file` (an existing secret: a Kubernetes Secret,
  /// say) instead of making a new secret and creating the file (--secret-from).
  bool secret_exists = false;
  /// serve: the API token's file, read as it is (--token-file); "" = STATE_DIR/token, made
  /// at the first start.
  std::string token_file;
  std::string bind;  ///< address the scheduler listens on ("" = chosen, see above)
  int port = 0;      ///< port it listens on (0 = any free port)
  std::size_t max_message = 16u << 20;  ///< largest message a peer may send (bytes)
  /// Where rank 0 (or a local run) writes the run's exit code when it ends, bad input
  /// included: `tessera mpirun` reads it, because mpirun's recovery mode exits 0 whatever
  /// the ranks returned. "" = none.
  std::string status_file;
  /// A cluster that stays up (`tessera serve`): jobs come through the control API, and it
  /// runs until `tessera shutdown`, SIGTERM or SIGINT (the round in flight ends first).
  bool serve = false;
  /// The service's state directory (actors/service.hpp): token, address, journal.
  std::string state_dir;
  /// HOST:PORT of the control API; "" = no API (a `tessera run` without --listen).
  std::string listen;
  std::vector<std::string> allow_hosts;  ///< DNS names the API answers to (--allow-host)
  bool repair_journal = false;  ///< serve --resume: drop a damaged journal end (--repair-journal)
  /// A served cluster carries on with the jobs of its state directory's journal (the same
  /// cluster file); without it a journal holding jobs is refused.
  bool resume = false;
  /// How each node process finds its GPUs (runtime/node/gpu/discovery.hpp); the launcher reads
  /// it from TESSERA_GPU_DISCOVERY and CUDA_VISIBLE_DEVICES. GPUs found must agree with the
  /// node's server entry, else the node refuses to start (bad input).
  gpu::discovery gpu;
  /// File for the run's timeline (runtime/core/timeline.hpp: who ran where in each round, from
  /// the round plans), written by the scheduler's process; "" = none.
  std::string timeline_file;
  /// What the scheduler's process does with the summary (see run_report); none: it prints
  /// nothing, and the exit code is ok when the summary says so, else failed. `tessera run`
  /// gives launcher/run_report.hpp's report_run (the table, json_out, quiet).
  run_report report;
};

/// Where a node process of a local run finds the scheduler.
struct node_process {
  int rank = -1;     ///< the node's rank (server index)
  std::string host;  ///< the scheduler's host
  int port = 0;      ///< the scheduler's CAF port
};

/// The command line (argv[0] is the program) that starts node process `rank` of a local run
/// whose scheduler listens on 127.0.0.1:`port`, reading the cluster secret from `secret_file`.
using node_command =
    std::function<std::vector<std::string>(int rank, int port, const std::string& secret_file)>;

/// Adjusts each node's configuration before the node starts: how tests and benchmarks inject
/// faults (node_config::hooks, node_config::version). Production runs pass none.
using node_setup = std::function<void(node_config&)>;

/// Adjusts the scheduler's configuration before it starts (scheduler_config::hooks): fault
/// injection for tests. Production runs pass none.
using scheduler_setup = std::function<void(scheduler_config&)>;

/// True when this process was started by mpirun (Open MPI, or a PMI/PMIx launcher).
bool under_mpirun();

/// Writes `code` and a newline to `path` atomically (a temporary file, then a rename), so a
/// reader sees the whole code or no file; does nothing for an empty path.
void write_status_file(const std::string& path, int code);

/// This rank's part of a run under mpirun. Every rank loads the inputs and they agree before
/// any goes on, so bad input ends every rank with one message.
int run_mpi(const run_settings& s, const train::trainable_registry& kinds,
            const node_setup& setup = {}, const scheduler_setup& sched_setup = {});

/// A local run of `s.local` node processes: the scheduler and node 0 here, the others started
/// with `start_node`. With `s.secret_file` set, `s.local` may be fewer than the cluster's
/// servers: the rest join (`tessera node --join`) before the registration time-out.
int run_local(const run_settings& s, const train::trainable_registry& kinds,
              const node_command& start_node, const node_setup& setup = {},
              const scheduler_setup& sched_setup = {});

/// One node process (of a local run, or joining a running cluster): reads the secret from
/// `s.secret_file`, connects to the scheduler at `p` and runs node `p.rank` until the
/// scheduler ends the run, fences the node, or it drains on SIGTERM.
int run_node_process(const run_settings& s, const node_process& p,
                     const train::trainable_registry& kinds, const node_setup& setup = {});

}  // namespace tessera::actors
