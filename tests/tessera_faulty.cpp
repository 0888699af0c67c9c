/// @file tessera_faulty.cpp
/// `tessera run` with fault injection and benchmark hooks, for the multi-process tests
/// (tests/mpi/test_mpi_run.cpp) and bench/actor_dispatch_bench.cpp. Built with the tests, never
/// installed: the production `tessera` binary has none of these options.
///
///   tessera_faulty [hook options] <tessera run options>
///   --fault-kill-rank R --fault-kill-round N    node rank R SIGKILLs its own process half way
///                                               through round N (R > 0: rank 0 hosts the
///                                               scheduler)
///   --fault-protocol-rank R --fault-protocol-version V
///                                               node rank R claims protocol version V
///   --fault-rogue-rank R                        node rank R sends its hello even when the
///                                               scheduler did not prove the secret (a rogue
///                                               without it, e.g. with --join)
///   --fault-kill-registering-rank R             node rank R SIGKILLs itself half way through
///                                               its registration (challenge received, hello
///                                               not sent)
///   --bench-flood N --bench-flood-report DIR    every node sends the scheduler N heartbeats
///                                               back to back once registered, then a request
///                                               it answers; DIR/flood-<rank>.txt gets
///                                               "<N> <start ns> <end ns>" (steady clock), end
///                                               being the answer's arrival
/// The hook options may come anywhere; a --local run passes them on to its node processes.

#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <signal.h>
#include <unistd.h>

#include "actors/auth.hpp"
#include "actors/node_actor.hpp"
#include "actors/protocol.hpp"
#include "launcher/run_command.hpp"
#include "runtime/result.hpp"

namespace {

using namespace tessera;

/// The hook options, by name without the leading dashes.
const char* const hook_options[] = {"fault-kill-rank",       "fault-kill-round",
                                    "fault-protocol-rank",   "fault-protocol-version",
                                    "bench-flood",           "bench-flood-report",
                                    "fault-rogue-rank",      "fault-kill-registering-rank"};

/// The hook options given (name -> value) and the other arguments.
struct split_args {
  std::map<std::string, std::string> hooks;
  std::vector<std::string> rest;
};

/// Takes the hook options (`--name value` or `--name=value`) out of `args`.
result<split_args> split(const std::vector<std::string>& args) {
  split_args out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name;
    for (const char* h : hook_options) {
      const std::string flag = std::string("--") + h;
      if (args[i] == flag || args[i].rfind(flag + "=", 0) == 0) name = h;
    }
    if (name.empty()) {
      out.rest.push_back(args[i]);
      continue;
    }
    const auto eq = args[i].find('=');
    if (eq != std::string::npos) {
      out.hooks[name] = args[i].substr(eq + 1);
    } else if (i + 1 < args.size()) {
      out.hooks[name] = args[++i];
    } else {
      return error{error_kind::invalid_input, "--" + name + " needs a value"};
    }
  }
  return out;
}

/// The integer value of hook option `name`, `fallback` when absent.
result<long long> integer(const split_args& a, const std::string& name, long long fallback) {
  const auto it = a.hooks.find(name);
  if (it == a.hooks.end()) return fallback;
  long long v = 0;
  const auto& s = it->second;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    return error{error_kind::invalid_input, "--" + name + ": '" + s + "' is not an integer"};
  return v;
}

/// Sends `n` heartbeats, then a request the scheduler answers after handling them (it handles
/// one sender's messages in order), and writes the times to `dir`/flood-<rank>.txt.
void flood(caf::event_based_actor* self, const caf::actor& scheduler, std::int32_t rank,
           long long n, const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  for (long long k = 0; k < n; ++k) self->send(scheduler, actors::heartbeat{k});
  // An auth_request: any sender gets its answer, and after the heartbeats before it.
  self->request(scheduler, std::chrono::seconds(60),
                actors::auth_request{std::vector<std::uint8_t>(actors::nonce_bytes, 1)})
      .then(
          [=](const actors::auth_challenge&) {
            const auto end = std::chrono::steady_clock::now();
            std::ofstream(dir + "/flood-" + std::to_string(rank) + ".txt")
                << n << ' ' << start.time_since_epoch().count() << ' '
                << end.time_since_epoch().count() << '\n';
          },
          [=](caf::error&) {
            std::cerr << "tessera_faulty: node rank " << rank << ": no answer to the flood\n";
          });
}

/// The node_setup the hook options describe.
result<actors::node_setup> make_setup(const split_args& a) {
  const auto kill_rank = integer(a, "fault-kill-rank", -1);
  const auto kill_round = integer(a, "fault-kill-round", -1);
  const auto protocol_rank = integer(a, "fault-protocol-rank", -1);
  const auto protocol = integer(a, "fault-protocol-version", actors::protocol_version);
  const auto flood_n = integer(a, "bench-flood", 0);
  const auto rogue_rank = integer(a, "fault-rogue-rank", -1);
  const auto kill_registering = integer(a, "fault-kill-registering-rank", -1);
  for (const auto* r : {&kill_rank, &kill_round, &protocol_rank, &protocol, &flood_n, &rogue_rank,
                        &kill_registering})
    if (!*r) return r->err();
  const auto it = a.hooks.find("bench-flood-report");
  const std::string report = it == a.hooks.end() ? "." : it->second;
  return actors::node_setup([kill_rank = *kill_rank, kill_round = *kill_round,
                             protocol_rank = *protocol_rank, protocol = *protocol,
                             flood_n = *flood_n, report, rogue_rank = *rogue_rank,
                             kill_registering = *kill_registering](actors::node_config& nc) {
    if (nc.rank == kill_registering) nc.hooks.before_hello = [] { ::kill(::getpid(), SIGKILL); };
    if (nc.rank == protocol_rank) nc.version = static_cast<std::uint32_t>(protocol);
    nc.hooks.skip_scheduler_check = nc.rank == rogue_rank;
    if (nc.rank == kill_rank)
      nc.hooks.on_round_start = [kill_round](std::int64_t round, double length) {
        if (round != kill_round) return;
        std::thread([length] {
          std::this_thread::sleep_for(std::chrono::duration<double>(length / 2));
          ::kill(::getpid(), SIGKILL);
        }).detach();
      };
    if (flood_n > 0)
      nc.hooks.on_registered = [rank = nc.rank, flood_n, report](caf::event_based_actor* self,
                                                                 const caf::actor& sched) {
        flood(self, sched, rank, flood_n, report);
      };
  });
}

}  // namespace

int main(int argc, char** argv) {
  auto a = split(std::vector<std::string>(argv + 1, argv + argc));
  if (!a) {
    std::cerr << "tessera_faulty: " << a.err().message << '\n';
    return exit_code::bad_input;
  }
  auto setup = make_setup(*a);
  if (!setup) {
    std::cerr << "tessera_faulty: " << setup.err().message << '\n';
    return exit_code::bad_input;
  }
  // The node processes of a --local run are this binary again, with the same hooks.
  std::vector<std::string> prefix;
  for (const auto& [name, value] : a->hooks) prefix.insert(prefix.end(), {"--" + name, value});
  return cli::run_command(a->rest, train::builtin_trainables(), prefix, *setup);
}
