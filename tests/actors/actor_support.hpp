#pragma once
// Helpers shared by the single-process actor tests (the CAF-dependent companion of
// tests/support.hpp): an actor system configured like a run's, a small cluster, jobs, and the
// configurations of a scheduler and nodes wired together in one process.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/node_actor.hpp"
#include "actors/protocol.hpp"
#include "actors/scheduler_actor.hpp"
#include "policies/registry.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/node/train/trainable.hpp"
#include "tests/support.hpp"

namespace tessera::actors::test {

/// An actor_system_config with the protocol registered (no middleman: one process); its
/// pool shares one queue, as a run's processes do (actors/launch.cpp, run_actor_config).
struct test_config : caf::actor_system_config {
  test_config() {
    register_protocol(*this);
    set("scheduler.policy", caf::atom("sharing"));
    set("scheduler.max-threads", static_cast<std::size_t>(2));
    set("logger.console", caf::atom("none"));
  }
};

/// An actor system config whose scheduler is CAF's test coordinator (one thread, a virtual
/// clock: nothing sleeps, a test advances time and runs the queued messages).
struct virtual_config : caf::actor_system_config {
  virtual_config() {
    register_protocol(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.console", caf::atom("none"));
  }
};

/// An actor system on the test coordinator, and the coordinator.
struct virtual_system {
  virtual_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& coord =
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
};

/// The shared helpers under the names the actor tests use.
using temp_dir = tessera::test::scratch_dir;
using tessera::test::same_bits;
using tessera::test::uninterrupted;

/// One server per entry of `speeds`, each of its own GPU type, 1 GPU.
inline cluster speed_cluster(const std::vector<double>& speeds) {
  static const char* types[] = {"v100", "p100", "k80", "t4", "a100", "h100"};
  std::vector<server> sv;
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    server s;
    s.name = "node-" + std::to_string(i);
    s.gpu_type = types[i % 6];
    s.gpus = 1;
    s.speed = speeds[i];
    sv.push_back(s);
  }
  return make_cluster(std::move(sv));
}

/// A run job of `kind` with `steps` steps.
inline run_job make_run_job(job_id id, const std::string& kind, std::int64_t steps,
                            double step_time, std::uint64_t seed) {
  run_job j;
  j.spec.id = id;
  j.spec.job_type = kind;
  j.spec.total_steps = static_cast<double>(steps);
  j.kind = kind;
  j.seed = seed;
  j.step_time = step_time;
  return j;
}

/// The cluster secret of the tests' schedulers and nodes (a fixed one: tests need no fresh
/// randomness to prove it).
inline secret_key test_secret() { return secret_key(secret_bytes, 0x5a); }

/// The hello of server `rank` of `cl` from host `host` (no proof yet).
inline node_hello hello_for(const cluster& cl, int rank, const std::string& host) {
  node_hello h;
  h.rank = rank;
  h.name = cl.servers[rank].name;
  h.gpu_type = cl.servers[rank].gpu_type;
  h.gpus = cl.servers[rank].gpus;
  h.speed = cl.servers[rank].speed;
  h.host = host;
  return h;
}

/// `h` with its proof of `key` over the nonces `n` (what a node sends after its challenge).
inline node_hello proven(node_hello h, const nonce_pair& n, const secret_key& key = test_secret()) {
  h.proof = proof_of(key, hello_proof_parts(h, n));
  return h;
}

/// A fixed client nonce for scripted nodes.
inline std::vector<std::uint8_t> test_nonce() { return std::vector<std::uint8_t>(nonce_bytes, 7); }

/// A scheduler configuration for tests: short rounds, quick failure detection.
inline scheduler_config make_sched_config(
    const cluster& cl, std::vector<run_job> jobs, const std::string& ckpt_dir,
    const std::string& policy_name = "max_min_fairness_perf") {
  scheduler_config sc;
  sc.cl = cl;
  sc.jobs = std::move(jobs);
  auto p = make_policy(policy_name);
  REQUIRE(p);
  sc.pol = std::shared_ptr<policy>(std::move(*p));
  sc.known_kinds = train::builtin_trainables().kinds();
  sc.round_length = 0.3;
  sc.checkpoint_dir = ckpt_dir;
  sc.register_timeout = 5;
  sc.heartbeat_interval = 0.1;
  sc.liveness = liveness_for(1.0);
  sc.report_grace = 2;
  sc.max_seconds = 60;
  sc.secret = test_secret();
  return sc;
}

/// A node configuration for server `rank` of `cl`.
inline node_config make_node_config(const cluster& cl, int rank,
                                    const train::trainable_registry& kinds) {
  node_config nc;
  nc.rank = rank;
  nc.srv = cl.servers[rank];
  nc.host = "test";
  nc.kinds = &kinds;
  nc.register_timeout = 5;
  nc.secret = test_secret();
  return nc;
}

/// Waits for the run_summary sent to `listener`; fails the test after `limit` seconds.
inline run_summary await_summary(caf::scoped_actor& listener, double limit) {
  std::optional<run_summary> sum;
  listener->receive(
      [&](run_summary& s) { sum = std::move(s); },
      caf::after(std::chrono::milliseconds(static_cast<long>(limit * 1000))) >> [] {});
  REQUIRE(sum);
  return std::move(*sum);
}

}  // namespace tessera::actors::test
