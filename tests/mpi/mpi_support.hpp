#pragma once
/// @file mpi_support.hpp
/// Helpers of the multi-process tests (tests/mpi): inputs, mpirun command lines, summaries,
/// and processes started in the background (a scheduler to attack, a node to kill).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <algorithm>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/trainable.hpp"
#include "tests/support.hpp"

namespace tessera::test {

using json = nlohmann::json;

/// `mpirun -np <np>` of `binary` (tessera run, or tessera_faulty for injected faults).
inline std::string mpirun(int np, bool recovery = false,
                          const std::string& binary = std::string(TESSERA_BINARY) + " run") {
  return "mpirun -np " + std::to_string(np) + " --oversubscribe" +
         (recovery ? " --enable-recovery" : "") + " " + binary;
}

/// ` --timeout S` for a run that must end within `seconds` on an idle host: a hang guard,
/// scaled by the suite's time scale (a busy host makes programs start and step slower).
inline std::string run_timeout(double seconds) {
  return " --timeout " + std::to_string(static_cast<int>(seconds * time_scale() + 0.5));
}

/// One one-GPU server per speed, each of its own GPU type.
inline std::string cluster_toml(const std::vector<double>& speeds) {
  static const char* types[] = {"v100", "p100", "k80", "t4", "a100", "h100"};
  std::ostringstream s;
  s << "[cluster]\nname = \"test\"\n";
  for (std::size_t i = 0; i < speeds.size(); ++i)
    s << "\n[[cluster.server]]\nname = \"node-" << i << "\"\ngpu_type = \"" << types[i % 6]
      << "\"\ngpus = 1\nspeed = " << speeds[i] << "\n";
  return s.str();
}

/// `n` jobs alternating softmax_regression and mlp, seeds id + 1.
inline std::string jobs_toml(int n, int steps, double step_time) {
  std::ostringstream s;
  for (int i = 0; i < n; ++i)
    s << "[[job]]\nkind = \"" << (i % 2 ? "mlp" : "softmax_regression")
      << "\"\ntotal_steps = " << steps << "\nstep_time = " << step_time << "\n\n";
  return s.str();
}

inline json load_json(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return json::parse(f);
}

/// A trainable of `kind` and `seed` loaded from the final checkpoint the summary's entry `job`
/// names.
inline std::unique_ptr<train::trainable> load_final(const json& job, const std::string& kind,
                                                    std::uint64_t seed) {
  auto t = make_trainable(kind, seed);
  const auto path = job["checkpoint"].get<std::string>();
  INFO("checkpoint " << path);
  auto h = train::load_trainable_checkpoint(path, *t);
  REQUIRE(h);
  CHECK(h->job == job["id"].get<std::int64_t>());
  return t;
}

/// Every job's final checkpoint equals the same job trained without interruption.
inline void check_bitwise(const json& sum) {
  for (const auto& j : sum["jobs"]) {
    const auto id = j["id"].get<std::int64_t>();
    const auto kind = j["kind"].get<std::string>();
    const auto steps = j["steps"].get<std::int64_t>();
    INFO("job " << id << " (" << kind << ")");
    const auto seed = static_cast<std::uint64_t>(id + 1);
    auto resumed = load_final(j, kind, seed);
    CHECK(resumed->step() == steps);
    CHECK(same_bits(resumed->params(), uninterrupted(kind, seed, steps)));
  }
}

/// A shell command run in the background, its output going to a file.
class background {
 public:
  background(const std::string& cmd, const std::string& out_file) : out_(out_file) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);  // its own process group: kill() reaches the children it starts
      ::execl("/bin/sh", "sh", "-c", (cmd + " > " + out_file + " 2>&1").c_str(), nullptr);
      ::_exit(127);
    }
    REQUIRE(pid_ > 0);
  }
  ~background() {
    if (pid_ > 0 && !done_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  background(const background&) = delete;
  background& operator=(const background&) = delete;

  /// Its exit code, waiting at most `seconds` x time_scale() (-1 and the group killed when it
  /// did not end).
  int wait(double seconds) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds * time_scale());
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        done_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    done_ = true;
    return -1;
  }
  /// What it printed so far.
  std::string output() const { return file_contents(out_); }
  /// The first match of `re`'s group 1 in its output, waiting at most `seconds` x time_scale()
  /// ("" if none).
  std::string await(const std::string& re, double seconds) const {
    const std::regex r(re);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds * time_scale());
    while (std::chrono::steady_clock::now() < until) {
      std::smatch m;
      const std::string text = output();
      if (std::regex_search(text, m, r)) return m[1];
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }
  pid_t pid() const { return pid_; }
  /// The program the shell started (the shell's child), -1 when there is none (yet).
  pid_t program() const {
    auto r = run_shell("pgrep -P " + std::to_string(pid_) + " | head -1");
    try {
      return r.out.empty() ? pid_ : std::stoi(r.out);
    } catch (const std::exception&) {
      return -1;
    }
  }

 private:
  std::string out_;
  pid_t pid_ = -1;
  bool done_ = false;
};

/// The pid of the process whose command line contains `needle` (not this one), or -1.
inline pid_t find_process(const std::string& needle) {
  // "[x]yz" matches "xyz" but not the shell running pgrep, whose command line holds "[x]yz".
  const std::string pattern = "[" + needle.substr(0, 1) + "]" + needle.substr(1);
  auto r = run_shell("pgrep -f -- '" + pattern + "' | head -1");
  try {
    return r.out.empty() ? -1 : std::stoi(r.out);
  } catch (const std::exception&) {
    return -1;
  }
}

/// The pid of a process whose command line holds every one of `needles` (not this one), or
/// -1: a test's own process among others' (another cluster on the host runs the same ranks).
inline pid_t find_process_all(const std::vector<std::string>& needles) {
  auto r = run_shell("pgrep -af -- tessera");
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("pgrep") != std::string::npos) continue;
    if (std::all_of(needles.begin(), needles.end(),
                    [&](const std::string& n) { return line.find(n) != std::string::npos; }))
      try {
        return std::stoi(line);
      } catch (const std::exception&) {
      }
  }
  return -1;
}

/// Resident memory of process `pid` in MB (VmRSS), -1 when it cannot be read.
inline double rss_mb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

}  // namespace tessera::test
