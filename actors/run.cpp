#include "actors/run.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <filesystem>
#include <optional>
#include <future>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/auth.hpp"
#include "actors/gate.hpp"
#include "actors/node_actor.hpp"
#include "actors/protocol.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/service.hpp"
#include "actors/summary.hpp"
#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/node/comm/mpi_aggregator.hpp"
#include "runtime/node/gpu/cuda_probe.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/round_loop.hpp"
#include "runtime/core/timeline.hpp"

namespace tessera::actors {

namespace {

using exit_code::bad_input;
using exit_code::failed;
using exit_code::ok;

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

/// The actor system configuration every process of a run uses: the protocol's types, the
/// middleman, its heartbeats and connection timeout, and a small thread pool.
struct run_actor_config : caf::actor_system_config {
  run_actor_config(double heartbeat_interval, double connection_timeout) {
    register_protocol(*this);
    load<caf::io::middleman>();
    set("middleman.heartbeat-interval", seconds(heartbeat_interval));
    set("middleman.connection-timeout", seconds(connection_timeout));
    set("scheduler.max-threads", static_cast<std::size_t>(2));
    set("logger.console", caf::atom("none"));
  }
};

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

/// Inputs every process loads: the cluster, the jobs, the policy.
struct run_inputs {
  cluster cl;
  std::vector<run_job> jobs;
  std::shared_ptr<policy> pol;
  std::vector<std::string> kinds;
  gpu::node_gpus gpus;  ///< this process's node's GPUs (find_node_gpus)
  /// Co-location ratios for the live rate model (the bundled table), so a packing policy
  /// can pair jobs whose job types the table pairs; null on a joining node.
  std::shared_ptr<const throughput_table> colocation;
};

/// Loads and checks the inputs; an error message naming the file and field on failure.
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
                               (*pol)->name() + " cannot place it; hare, which stacks tasks "
                               "on GPUs, could)");
    }
  in.pol = std::shared_ptr<policy>(std::move(*pol));
  return in;
}

/// Discovers this process's GPUs for node `rank` (runtime/node/gpu/discovery.hpp) into `in.gpus`;
/// the check's error when they disagree with its server entry. Says what the node runs on
/// when it found GPUs (or, verbose, why it found none).
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

/// "cluster file lists K servers but the run has N node processes" when they differ.
std::optional<std::string> check_size(const run_settings& o, const cluster& cl, int n,
                                      const std::string& how) {
  if (static_cast<int>(cl.servers.size()) == n) return std::nullopt;
  return o.cluster_file + ": lists " + std::to_string(cl.servers.size()) +
         " servers, but the run has " + std::to_string(n) + " node processes (" + how +
         "); tessera runs one node per server";
}

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
    std::cerr << "tessera: node rank " << rank << ": no lease socket (mkdtemp: "
              << std::strerror(errno) << "); program jobs cannot run here\n";
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
  const bool programs = std::any_of(in.jobs.begin(), in.jobs.end(),
                                    [](const run_job& j) { return j.is_program(); });
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
  sc.heartbeat_timeout = o.heartbeat_timeout;
  sc.report_grace = std::max(5.0, 2 * o.heartbeat_timeout);
  sc.max_seconds = o.serve ? 0 : o.timeout;
  sc.serve = o.serve;
  sc.verbose = o.verbose;
  // Fencing epochs above those of any earlier run in the same checkpoint directory.
  sc.master_port_base = 20000 + static_cast<int>(::getpid() % 10) * 4096;
  sc.epoch_base = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
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
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(limit));
  while (!down && std::chrono::steady_clock::now() < until) {
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

void print_summary(const run_summary& s, const run_settings& o, const cluster& cl) {
  const std::size_t nodes = cl.servers.size();
  std::ostream& out = std::cout;
  if (s.ok && o.serve) {
    int ended = 0;
    for (const auto& j : s.jobs) ended += j.finished || j.canceled || j.failed ? 1 : 0;
    out << "tessera serve: stopped after " << std::fixed << std::setprecision(2) << s.seconds
        << " s with " << ended << " of " << s.jobs.size() << " jobs ended (" << s.rounds
        << " rounds of " << o.round_length << " s, policy " << o.policy << ", " << nodes
        << " nodes";
  } else if (s.ok)
    out << "tessera run: " << s.jobs.size() << " jobs finished in " << std::fixed
        << std::setprecision(2) << s.seconds << " s (" << s.rounds << " rounds of "
        << o.round_length << " s, policy " << o.policy << ", " << nodes << " nodes";
  else
    out << "tessera run: FAILED after " << std::fixed << std::setprecision(2) << s.seconds
        << " s (" << s.rounds << " rounds): " << s.error << " (policy " << o.policy;
  if (!s.failed_ranks.empty()) {
    out << "; lost node ranks";
    for (auto r : s.failed_ranks) out << ' ' << r;
  }
  out << ")\n";
  out << std::left << std::setw(6) << "job" << std::setw(20) << "kind" << std::right
      << std::setw(10) << "JCT (s)" << std::setw(8) << "steps" << std::setw(10) << "loss"
      << std::setw(10) << "accuracy" << std::setw(10) << "restarts" << std::setw(8) << "rounds"
      << std::setw(8) << "copies" << '\n';
  for (const auto& j : s.jobs) {
    out << std::left << std::setw(6) << j.id << std::setw(20) << j.kind << std::right
        << std::setw(10);
    if (j.finished)
      out << std::setprecision(2) << j.jct;
    else
      out << (j.canceled ? "cancelled" : j.failed ? "failed" : "-");
    out << std::setw(8) << j.steps << std::setw(10) << std::setprecision(4) << j.loss
        << std::setw(10) << j.accuracy << std::setw(10) << j.restarts << std::setw(8) << j.rounds
        << std::setw(8) << j.max_copies << (j.reached_target ? "  (target loss)" : "") << '\n';
  }
  for (const auto& j : s.jobs)
    if (j.failed) out << "job " << j.id << " failed: " << j.failure << '\n';
  out << "schedule metrics (computed as in simulation):\n";
  print_metrics_table(out, {run_metrics(s, o.policy, cl.total_gpus())}, time_unit::seconds);
  if (!o.checkpoint_dir.empty()) {
    out << "checkpoints: " << o.checkpoint_dir;
    if (s.checkpoint_fallbacks + s.restarts_from_scratch + s.checkpoint_pauses > 0)
      out << " (" << s.checkpoint_fallbacks << " fallbacks, " << s.restarts_from_scratch
          << " restarts from scratch, " << s.checkpoint_pauses << " pauses)";
    out << '\n';
  }
}

nlohmann::json to_json(const run_summary& s, const run_settings& o, const cluster& cl) {
  const std::size_t nodes = cl.servers.size();
  nlohmann::json j;
  j["ok"] = s.ok;
  j["error"] = s.error;
  j["policy"] = o.policy;
  j["nodes"] = nodes;
  j["round_length"] = o.round_length;
  j["rounds"] = s.rounds;
  j["seconds"] = s.seconds;
  j["failed_ranks"] = s.failed_ranks;
  j["dispatch_latency"] = s.dispatch_latency;
  j["messages"] = s.messages;
  j["dropped"] = s.dropped;
  j["refused"] = s.refused;
  j["joins"] = s.joins;
  j["checkpoint_dir"] = o.checkpoint_dir;
  j["checkpoint_fallbacks"] = s.checkpoint_fallbacks;
  j["restarts_from_scratch"] = s.restarts_from_scratch;
  j["checkpoint_pauses"] = s.checkpoint_pauses;
  std::ostringstream m;
  write_metrics_json(m, {run_metrics(s, o.policy, cl.total_gpus())});
  j["metrics"] = nlohmann::json::parse(m.str()).at(0);
  j["jobs"] = nlohmann::json::array();
  for (const auto& x : s.jobs) {
    nlohmann::json e;
    e["id"] = x.id;
    e["kind"] = x.kind;
    e["finished"] = x.finished;
    e["canceled"] = x.canceled;
    e["failed"] = x.failed;
    e["state"] = x.state;
    e["failure"] = x.failure;
    e["program_failures"] = x.program_failures;
    e["startup_seconds"] = x.startup_seconds;
    e["arrival"] = x.arrival;
    e["finish"] = x.finish;
    e["jct"] = x.jct;
    e["steps"] = x.steps;
    e["loss"] = x.loss;
    e["accuracy"] = x.accuracy;
    e["restarts"] = x.restarts;
    e["lost_rounds"] = x.lost_rounds;
    e["regressions"] = x.regressions;
    e["planned_gpu_seconds"] = x.planned_gpu_seconds;
    e["busy_gpu_seconds"] = x.busy_gpu_seconds;
    e["throughput"] = x.throughput;
    e["final_rank"] = x.final_rank;
    e["final_round_busy"] = x.final_round_busy;
    e["rounds"] = x.rounds;
    e["max_copies"] = x.max_copies;
    e["reached_target"] = x.reached_target;
    e["checkpoint_fallbacks"] = x.checkpoint_fallbacks;
    e["restarts_from_scratch"] = x.restarts_from_scratch;
    e["checkpoint_write_failures"] = x.checkpoint_write_failures;
    e["paused_rounds"] = x.paused_rounds;
    e["checkpoint"] = x.checkpoint;
    j["jobs"].push_back(std::move(e));
  }
  return j;
}

/// Opens the scheduler to the network: CAF publishes it on loopback only, and the gate
/// (actors/gate.hpp) listens on `bind`:`o.port` and relays to it. Null (after printing why)
/// when either fails.
std::unique_ptr<gate> open_scheduler(caf::actor_system& sys, const caf::actor& sched,
                                     const run_settings& o, const std::string& bind,
                                     std::size_t nodes) {
  auto caf_port = sys.middleman().publish(sched, 0, "127.0.0.1", true);
  if (!caf_port) {
    std::cerr << "tessera: cannot publish the scheduler: " << sys.render(caf_port.error()) << '\n';
    return nullptr;
  }
  gate_limits limits;
  limits.max_message = o.max_message;
  limits.max_connections = static_cast<int>(2 * nodes + 16);
  limits.idle_timeout = std::max(10.0, 3 * o.heartbeat_timeout);
  auto g = gate::open(bind, o.port, *caf_port, sys.node(), limits);
  if (!g) {
    std::cerr << "tessera: " << g.err().message << '\n';
    return nullptr;
  }
  if (o.verbose || !o.secret_file.empty())
    std::cerr << "tessera: scheduler listening on " << bind << ':' << (*g)->port() << '\n';
  return std::move(*g);
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

/// Waits for the run's summary, prints it and writes its JSON; the run's exit code.
int report_run(caf::scoped_actor& listener, const run_settings& o, const run_inputs& in,
               const caf::actor& sched, const caf::actor& node) {
  auto sum = await_summary(listener, o, sched);
  if (!sum) {
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    caf::anon_send_exit(node, caf::exit_reason::kill);
    return failed;
  }
  if (!o.quiet) print_summary(*sum, o, in.cl);
  if (!sum->ok && o.quiet) std::cerr << "tessera: run failed: " << sum->error << '\n';
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << to_json(*sum, o, in.cl).dump(2) << '\n';
    if (!f) std::cerr << "tessera: cannot write " << o.json_out << '\n';
  }
  return sum->ok ? ok : failed;
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
  if (!o.listen.empty()) ss.listen = o.listen;
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
  if (auto st = prepare_state_dir(o.state_dir); !st) {
    std::cerr << "tessera: " << st.err().message << '\n';
    return false;
  }
  auto opened = open_cluster_journal(o.state_dir + "/journal", o.resume);
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
  if (o.resume) {
    int open = 0;
    for (const auto& r : sc.restored) open += is_final(r.life) ? 0 : 1;
    std::cerr << "tessera: resumed " << sc.restored.size() << " jobs from " << o.state_dir
              << "/journal (" << open << " not ended), from round " << sc.first_round << '\n';
  }
  return true;
}

/// Hosts the scheduler (and node 0) in this process. `launch` starts the other nodes once the
/// gate's port is known (fork/exec or MPI_Bcast) and returns false when it could not (it is
/// called with port 0 when the scheduler could not open). `agg` merges forked copies (the
/// MPI backend); null when the launch has none, and then the scheduler does not fork.
int run_rank0(const run_settings& o, const run_inputs& in, const train::trainable_registry& kinds,
              const node_setup& setup, const scheduler_setup& sched_setup,
              const std::function<bool(int port)>& launch,
              const secret_key& key, const std::string& bind,
              std::shared_ptr<comm::aggregator> agg = nullptr) {
  run_actor_config cfg(o.heartbeat_interval, o.heartbeat_timeout);
  caf::actor_system sys{cfg};
  caf::scoped_actor listener{sys};
  auto sc = make_scheduler_config(o, in, key);
  sc.can_sync = agg != nullptr;
  if (o.serve && !attach_journal(o, sc)) {
    launch(0);
    return failed;
  }
  if (sched_setup) sched_setup(sc);
  std::shared_ptr<timeline_file> timeline;
  if (!o.timeline_file.empty()) {
    auto f = timeline_file::open(o.timeline_file, in.cl, "run", o.policy, o.round_length);
    if (!f) {
      std::cerr << "tessera: " << f.err().message << '\n';
      launch(0);
      return failed;
    }
    timeline = std::move(f.value());
    sc.timeline = std::shared_ptr<timeline_recorder>(timeline, &timeline->recorder());
  }
  auto sched = sys.spawn(scheduler_actor, std::move(sc), caf::actor_cast<caf::actor>(listener));
  auto door = open_scheduler(sys, sched, o, bind, in.cl.servers.size());
  if (!door || !launch(door->port())) {
    if (!door) launch(0);
    caf::anon_send_exit(sched, caf::exit_reason::kill);
    return failed;
  }
  bool api_failed = false;
  auto api = open_api(sys, sched, o, kinds, api_failed);
  if (api_failed) {
    listener->send(sched, stop_atom::value);  // the other nodes are started: end them cleanly
  }
  auto node0 = make_node_config(o, in, 0, kinds, setup, key);
  node0.agg = agg;
  auto node = sys.spawn(node_actor, node0, sched);
  int code = report_run(listener, o, in, sched, node);
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

/// Starts node processes 1 .. n-1 of a local run with the command lines `start_node` gives.
std::vector<pid_t> spawn_children(const node_command& start_node, int n, int port,
                                  const std::string& secret_file) {
  std::vector<pid_t> pids;
  for (int r = 1; r < n; ++r) {
    std::vector<std::string> a = start_node(r, port, secret_file);
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execv(argv[0], argv.data());
      std::perror("tessera: exec");
      ::_exit(127);
    }
    if (pid < 0) {
      std::perror("tessera: fork");
      break;
    }
    pids.push_back(pid);
  }
  return pids;
}

/// Waits for the children to exit, killing those left after `grace` seconds. A child killed
/// by a signal before (e.g. an injected fault) counts as exited.
void reap(std::vector<pid_t>& pids, double grace) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<long>(grace * 1000));
  while (!pids.empty()) {
    for (auto it = pids.begin(); it != pids.end();) {
      int status = 0;
      if (::waitpid(*it, &status, WNOHANG) == *it)
        it = pids.erase(it);
      else
        ++it;
    }
    if (pids.empty()) break;
    if (std::chrono::steady_clock::now() >= until) {
      for (pid_t p : pids) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
      pids.clear();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// Loads the inputs, printing the error when they are bad.
std::optional<run_inputs> inputs_or_report(const run_settings& s,
                                           const train::trainable_registry& kinds) {
  auto in = load_inputs(s, kinds);
  if (!in) {
    std::cerr << "tessera: " << in.err().message << '\n';
    return std::nullopt;
  }
  return std::move(*in);
}

/// Connects to the scheduler at host:port and runs node `rank` until the run ends.
int connect_and_run_node(const run_settings& s, const run_inputs& in, int rank,
                         const std::string& host, int port,
                         const train::trainable_registry& kinds, const node_setup& setup,
                         std::shared_ptr<comm::aggregator> agg, const secret_key& key) {
  run_actor_config cfg(s.heartbeat_interval, s.heartbeat_timeout);
  caf::actor_system sys{cfg};
  auto sched = connect(sys, host, port, s.connect_timeout);
  if (!sched) {
    std::cerr << "tessera: node rank " << rank << ": " << sched.err().message << '\n';
    return failed;
  }
  auto nc = make_node_config(s, in, rank, kinds, setup, key);
  nc.agg = std::move(agg);
  return run_node(sys, nc, *sched, s.timeout + s.connect_timeout + 30);
}

/// The address an IPv4 host name resolves to that is not a loopback one, or "".
std::string routable_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return "";
  std::string found;
  for (auto* a = res; a && found.empty(); a = a->ai_next) {
    char buf[64] = {0};
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if (::inet_ntop(AF_INET, &in4->sin_addr, buf, sizeof buf) && std::string(buf).rfind("127.", 0) != 0)
      found = buf;
  }
  ::freeaddrinfo(res);
  return found;
}

/// What rank 0 of an mpirun run tells the others: where the scheduler listens, the secret.
struct mpi_rendezvous {
  int port = 0;                                  ///< 0: the scheduler did not open
  char address[256] = {0};                       ///< address to dial
  std::uint8_t secret[secret_bytes] = {0};       ///< the cluster secret
};

/// True on every rank when every rank runs on rank 0's host (collective).
bool all_on_rank0_host() {
  char host[256] = {0};
  std::snprintf(host, sizeof host, "%s", host_name().c_str());
  char root[256] = {0};
  std::memcpy(root, host, sizeof host);
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = std::strncmp(root, host, sizeof host) == 0 ? 1 : 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

/// Where rank 0's scheduler listens: --bind, else loopback when every rank is on this host,
/// else this host's routable address (every interface, with a warning, when it has none).
std::string mpi_bind_address(const run_settings& s, bool one_host) {
  if (!s.bind.empty()) return s.bind;
  if (one_host) return "127.0.0.1";
  const auto a = routable_address(host_name());
  if (!a.empty()) return a;
  std::cerr << "tessera: " << host_name() << " resolves to no routable IPv4 address; the "
            << "scheduler listens on every interface (set --bind to choose one)\n";
  return "0.0.0.0";
}

/// Every rank's inputs and aggregator under mpirun, or the problem that stops this rank.
struct mpi_start {
  std::optional<run_inputs> in;
  std::shared_ptr<comm::aggregator> agg;
  std::string problem;  ///< empty when this rank can go on
};

mpi_start prepare_mpi_rank(const run_settings& s, const train::trainable_registry& kinds,
                           int rank, int size) {
  mpi_start st;
  auto in = load_inputs(s, kinds);
  if (!in) {
    st.problem = in.err().message;
    return st;
  }
  st.in = std::move(*in);
  if (auto bad = check_size(s, st.in->cl, size, "mpirun -np " + std::to_string(size))) {
    st.problem = *bad;
    return st;
  }
  if (auto found = find_node_gpus(s, *st.in, rank); !found) {
    st.problem = "node rank " + std::to_string(rank) + ": " + found.err().message;
    return st;
  }
  if (auto made = comm::mpi_aggregator::create(); made)
    st.agg = std::move(made.value());
  else
    st.problem = made.err().message;
  return st;
}

/// A non-zero rank under mpirun: receives the scheduler's address and the secret from rank 0,
/// runs its node.
int run_mpi_node(const run_settings& s, const run_inputs& in, int rank,
                 const train::trainable_registry& kinds, const node_setup& setup,
                 std::shared_ptr<comm::aggregator> agg) {
  mpi_rendezvous rv;
  MPI_Bcast(&rv, sizeof rv, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rv.port == 0) return failed;
  const secret_key key(rv.secret, rv.secret + secret_bytes);
  return connect_and_run_node(s, in, rank, rv.address, rv.port, kinds, setup, std::move(agg), key);
}

/// A fresh secret, also written to `s.secret_file` when set (for joining nodes); null after
/// printing why when either fails.
std::optional<secret_key> run_secret(const run_settings& s) {
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

/// A directory only this user can enter, holding the secret file of a --local run's
/// children; removed with everything in it when the run ends.
struct private_dir {
  std::string path;
  ~private_dir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

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
  if (ec) std::cerr << "tessera: cannot write the status file " << path << ": " << ec.message() << '\n';
}

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

int run_local(const run_settings& s, const train::trainable_registry& kinds,
              const node_command& start_node, const node_setup& setup,
              const scheduler_setup& sched_setup) {
  auto in = inputs_or_report(s, kinds);
  if (!in) return bad_input;
  // With a secret file the servers --local does not start may join (tessera node --join)
  // before the registration time-out; without one every server needs a process here.
  const bool joins = !s.secret_file.empty() && s.local >= 1 &&
                     s.local <= static_cast<int>(in->cl.servers.size());
  if (auto bad = check_size(s, in->cl, s.local, "--local " + std::to_string(s.local));
      bad && !joins) {
    std::cerr << "tessera: " << *bad << '\n';
    return bad_input;
  }
  if (auto found = find_node_gpus(s, *in, 0); !found) {
    std::cerr << "tessera: node rank 0: " << found.err().message << '\n';
    return exit_code_for(found.err());
  }
  auto key = run_secret(s);
  if (!key) return failed;
  private_dir dir;
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-secret-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "tessera: cannot create a private directory for the cluster secret\n";
    return failed;
  }
  dir.path = tmpl;
  const std::string secret_path = dir.path + "/secret";
  if (auto st = write_secret_file(secret_path, *key); !st) {
    std::cerr << "tessera: " << st.err().message << '\n';
    return failed;
  }
  std::vector<pid_t> children;
  const std::string bind = s.bind.empty() ? "127.0.0.1" : s.bind;
  const int code = run_rank0(s, *in, kinds, setup, sched_setup, [&](int port) {
    if (port == 0) return false;
    children = spawn_children(start_node, s.local, port, secret_path);
    return static_cast<int>(children.size()) == s.local - 1;
  }, *key, bind);
  reap(children, 10);
  return code;
}

int run_node_process(const run_settings& s, const node_process& p,
                     const train::trainable_registry& kinds, const node_setup& setup) {
  auto in = inputs_or_report(s, kinds);
  if (!in) return bad_input;
  if (p.rank < 0 || p.rank >= static_cast<int>(in->cl.servers.size())) {
    std::cerr << "tessera: --rank " << p.rank << " is not a server of " << s.cluster_file
              << " (it lists " << in->cl.servers.size() << ")\n";
    return bad_input;
  }
  if (s.secret_file.empty()) {
    std::cerr << "tessera: a node process needs the cluster secret: --secret-file\n";
    return bad_input;
  }
  if (auto found = find_node_gpus(s, *in, p.rank); !found) {
    std::cerr << "tessera: node rank " << p.rank << ": " << found.err().message << '\n';
    return exit_code_for(found.err());
  }
  auto key = read_secret_file(s.secret_file);
  if (!key) {
    std::cerr << "tessera: " << key.err().message << '\n';
    return exit_code_for(key.err());
  }
  return connect_and_run_node(s, *in, p.rank, p.host, p.port, kinds, setup, nullptr, *key);
}

/// MPI_Finalize, bounded: it is collective, and after a rank died (or while a communicator
/// thread is stuck in a collective with it) it can wait forever. The run's outcome is known by
/// then, so past `grace` seconds the process flushes its output and exits with `code`.
int finalize_mpi(int code, double grace) {
  std::atomic<bool> done{false};
  std::thread watchdog([&done, code, grace] {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<long>(grace * 1000));
    while (!done.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done.load()) return;
    std::cout.flush();
    std::cerr << "tessera: MPI_Finalize did not return within " << grace
              << " s (a lost rank's collectives); exiting with the run's status\n";
    std::_Exit(code);
  });
  MPI_Finalize();
  done.store(true);
  watchdog.join();
  return code;
}

int run_mpi(const run_settings& s, const train::trainable_registry& kinds,
            const node_setup& setup, const scheduler_setup& sched_setup) {
  int provided = 0;
  // MPI_THREAD_MULTIPLE: the aggregator's communicator threads call MPI concurrently.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto st = prepare_mpi_rank(s, kinds, rank, size);
  int good = st.problem.empty() ? 1 : 0, all_good = 0, rank0_good = good;
  MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Bcast(&rank0_good, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!all_good) {
    // One message: rank 0's, else those of the ranks whose view differs (e.g. a file they
    // cannot read).
    if (!st.problem.empty() && (rank == 0 || rank0_good == 1))
      std::cerr << "tessera: " << st.problem << '\n';
    st.agg.reset();
    if (rank == 0) write_status_file(s.status_file, bad_input);
    MPI_Finalize();
    return bad_input;
  }
  const bool one_host = all_on_rank0_host();
  int code = ok;
  if (rank == 0) {
    auto key = run_secret(s);
    const std::string bind = mpi_bind_address(s, one_host);
    code = run_rank0(s, *st.in, kinds, setup, sched_setup, [&](int port) {
      mpi_rendezvous rv;
      rv.port = key ? port : 0;
      std::snprintf(rv.address, sizeof rv.address, "%s",
                    bind == "0.0.0.0" ? host_name().c_str() : bind.c_str());
      if (key) std::copy(key->begin(), key->end(), rv.secret);
      MPI_Bcast(&rv, sizeof rv, MPI_BYTE, 0, MPI_COMM_WORLD);
      return rv.port != 0;
    }, key ? *key : secret_key{}, bind, st.agg);
  } else {
    code = run_mpi_node(s, *st.in, rank, kinds, setup, st.agg);
  }
  st.agg.reset();  // its communicator threads end (or are left stuck) before MPI does
  if (rank == 0) write_status_file(s.status_file, code);
  return finalize_mpi(code, 10);
}

}  // namespace tessera::actors
