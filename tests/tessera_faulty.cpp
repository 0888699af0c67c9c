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
///   --fault-kill-merge-rank R --fault-kill-merge-round N
///                                               node rank R SIGKILLs its own process when, from
///                                               round N on, a forked copy it leads starts to
///                                               merge with the other copies
///   --fault-kill-registering-rank R             node rank R SIGKILLs itself half way through
///                                               its registration (challenge received, hello
///                                               not sent)
///   --fault-corrupt-job J --fault-corrupt-round N
///                                               job J's checkpoint of round N gets a flipped
///                                               payload byte once written; every node loads
///                                               its copies' state from disk each round
///   --fault-kill-write-rank R --fault-kill-write-round N
///                                               node rank R SIGKILLs its own process inside its
///                                               first checkpoint write from round N on: the
///                                               temporary file is written, not yet renamed
///   --fault-full-from-round A --fault-full-to-round B
///                                               checkpoint writes at the end of rounds A..B
///                                               fail with ENOSPC (a full directory), and so do
///                                               the scheduler's probes after those rounds
///   --fault-stop-rank R --fault-stop-round N --fault-stop-seconds S
///                                               node rank R is SIGSTOPped half way through
///                                               round N and SIGCONTed S seconds later (by a
///                                               helper process it forks)
///   --bench-flood N --bench-flood-report DIR    every node sends the scheduler N heartbeats
///                                               back to back once registered, then a request
///                                               it answers; DIR/flood-<rank>.txt gets
///                                               "<N> <start ns> <end ns>" (steady clock), end
///                                               being the answer's arrival
/// The hook options may come anywhere; a --local run passes them on to its node processes.

#include <cerrno>
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "actors/auth.hpp"
#include "actors/node_actor.hpp"
#include "actors/protocol.hpp"
#include "actors/scheduler_actor.hpp"
#include "runtime/node/train/checkpoint.hpp"
#include "launcher/run_command.hpp"
#include "runtime/core/result.hpp"

namespace {

using namespace tessera;

/// The hook options, by name without the leading dashes.
const char* const hook_options[] = {
    "fault-kill-rank",        "fault-kill-round",       "fault-protocol-rank",
    "fault-protocol-version", "fault-corrupt-job",      "fault-corrupt-round",
    "fault-kill-write-rank",  "fault-kill-write-round", "fault-full-from-round",
    "fault-full-to-round",    "fault-stop-rank",        "fault-stop-round",
    "fault-stop-seconds",     "fault-rogue-rank",       "fault-kill-registering-rank",
    "fault-kill-merge-rank",  "fault-kill-merge-round", "bench-flood",
    "bench-flood-report"};

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

/// The integer hook options, by name (-1 or the default when absent).
using hook_values = std::map<std::string, long long>;

/// Every integer hook option's value, or the first bad one's error.
result<hook_values> integers(const split_args& a) {
  hook_values v;
  for (const char* name : hook_options) {
    if (std::string(name) == "bench-flood-report") continue;
    const long long fallback = std::string(name) == "fault-protocol-version"
                                   ? actors::protocol_version
                               : std::string(name) == "bench-flood" ? 0
                                                                    : -1;
    auto x = integer(a, name, fallback);
    if (!x) return x.err();
    v[name] = *x;
  }
  return v;
}

/// Flips one payload byte of checkpoint `path` in place.
void flip_payload_byte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(train::checkpoint_header_size + 7);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x20));
}

/// Stops this process for `seconds`: a forked helper sends it SIGSTOP, sleeps, sends SIGCONT.
void stop_self(double seconds) {
  const pid_t me = ::getpid();
  const pid_t helper = ::fork();
  if (helper == 0) {
    ::kill(me, SIGSTOP);
    const auto ns = static_cast<long long>(seconds * 1e9);
    timespec t{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    while (::nanosleep(&t, &t) != 0) {
    }
    ::kill(me, SIGCONT);
    ::_exit(0);
  }
  if (helper > 0) ::waitpid(helper, nullptr, 0);
}

/// Node faults in a checkpoint's life: a corrupted file, a kill inside a write, a full disk.
void add_checkpoint_faults(actors::node_config& nc, const hook_values& v) {
  auto& copy = nc.hooks.copy;
  if (const auto job = v.at("fault-corrupt-job"); job >= 0) {
    copy.always_load = true;
    copy.after_checkpoint = [job, round = v.at("fault-corrupt-round")](const actors::start_copy& o,
                                                                       std::int64_t r,
                                                                       const std::string& path) {
      if (o.job == job && r == round) flip_payload_byte(path);
    };
  }
  if (nc.rank == v.at("fault-kill-merge-rank"))
    copy.before_merge = [round = v.at("fault-kill-merge-round")](const actors::start_copy&,
                                                                 std::int64_t r) {
      if (r >= round) ::kill(::getpid(), SIGKILL);
    };
  if (nc.rank == v.at("fault-kill-write-rank"))
    copy.before_checkpoint_rename = [round = v.at("fault-kill-write-round")](
                                        const actors::start_copy&, std::int64_t r) {
      if (r >= round) ::kill(::getpid(), SIGKILL);
    };
  if (const auto from = v.at("fault-full-from-round"); from >= 0)
    copy.checkpoint_errno = [from, to = v.at("fault-full-to-round")](const actors::start_copy&,
                                                                     std::int64_t r) {
      return r >= from && r <= to ? ENOSPC : 0;
    };
}

/// Node faults of a whole process: killed or stopped in the middle of a round, killed half
/// registered, or a rogue that ignores the scheduler's proof.
void add_process_faults(actors::node_config& nc, const hook_values& v) {
  if (nc.rank == v.at("fault-kill-registering-rank"))
    nc.hooks.before_hello = [] { ::kill(::getpid(), SIGKILL); };
  nc.hooks.skip_scheduler_check = nc.rank == v.at("fault-rogue-rank");
  if (nc.rank == v.at("fault-kill-rank"))
    nc.hooks.on_round_start = [round = v.at("fault-kill-round")](std::int64_t r, double length) {
      if (r != round) return;
      std::thread([length] {
        std::this_thread::sleep_for(std::chrono::duration<double>(length / 2));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    };
  if (nc.rank == v.at("fault-stop-rank"))
    nc.hooks.on_round_start = [round = v.at("fault-stop-round"),
                               seconds = static_cast<double>(v.at("fault-stop-seconds"))](
                                  std::int64_t r, double length) {
      if (r != round) return;
      std::thread([length, seconds] {
        std::this_thread::sleep_for(std::chrono::duration<double>(length / 2));
        stop_self(seconds);
      }).detach();
    };
}

/// The node_setup the hook options describe.
result<actors::node_setup> make_setup(const split_args& a) {
  auto v = integers(a);
  if (!v) return v.err();
  const auto it = a.hooks.find("bench-flood-report");
  const std::string report = it == a.hooks.end() ? "." : it->second;
  return actors::node_setup([v = *v, report](actors::node_config& nc) {
    if (nc.rank == v.at("fault-protocol-rank"))
      nc.version = static_cast<std::uint32_t>(v.at("fault-protocol-version"));
    add_process_faults(nc, v);
    add_checkpoint_faults(nc, v);
    if (const auto flood_n = v.at("bench-flood"); flood_n > 0)
      nc.hooks.on_registered = [rank = nc.rank, flood_n, report](caf::event_based_actor* self,
                                                                 const caf::actor& sched) {
        flood(self, sched, rank, flood_n, report);
      };
  });
}

/// The scheduler_setup the hook options describe: the full disk's probes.
result<actors::scheduler_setup> make_scheduler_setup(const split_args& a) {
  auto from = integer(a, "fault-full-from-round", -1);
  auto to = integer(a, "fault-full-to-round", -1);
  if (!from) return from.err();
  if (!to) return to.err();
  return actors::scheduler_setup([from = *from, to = *to](actors::scheduler_config& sc) {
    if (from >= 0)
      sc.hooks.checkpoint_probe_errno = [from, to](std::int64_t r) {
        return r >= from && r <= to ? ENOSPC : 0;
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
  auto sched_setup = make_scheduler_setup(*a);
  for (const error* e :
       {setup ? nullptr : &setup.err(), sched_setup ? nullptr : &sched_setup.err()})
    if (e) {
      std::cerr << "tessera_faulty: " << e->message << '\n';
      return exit_code::bad_input;
    }
  // The node processes of a --local run are this binary again, with the same hooks.
  std::vector<std::string> prefix;
  for (const auto& [name, value] : a->hooks) prefix.insert(prefix.end(), {"--" + name, value});
  return cli::run_command(a->rest, train::builtin_trainables(), prefix, *setup, *sched_setup);
}
