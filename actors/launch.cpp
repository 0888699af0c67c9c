/// @file launch.cpp
/// What both process layouts of a run share (actors/launch.hpp): the actor system, the
/// inputs, the node's and the scheduler's configurations, running a node, connecting to the
/// scheduler, and rank 0: the gate, the control API, the journal, the summary handed to the
/// run's report.

#include "actors/launch.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <signal.h>
#include <unistd.h>

#include "actors/gate.hpp"
#include "actors/liveness.hpp"
#include "actors/node_actor.hpp"
#include "actors/protocol.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/service.hpp"
#include "policies/registry.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/timeline.hpp"
#include "runtime/node/gpu/cuda_probe.hpp"

namespace tessera::actors::launch {

namespace {

using exit_code::failed;
using exit_code::ok;

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

/// The actor system configuration every process of a run uses: the protocol's types, the
/// middleman, its heartbeats and connection timeout, and a small thread pool. The connection
/// time-out is the loss detector's ceiling: within it the scheduler's adaptive bound
/// (actors/liveness.hpp) decides, so a slow peer is not cut off by CAF first.
/// The pool shares one queue (CAF's "sharing" policy): an idle worker blocks on it. CAF's
/// default work stealing makes an idle worker poll, 50 us sleeps for about 25 ms after each
/// message, then 10 ms naps; a node process is idle between a few messages a second, so on a
/// host with many of them the polling was most of the CPU (64 node processes on 2 cores:
/// 23.5 CPU s against 8.6, dispatch median 90 ms against 12; docs/benchmarks/runtime.md).
struct run_actor_config : caf::actor_system_config {
  run_actor_config(double heartbeat_interval, double connection_timeout) {
    register_protocol(*this);
    load<caf::io::middleman>();
    set("middleman.heartbeat-interval", seconds(heartbeat_interval));
    set("middleman.connection-timeout", seconds(connection_timeout));
    set("scheduler.policy", caf::atom("sharing"));
    set("scheduler.max-threads", static_cast<std::size_t>(2));
    set("logger.console", caf::atom("none"));
  }
};

/// The lease socket of a node process (docs/lease-protocol.md) in a directory only this user
/// can enter, removed with the server; null (with a message) when it cannot be opened: then
/// only program jobs fail, each saying why.
std::shared_ptr<program::lease_server> open_leases(int rank) {
  struct holder {
    std::string dir;
    std::unique_ptr<program::lease_server> server;
    ~holder() {
      server.reset();
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  };
  auto h = std::make_shared<holder>();
  std::string tmpl = "/tmp/tessera-node-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "tessera: node rank " << rank
              << ": no lease socket (mkdtemp: " << std::strerror(errno)
              << "); program jobs cannot run here\n";
    return nullptr;
  }
  h->dir = tmpl;
  auto server = program::lease_server::start(tmpl + "/lease.sock");
  if (!server) {
    std::cerr << "tessera: node rank " << rank << ": no lease socket (" << server.err().message
              << "); program jobs cannot run here\n";
    return nullptr;
  }
  h->server = std::move(*server);
  return std::shared_ptr<program::lease_server>(h, h->server.get());
}

node_config make_node_config(const run_settings& o, const run_inputs& in, int rank,
                             const train::trainable_registry& kinds, const node_setup& setup,
                             const secret_key& key) {
  node_config nc;
  nc.rank = rank;
  nc.secret = key;
  nc.srv = in.cl.servers[rank];
  nc.host = host_name();
  nc.kinds = &kinds;
  nc.gpus = in.gpus;
  nc.register_timeout = o.connect_timeout;
  const bool programs =
      std::any_of(in.jobs.begin(), in.jobs.end(), [](const run_job& j) { return j.is_program(); });
  if (programs || in.jobs.empty()) nc.leases = open_leases(rank);
  if (setup) setup(nc);
  return nc;
}

scheduler_config make_scheduler_config(const run_settings& o, const run_inputs& in,
                                       const secret_key& key) {
  scheduler_config sc;
  sc.secret = key;
  sc.cl = in.cl;
  sc.jobs = in.jobs;
  sc.pol = in.pol;
  sc.colocation = in.colocation;
  sc.known_kinds = in.kinds;
  sc.round_length = o.round_length;
  sc.checkpoint_dir = o.checkpoint_dir;
  sc.register_timeout = o.connect_timeout;
  sc.heartbeat_interval = o.heartbeat_interval;
  sc.liveness = liveness_for(o.heartbeat_timeout, o.heartbeat_ceiling);
  sc.min_nodes = o.min_nodes;
  sc.max_open_jobs = static_cast<std::size_t>(o.max_open_jobs);
  sc.report_grace = std::max(5.0, 2 * o.heartbeat_timeout);
  sc.max_seconds = o.serve ? 0 : o.timeout;
  sc.serve = o.serve;
  sc.verbose = o.verbose;
  // Fencing epochs above those of any earlier run in the same checkpoint directory.
  sc.master_port_base = 20000 + static_cast<int>(::getpid() % 10) * 4096;
  sc.epoch_base =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  return sc;
}

/// Set by SIGTERM in a node process: drain (finish the round, checkpoint, leave). A signal
/// handler can only reach process-wide state.
volatile std::sig_atomic_t drain_requested = 0;

void on_sigterm(int) { drain_requested = 1; }

/// Runs a node until the scheduler shuts it down; returns the exit code. On SIGTERM the node
/// asks the scheduler to let it leave after the current round.
int run_node(caf::actor_system& sys, const node_config& nc, const caf::actor& scheduler,
             double limit) {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  ::sigaction(SIGTERM, &sa, nullptr);
  auto node = sys.spawn(node_actor, nc, scheduler);
  caf::scoped_actor waiter{sys};
  waiter->monitor(node);
  int code = ok;
  bool down = false, drain_sent = false;
  // No limit (infinity): the node ends with its cluster (a shutdown, or its connection gone).
  const bool bounded = std::isfinite(limit);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(bounded ? limit : 0));
  while (!down && (!bounded || std::chrono::steady_clock::now() < until)) {
    if (drain_requested && !drain_sent) {
      std::cerr << "tessera: node rank " << nc.rank << " drains: it leaves after this round\n";
      caf::anon_send(node, leave_atom::value);
      drain_sent = true;
    }
    waiter->receive(
        [&](const caf::down_msg& d) {
          down = true;
          if (d.reason && d.reason != caf::exit_reason::normal) {
            std::cerr << "tessera: " << describe(sys, d.reason) << '\n';
            code = failed;
          }
        },
        caf::after(std::chrono::milliseconds(200)) >> [] {});
  }
  if (!down) {
    std::cerr << "tessera: node rank " << nc.rank << " gave up after " << limit << " s\n";
    caf::anon_send_exit(node, caf::exit_reason::kill);
    code = failed;
  }
  return code;
}

/// Connects to the scheduler, retrying until `timeout` seconds have passed.
result<caf::actor> connect(caf::actor_system& sys, const std::string& host, int port,
                           double timeout) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(timeout));
  std::string last;
  while (true) {
    auto a = sys.middleman().remote_actor(host, static_cast<std::uint16_t>(port));
    if (a) return *a;
    last = sys.render(a.error());
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return error{error_kind::io, "cannot reach the scheduler at " + host + ":" +
                                   std::to_string(port) + " within " +
                                   std::to_string(static_cast<int>(timeout)) + " s (" + last + ")"};
}

/// Opens the scheduler to the network: the gate (actors/gate.hpp) listens on `bind`:`o.port`
/// and hands each admitted peer to CAF over a socketpair. Null (after printing why) when it
/// cannot listen.
std::unique_ptr<gate> open_scheduler(caf::actor_system& sys, const caf::actor& sched,
                                     const run_settings& o, const std::string& bind,
                                     std::size_t nodes) {
  gate_limits limits;
  limits.max_message = o.max_message;
  limits.max_connections = static_cast<int>(2 * nodes + 16);
  // CAF's own heartbeats keep a live connection busy: idle means the peer stopped for longer
  // than any loss bound.
  limits.idle_timeout = liveness_for(o.heartbeat_timeout, o.heartbeat_ceiling).ceiling + 5;
  auto g = gate::open(bind, o.port, caf_upstream(sys, sched), sys.node(), limits);
  if (!g) {
    std::cerr << "tessera: " << g.err().message << '\n';
    return nullptr;
  }
  if (o.verbose || !o.secret_file.empty())
    std::cerr << "tessera: scheduler listening on " << bind << ':' << (*g)->port() << '\n';
  return std::move(*g);
}

/// Where joining nodes dial the gate, written to STATE_DIR/scheduler ("HOST:PORT") for a cluster
/// that takes joins (a secret file): a second allocation's `tessera node --join "$(cat
/// STATE_DIR/scheduler)"` needs nothing else. A failed write is said, not fatal.
void note_scheduler_address(const run_settings& o, const std::string& bind, int port) {
  if (o.state_dir.empty() || o.secret_file.empty()) return;
  const std::string host = bind == "0.0.0.0" ? host_name() : bind;
  if (auto w = write_file_atomically(o.state_dir + "/scheduler",
                                     host + ":" + std::to_string(port) + "\n", 0644);
      !w)
    std::cerr << "tessera: " << w.err().message << '\n';
}

/// Set by SIGTERM or SIGINT in a served cluster's scheduler process: stop after the round.
volatile std::sig_atomic_t stop_requested = 0;

void on_stop_signal(int) { stop_requested = 1; }

/// Waits for the run's summary: at most the run's time-out, or for ever when serving (then
/// SIGTERM and SIGINT ask the scheduler to stop after the round in flight).
std::optional<run_summary> await_summary(caf::scoped_actor& listener, const run_settings& o,
                                         const caf::actor& sched) {
  std::optional<run_summary> sum;
  const double limit = o.timeout + o.connect_timeout + 30;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(limit));
  bool stop_sent = false;
  while (!sum && (o.serve || std::chrono::steady_clock::now() < until)) {
    if (stop_requested && !stop_sent) {
      std::cerr << "tessera: stopping after the round in flight\n";
      listener->send(sched, stop_atom::value);
      stop_sent = true;
    }
    listener->receive([&](run_summary& s) { sum = std::move(s); }, [](bool) {},
                      caf::after(std::chrono::milliseconds(200)) >> [] {});
  }
  if (!sum) std::cerr << "tessera: no result from the scheduler within " << limit << " s\n";
  return sum;
}

/// Waits for the run's summary and hands it to the run's report (run_settings::report); the
/// run's exit code: the report's, or without one ok when the summary says so.
int await_report(caf::scoped_actor& listener, const run_settings& o, const run_inputs& in,
                 const caf::actor& sched, const caf::actor& node) {
  auto sum = await_summary(listener, o, sched);
  if (!sum) {
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    caf::anon_send_exit(node, caf::exit_reason::kill);
    return failed;
  }
  if (!o.report) return sum->ok ? ok : failed;
  return o.report(*sum, o, in.cl);
}

/// The control API of a served cluster (or of a run given --listen); null when it has none,
/// or after printing why it could not open (`failed` is then set).
std::unique_ptr<service> open_api(caf::actor_system& sys, const caf::actor& sched,
                                  const run_settings& o, const train::trainable_registry& kinds,
                                  bool& failed_to_open) {
  failed_to_open = false;
  if (!o.serve && o.listen.empty()) return nullptr;
  service_settings ss;
  ss.state_dir = o.state_dir;
  ss.token_file = o.token_file;
  if (!o.listen.empty()) ss.listen = o.listen;
  ss.allow_hosts = o.allow_hosts;
  ss.known_kinds = kinds.kinds();
  ss.check = [&kinds](const run_job& j) { return kinds.check(j.kind, j.seed, j.config); };
  auto svc = service::open(sys, sched, ss);
  if (!svc) {
    std::cerr << "tessera: " << svc.err().message << '\n';
    failed_to_open = true;
    return nullptr;
  }
  if (o.serve) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
  }
  return std::move(*svc);
}

/// A served cluster's journal (STATE_DIR/journal) for the scheduler, with the jobs a resume
/// brings back; false after printing why it cannot be opened.
bool attach_journal(const run_settings& o, scheduler_config& sc) {
  // A file-size limit (ulimit -f) fails a journal write with EFBIG, which the journal retries
  // like a full disk, instead of killing the cluster with SIGXFSZ (programs get it back).
  ::signal(SIGXFSZ, SIG_IGN);
  if (auto st = prepare_state_dir(o.state_dir); !st) {
    std::cerr << "tessera: " << st.err().message << '\n';
    return false;
  }
  auto opened = open_cluster_journal(o.state_dir + "/journal", o.resume, o.repair_journal);
  if (!opened) {
    std::cerr << "tessera: " << opened.err().message << '\n';
    return false;
  }
  sc.log = opened->log;
  if (!sc.jobs.empty()) {
    // The job file given at the start is a submission like any other: on disk before it runs.
    std::promise<std::string> synced;
    sc.log->submitted(sc.jobs, [&synced](std::string err) { synced.set_value(std::move(err)); });
    if (auto err = synced.get_future().get(); !err.empty()) {
      std::cerr << "tessera: the journal did not take the job file: " << err << '\n';
      return false;
    }
  }
  sc.restored = std::move(opened->restored.jobs);
  sc.first_round = opened->restored.last_round + 1;
  sc.clock_base = opened->restored.clock;
  if (o.resume) {
    int open = 0;
    for (const auto& r : sc.restored) open += is_final(r.life) ? 0 : 1;
    std::cerr << "tessera: resumed " << sc.restored.size() << " jobs from " << o.state_dir
              << "/journal (" << open << " not ended), from round " << sc.first_round
              << " at cluster time " << std::fixed << std::setprecision(1) << sc.clock_base
              << " s\n";
    for (const auto& why : opened->restored.failed_at_replay)
      std::cerr << "tessera: resume: " << why << '\n';
  }
  return true;
}

}  // namespace

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

result<run_inputs> load_inputs(const run_settings& o, const train::trainable_registry& kinds) {
  run_inputs in;
  in.kinds = kinds.kinds();
  auto cl = load_cluster(o.cluster_file);
  if (!cl) return cl.err();
  in.cl = std::move(*cl);
  // A joining node runs what the scheduler sends; a served cluster may start without jobs.
  if (o.jobs_file.empty() && !o.serve) return in;
  // Every job's configuration is checked here, before any node starts: one job's bad
  // setting would otherwise stop the run for every job when a node builds it.
  if (!o.jobs_file.empty()) {
    auto jobs = load_run_jobs(o.jobs_file, &in.kinds, [&kinds](const run_job& j) {
      return kinds.check(j.kind, j.seed, j.config);
    });
    if (!jobs) return jobs.err();
    in.jobs = std::move(*jobs);
  }
  auto pol = make_policy(o.policy, o.policy_args, "--policy-arg");
  if (!pol) return pol.err();
  auto table = throughput_table::load_bundled();
  if (!table) return table.err();
  in.colocation = std::make_shared<const throughput_table>(std::move(*table));
  // As in simulation (check_runnable), a job runs as a gang only on a GPU type with at least
  // its K GPUs (the throughput policies see is 0 elsewhere); a policy that stacks several of
  // a job's tasks on a GPU (hare) can run it on any GPUs.
  if (!(*pol)->stacks_tasks())
    for (const auto& j : in.jobs) {
      std::vector<double> usable;
      for (const auto& t : in.cl.types) usable.push_back(t.gpus >= j.spec.scale_factor ? 1 : 0);
      if (auto st = check_runnable(j.spec, usable); !st)
        return input_error(o.jobs_file, 0, "scale_factor",
                           st.err().message + " " + o.cluster_file + " (no GPU type has " +
                               std::to_string(j.spec.scale_factor) + " GPUs, so policy " +
                               (*pol)->name() +
                               " cannot place it; hare, which stacks tasks "
                               "on GPUs, could)");
    }
  in.pol = std::shared_ptr<policy>(std::move(*pol));
  return in;
}

status find_node_gpus(const run_settings& o, run_inputs& in, int rank) {
  const auto& srv = in.cl.servers[static_cast<std::size_t>(rank)];
  auto g = gpu::discover_node_gpus(srv, o.gpu, gpu::probe_cuda_devices, o.cluster_file);
  if (!g) return g.err();
  if (g->real() || o.verbose)
    std::cerr << "tessera: node rank " << rank << " (server " << srv.name
              << "): " << gpu::summary(*g, srv) << '\n';
  in.gpus = std::move(*g);
  return {};
}

std::optional<std::string> check_size(const run_settings& o, const cluster& cl, int n,
                                      const std::string& how) {
  if (static_cast<int>(cl.servers.size()) == n) return std::nullopt;
  return o.cluster_file + ": lists " + std::to_string(cl.servers.size()) +
         " servers, but the run has " + std::to_string(n) + " node processes (" + how +
         "); tessera runs one node per server";
}

std::optional<secret_key> run_secret(const run_settings& s) {
  if (s.secret_exists) {  // an orchestrator's secret: every rule of a node's secret file
    auto given = read_secret_file(s.secret_file);
    if (!given) std::cerr << "tessera: --secret-from " << given.err().message << '\n';
    return given ? std::optional<secret_key>(std::move(*given)) : std::nullopt;
  }
  auto key = make_secret();
  if (!key) {
    std::cerr << "tessera: " << key.err().message << '\n';
    return std::nullopt;
  }
  if (!s.secret_file.empty())
    if (auto st = write_secret_file(s.secret_file, *key); !st) {
      std::cerr << "tessera: " << st.err().message << " (--secret-file must name a new file)\n";
      return std::nullopt;
    }
  return std::move(*key);
}

int run_rank0(const run_settings& o, const run_inputs& in, const train::trainable_registry& kinds,
              const node_setup& setup, const scheduler_setup& sched_setup,
              const std::function<bool(int port)>& start_nodes, const secret_key& key,
              const std::string& bind, std::shared_ptr<comm::aggregator> agg) {
  run_actor_config cfg(o.heartbeat_interval,
                       liveness_for(o.heartbeat_timeout, o.heartbeat_ceiling).ceiling);
  caf::actor_system sys{cfg};
  caf::scoped_actor listener{sys};
  auto sc = make_scheduler_config(o, in, key);
  sc.can_sync = agg != nullptr;
  if (o.serve && !attach_journal(o, sc)) {
    start_nodes(0);
    return failed;
  }
  if (sched_setup) sched_setup(sc);
  std::shared_ptr<timeline_file> timeline;
  if (!o.timeline_file.empty()) {
    auto f = timeline_file::open(o.timeline_file, in.cl, "run", o.policy, o.round_length);
    if (!f) {
      std::cerr << "tessera: " << f.err().message << '\n';
      start_nodes(0);
      return failed;
    }
    timeline = std::move(f.value());
    sc.timeline = std::shared_ptr<timeline_recorder>(timeline, &timeline->recorder());
  }
  auto sched = sys.spawn(scheduler_actor, std::move(sc), caf::actor_cast<caf::actor>(listener));
  auto door = open_scheduler(sys, sched, o, bind, in.cl.servers.size());
  if (!door || !start_nodes(door->port())) {
    if (!door) start_nodes(0);
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    return failed;
  }
  bool api_failed = false;
  auto api = open_api(sys, sched, o, kinds, api_failed);
  if (api_failed) {
    listener->send(sched, stop_atom::value);  // the other nodes are started: end them cleanly
  } else if (api) {
    note_scheduler_address(o, bind, door->port());
  }
  auto node0 = make_node_config(o, in, 0, kinds, setup, key);
  node0.agg = agg;
  auto node = sys.spawn(node_actor, node0, sched);
  int code = await_report(listener, o, in, sched, node);
  if (timeline)
    if (auto st = timeline->close(); !st) {
      std::cerr << "tessera: " << st.err().message << '\n';
      code = failed;
    }
  api.reset();
  if (api_failed) code = failed;
  door->wait_closed(5);
  return code;
}

int connect_and_run_node(const run_settings& s, const run_inputs& in, int rank,
                         const std::string& host, int port, const train::trainable_registry& kinds,
                         const node_setup& setup, std::shared_ptr<comm::aggregator> agg,
                         const secret_key& key) {
  run_actor_config cfg(s.heartbeat_interval,
                       liveness_for(s.heartbeat_timeout, s.heartbeat_ceiling).ceiling);
  caf::actor_system sys{cfg};
  auto sched = connect(sys, host, port, s.connect_timeout);
  if (!sched) {
    std::cerr << "tessera: node rank " << rank << ": " << sched.err().message << '\n';
    return failed;
  }
  auto nc = make_node_config(s, in, rank, kinds, setup, key);
  nc.agg = std::move(agg);
  // A node of a served cluster, or one that joined a running cluster, lives as long as that
  // cluster: the scheduler shuts it down, or its connection goes. A batch run's own nodes keep
  // a safety net past the run's time-out.
  const double limit = s.serve || s.joined ? std::numeric_limits<double>::infinity()
                                           : s.timeout + s.connect_timeout + 30;
  return run_node(sys, nc, *sched, limit);
}

}  // namespace tessera::actors::launch

namespace tessera::actors {

void write_status_file(const std::string& path, int code) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << code << '\n';
    if (!f) {
      std::cerr << "tessera: cannot write the status file " << tmp << '\n';
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    std::cerr << "tessera: cannot write the status file " << path << ": " << ec.message() << '\n';
}

}  // namespace tessera::actors
