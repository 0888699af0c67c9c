/// @file launch_local.cpp
/// The local layout of a run (actors/run.hpp): this process hosts the scheduler and node 0
/// and starts the other node processes itself (fork/exec), handing them the cluster secret in
/// a private directory; each of them runs run_node_process.

#include <sys/prctl.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/auth.hpp"
#include "actors/launch.hpp"
#include "actors/run.hpp"

namespace tessera::actors {

namespace {

using exit_code::bad_input;
using exit_code::failed;
using launch::check_size;
using launch::connect_and_run_node;
using launch::find_node_gpus;
using launch::load_inputs;
using launch::run_inputs;
using launch::run_rank0;
using launch::run_secret;

/// Starts node process `rank` of a local run with the command line `start_node` gives; its
/// pid, or -1 (after printing why).
pid_t spawn_node(const node_command& start_node, int rank, int port,
                 const std::string& secret_file) {
  std::vector<std::string> a = start_node(rank, port, secret_file);
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A node process ends with the process that started it (SIGTERM: it drains), besides
    // ending when its link to the scheduler drops: a served node never gives up registering.
    // Forked from threads that live as long as rank 0 does (the signal follows the forking
    // thread).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(0);
    ::execv(argv[0], argv.data());
    std::perror("tessera: exec");
    ::_exit(127);
  }
  if (pid < 0) std::perror("tessera: fork");
  return pid;
}

/// Starts node processes 1 .. n-1 of a local run (pids[r - 1] is rank r's).
std::vector<pid_t> spawn_children(const node_command& start_node, int n, int port,
                                  const std::string& secret_file) {
  std::vector<pid_t> pids;
  for (int r = 1; r < n; ++r) {
    const pid_t pid = spawn_node(start_node, r, port, secret_file);
    if (pid < 0) break;
    pids.push_back(pid);
  }
  return pids;
}

/// Under `serve --local`: keeps node processes 1 .. n-1 running for as long as the cluster.
/// One that dies (a signal, or a non-zero exit: it was lost or fenced) is started again and
/// registers anew, as `tessera node --join` would; the back-off doubles from 1 s to 30 s while
/// it keeps dying within a minute of its start. One that exits 0 left on purpose (drained, or
/// shut down with the cluster) and stays down.
class node_keeper {
 public:
  node_keeper(const node_command& start_node, int port, std::string secret_file,
              std::vector<pid_t>& pids)
      : start_(start_node),
        port_(port),
        secret_(std::move(secret_file)),
        pids_(pids),
        ranks_(pids.size()),
        thread_([this] { run(); }) {}
  ~node_keeper() {
    stop_ = true;
    thread_.join();
  }
  node_keeper(const node_keeper&) = delete;
  node_keeper& operator=(const node_keeper&) = delete;

 private:
  using clock = std::chrono::steady_clock;
  struct rank_life {
    clock::time_point started = clock::now();
    clock::time_point restart_at{};
    double backoff = 1;
    bool waiting = false;  ///< dead, to be started at restart_at
  };

  void run() {
    while (!stop_) {
      for (std::size_t i = 0; i < pids_.size() && !stop_; ++i) watch(i);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  /// Rank i + 1: notices its death, and starts it again when its back-off is over.
  void watch(std::size_t i) {
    auto& life = ranks_[i];
    const int rank = static_cast<int>(i) + 1;
    if (life.waiting) {
      if (clock::now() < life.restart_at) return;
      const pid_t pid = spawn_node(start_, rank, port_, secret_);
      if (pid < 0) {
        life.restart_at = clock::now() + std::chrono::seconds(30);
        return;
      }
      pids_[i] = pid;
      life = rank_life{clock::now(), {}, life.backoff, false};
      return;
    }
    int status = 0;
    if (pids_[i] <= 0 || ::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) return;
    const pid_t dead = pids_[i];
    pids_[i] = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;  // it left on purpose
    if (clock::now() - life.started > std::chrono::minutes(1)) life.backoff = 1;
    const std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                                : "exit " + std::to_string(WEXITSTATUS(status));
    std::cerr << "tessera: node rank " << rank << " (pid " << dead << ") ended (" << how
              << "); starting it again in " << life.backoff << " s\n";
    life.waiting = true;
    life.restart_at =
        clock::now() + std::chrono::milliseconds(static_cast<long>(life.backoff * 1000));
    life.backoff = std::min(30.0, 2 * life.backoff);
  }

  const node_command& start_;
  const int port_;
  const std::string secret_;
  std::vector<pid_t>& pids_;
  std::vector<rank_life> ranks_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  ///< last: starts once the rest is set
};

/// Waits for the children to exit, killing those left after `grace` seconds. A child killed
/// by a signal before (e.g. an injected fault) counts as exited.
void reap(std::vector<pid_t>& pids, double grace) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(grace * 1000));
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

int run_local(const run_settings& s, const train::trainable_registry& kinds,
              const node_command& start_node, const node_setup& setup,
              const scheduler_setup& sched_setup) {
  auto in = inputs_or_report(s, kinds);
  if (!in) return bad_input;
  // With a secret file the servers --local does not start may join (tessera node --join)
  // before the registration time-out; without one every server needs a process here.
  const bool joins =
      !s.secret_file.empty() && s.local >= 1 && s.local <= static_cast<int>(in->cl.servers.size());
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
  std::unique_ptr<node_keeper> keeper;  // serve: replaces the node processes that die
  const std::string bind = s.bind.empty() ? "127.0.0.1" : s.bind;
  const int code = run_rank0(
      s, *in, kinds, setup, sched_setup,
      [&](int port) {
        if (port == 0) return false;
        children = spawn_children(start_node, s.local, port, secret_path);
        const bool all = static_cast<int>(children.size()) == s.local - 1;
        if (all && s.serve)
          keeper = std::make_unique<node_keeper>(start_node, port, secret_path, children);
        return all;
      },
      *key, bind);
  keeper.reset();  // no restarts while the cluster ends
  children.erase(std::remove(children.begin(), children.end(), pid_t{-1}), children.end());
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

}  // namespace tessera::actors
