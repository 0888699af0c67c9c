#pragma once
/// @file support.hpp
/// Helpers shared by every test binary (unit, MPI and aggregator tests):
/// - builders: jobs, snapshots, a fixed plan, random instances for property tests;
/// - files: scratch directories removed at the end, temp files, a file's contents;
/// - bits: bitwise equality of float/double vectors, reference training without interruption;
/// - aggregators: every member's input from a seed and bitwise checks of each collective;
/// - commands: run a shell command or the tessera binary, capturing output and exit code.
/// Actor tests add tests/actors/actor_support.hpp (it needs CAF).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/node/comm/aggregator.hpp"
#include "runtime/node/comm/device_memory.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/policy.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/node/train/trainable.hpp"

namespace tessera::test {

// ---- builders -------------------------------------------------------------------------------

/// A job with the fields the scheduler reads; the Gavel command fields stay empty.
inline job make_job(job_id id, const std::string& type, int scale, double steps, double arrival = 0,
                    double weight = 1) {
  job j;
  j.id = id;
  j.job_type = type;
  j.scale_factor = scale;
  j.total_steps = steps;
  j.arrival = arrival;
  j.priority_weight = weight;
  return j;
}

/// A snapshot of `jobs` (all fresh) at time `now` with per-type throughputs given directly
/// and no per-server model (policies then scale the per-type view by speed factors).
inline snapshot make_snapshot(const cluster& cl, const std::vector<job>& jobs,
                              const std::vector<std::vector<double>>& tput, double now = 0) {
  snapshot s;
  s.now = now;
  s.round_length = 360;
  s.cl = &cl;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    job_view v;
    v.spec = &jobs[i];
    v.remaining_steps = jobs[i].total_steps;
    v.throughput = tput[i];
    s.jobs.push_back(v);
  }
  return s;
}

/// A policy that plans as `inner` does (its name and task stacking too) and lets a test look
/// at each round: `before` sees the snapshot, `see` each plan returned (checks or records).
class observed_policy : public policy {
 public:
  explicit observed_policy(std::unique_ptr<policy> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  bool stacks_tasks() const override { return inner_->stacks_tasks(); }
  result<round_plan> plan(const snapshot& s) override {
    before(s);
    auto p = inner_->plan(s);
    if (p) see(s, p.value());
    return p;
  }

 protected:
  virtual void before(const snapshot& s) { (void)s; }
  virtual void see(const snapshot& s, const round_plan& p) { (void)s, (void)p; }

 private:
  std::unique_ptr<policy> inner_;
};

/// Replays a fixed plan every round (for simulator tests): the assignments of active jobs.
class fixed_plan final : public policy {
 public:
  explicit fixed_plan(std::vector<assignment> a) : a_(std::move(a)) {}
  std::string name() const override { return "fixed"; }
  result<round_plan> plan(const snapshot& s) override {
    round_plan p;
    for (const auto& as : a_)
      for (const auto& jv : s.jobs)
        if (jv.spec->id == as.job) p.assignments.push_back(as);
    return p;
  }

 private:
  std::vector<assignment> a_;
};

/// A cluster, a throughput table for it and a job set (property tests).
struct instance {
  cluster cl;
  throughput_table table;
  std::vector<job> jobs;
};

/// Size limits of random_instance.
struct instance_limits {
  int max_servers = 6;    ///< 1 .. max_servers servers
  int max_jobs = 12;      ///< 1 .. max_jobs jobs
  int max_steps = 20000;  ///< total steps in [200, 200 + max_steps)
};

/// 1-6 servers of 1-8 GPUs over 1-3 types (some at half speed), 1-12 jobs of scale 1-8 (at
/// most the widest type's GPUs), random consolidated throughputs, arrivals in [0, 4000) s
/// (a third at 0), weights 1 or 2; `lim` changes the counts. Every random draw is its own
/// statement, so the instances are the same with every compiler.
inline instance random_instance(std::mt19937& rng, const instance_limits& lim = {}) {
  instance in;
  const char* names[] = {"v100", "p100", "k80"};
  const int ntypes = 1 + static_cast<int>(rng() % 3);
  std::vector<server> servers;
  const int nservers = 1 + static_cast<int>(rng() % static_cast<unsigned>(lim.max_servers));
  for (int i = 0; i < nservers; ++i) {
    const int gpus = 1 << (rng() % 4);
    const double speed = rng() % 4 == 0 ? 0.5 : 1.0;
    servers.push_back({0, "s" + std::to_string(i), names[i % ntypes], 0, gpus, speed});
  }
  in.cl = make_cluster(servers);
  int widest = 0;
  for (const auto& t : in.cl.types) widest = std::max(widest, t.gpus);
  std::uniform_real_distribution<double> tput(0.2, 5.0);
  const int njobs = 1 + static_cast<int>(rng() % static_cast<unsigned>(lim.max_jobs));
  for (int m = 0; m < njobs; ++m) {
    const std::string type = "model" + std::to_string(m % 4);
    int scale = 1 << (rng() % 4);
    while (scale > widest) scale /= 2;
    for (const auto& t : in.cl.types)
      if (!in.table.isolated(t.name, {type, scale}))
        in.table.set_isolated(t.name, {type, scale}, tput(rng) * scale);
    const double steps = 200 + static_cast<double>(rng() % static_cast<unsigned>(lim.max_steps));
    const double arrival = rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 4000);
    const double weight = 1 + static_cast<double>(rng() % 2);
    in.jobs.push_back(make_job(m, type, scale, steps, arrival, weight));
  }
  return in;
}

/// Space sharing: adds co-location entries to `in.table` for about half of the ordered pairs
/// of its jobs' keys of one scale factor on each GPU type, each job at 35-95% of its isolated
/// throughput (the mirror entry drawn on its own, so some pairs lack one direction).
inline void add_random_colocations(instance& in, std::mt19937& rng) {
  std::uniform_real_distribution<double> frac(0.35, 0.95);
  for (const auto& t : in.cl.types)
    for (const auto& a : in.jobs)
      for (const auto& b : in.jobs) {
        if (a.scale_factor != b.scale_factor) continue;
        const job_key ka{a.job_type, a.scale_factor}, kb{b.job_type, b.scale_factor};
        const bool draw = rng() % 2 == 0;
        if (!draw || in.table.colocated(t.name, ka, kb)) continue;
        const double fa = frac(rng);
        const double fb = frac(rng);
        in.table.set_colocated(t.name, ka, kb,
                               {fa * in.table.isolated(t.name, ka).value_or(0),
                                fb * in.table.isolated(t.name, kb).value_or(0)});
      }
}

// ---- files ----------------------------------------------------------------------------------

/// A fresh, empty directory under the system temp dir, named after `name` and this process,
/// removed when the object dies.
class scratch_dir {
 public:
  explicit scratch_dir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("tessera_test_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// The directory, as a string.
  std::string str() const { return path_.string(); }
  /// `name` inside the directory.
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  /// Writes `text` to `name` inside the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return file(name);
  }
  /// Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

/// Writes `text` to a file `name` in this process's scratch directory (removed when the process
/// ends); returns its path.
inline std::string temp_file(const std::string& name, const std::string& text) {
  static const scratch_dir files("files");
  return files.write(name, text);
}

/// The bytes of a file ("" when it cannot be read).
inline std::string file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A bundled configuration file (config/<name>).
inline std::string config_file(const std::string& name) {
  return std::string(TESSERA_CONFIG_DIR) + "/" + name;
}

/// The factor every wait of a test is multiplied by: TESSERA_TEST_TIME_SCALE (at least 1;
/// scripts/test.sh raises it under the sanitizers and on a loaded host). Tests wait on events
/// with bounds; a bound is a hang guard, never the assertion.
inline double time_scale() {
  const char* v = std::getenv("TESSERA_TEST_TIME_SCALE");
  if (!v || !*v) return 1;
  char* end = nullptr;
  const double f = std::strtod(v, &end);
  return (end && *end == 0 && f >= 1 && f <= 100) ? f : 1;
}

/// A relative tolerance `base` widened by time_scale() for a loaded host, capped at `cap`:
/// Catch's Approx::epsilon throws above 1, and a time scale of 6 (the sanitizer build on a
/// host with a load of 6 per 2 cores) made 0.2 into 1.2.
inline double loaded_tolerance(double base, double cap = 0.5) {
  return std::min(cap, base * time_scale());
}

/// True when `s` contains `part`.
inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Checks that `r` failed on invalid input with a message starting
/// "<path>:<line>: field '<field>': " (the form of every input error); returns the message.
template <class T>
std::string input_error_message(const result<T>& r, const std::string& path, int line,
                                const std::string& field) {
  REQUIRE_FALSE(r);
  const auto& msg = r.err().message;
  INFO(msg);
  CHECK(r.err().kind == error_kind::invalid_input);
  CHECK(msg.rfind(path + ":" + std::to_string(line) + ": field '" + field + "': ", 0) == 0);
  return msg;
}

// ---- bits -----------------------------------------------------------------------------------

/// True when both vectors hold exactly the same bits (not merely equal values: -0 differs from
/// 0, and a NaN equals itself).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  static_assert(std::is_trivially_copyable_v<T>, "compares object representations");
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// A built-in trainable; fails the test when it cannot be made.
inline std::unique_ptr<train::trainable> make_trainable(
    const std::string& kind, std::uint64_t seed, const train::trainable_config& config = {}) {
  auto r = train::builtin_trainables().make(kind, seed, config);
  INFO((r ? std::string() : r.err().message));
  REQUIRE(r);
  return std::move(*r);
}

/// The parameters of a built-in trainable trained `steps` steps at scale `k` without
/// interruption: what any run of the same job must end with, bit for bit.
inline std::vector<float> uninterrupted(const std::string& kind, std::uint64_t seed,
                                        std::int64_t steps, int k = 1) {
  auto t = make_trainable(kind, seed);
  for (std::int64_t s = 0; s < steps; ++s) REQUIRE(t->train_step(k));
  return t->params();
}

// ---- aggregators ----------------------------------------------------------------------------
// Checks shared by the aggregator tests of every backend (local threads in the unit suite, MPI
// and NCCL ranks under mpirun): each member builds every member's input from the seed, so it
// can compute the expected result in its own process with reference_reduce and compare bit for
// bit.

/// Member `rank`'s input: `n` floats from (seed, rank). `grid` values are multiples of 2^-10 in
/// [-64, 64], so every partial sum of a few of them is exact in float and any summation order
/// gives the same bits; otherwise values spread over many magnitudes, where order matters.
inline std::vector<float> member_input(int rank, std::size_t n, std::uint64_t seed, bool grid) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(rank));
  std::vector<float> v(n);
  std::uniform_int_distribution<int> q(-65536, 65536);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-20, 20);
  for (auto& x : v)
    x = grid ? static_cast<float>(q(rng)) / 1024.0f
             : static_cast<float>(std::ldexp(mant(rng), ex(rng)));
  return v;
}

/// The expected result of a collective over `members`, computed in this process.
inline std::vector<float> expected_result(const comm::group& members, std::size_t n,
                                          std::uint64_t seed, bool grid, comm::reduce_op op) {
  std::vector<std::vector<float>> in;
  for (int r : members) in.push_back(member_input(r, n, seed, grid));
  std::vector<const float*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<float> out(n);
  comm::reference_reduce(ptrs, n, op, out.data());
  return out;
}

/// "" when `data` (member agg.rank()'s result of `st`) equals expected_result bit for bit, else
/// what differs.
inline std::string compare_allreduce(comm::aggregator& agg, const comm::group& members,
                                     std::size_t n, std::uint64_t seed, bool grid,
                                     const comm::reduce_options& opt, const status& st,
                                     const std::vector<float>& data) {
  std::ostringstream why;
  if (!st) {
    why << agg.backend() << " rank " << agg.rank() << ": " << st.err().message;
    return why.str();
  }
  const auto want = expected_result(members, n, seed, grid, opt.op);
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(&data[i], &want[i], sizeof(float)) != 0) {
      why << agg.backend() << " rank " << agg.rank() << " group "
          << comm::describe(members, opt.channel) << ": element " << i << " is " << data[i]
          << ", expected " << want[i];
      return why.str();
    }
  return "";
}

/// Runs one allreduce on `agg` as member agg.rank() of `members` and compares the result with
/// expected_result bit for bit. Returns "" when equal, else what differs.
inline std::string check_allreduce(comm::aggregator& agg, const comm::group& members, std::size_t n,
                                   std::uint64_t seed, bool grid, const comm::reduce_options& opt) {
  auto data = member_input(agg.rank(), n, seed, grid);
  auto st = agg.allreduce(members, data, opt);
  return compare_allreduce(agg, members, n, seed, grid, opt, st, data);
}

/// check_allreduce through the buffer_view overload, with the input in host memory or in
/// device memory on GPU `device` (copied there first and back after).
inline std::string check_allreduce_on(comm::aggregator& agg, const comm::group& members,
                                      std::size_t n, std::uint64_t seed, bool grid,
                                      const comm::reduce_options& opt, comm::memory_kind where,
                                      int device = 0) {
  auto data = member_input(agg.rank(), n, seed, grid);
  if (where == comm::memory_kind::host) {
    auto st = agg.allreduce(members, comm::buffer_view{data.data(), n, where, 0, nullptr}, opt);
    return compare_allreduce(agg, members, n, seed, grid, opt, st, data);
  }
  auto buf = comm::device_buffer::make(n, device);
  if (!buf) return buf.err().message;
  if (auto in = comm::copy_to_device(data.data(), n, device, (*buf)->data()); !in)
    return in.err().message;
  auto st = agg.allreduce(members, (*buf)->view(), opt);
  std::fill(data.begin(), data.end(), 0.0f);
  if (auto out = comm::copy_to_host((*buf)->data(), n, device, data.data()); !out)
    return out.err().message;
  return compare_allreduce(agg, members, n, seed, grid, opt, st, data);
}

/// Element count of member `rank`'s allgather input: from (seed, rank), 0 to `most`, so the
/// members pass different counts and some pass none.
inline std::size_t gather_count(int rank, std::uint64_t seed, std::size_t most) {
  return static_cast<std::size_t>((seed * 31u + static_cast<std::uint64_t>(rank) * 7u) %
                                  (most + 1));
}

/// Runs one allgather on `agg` as member agg.rank() of `members` (inputs of different sizes,
/// up to `most` floats) and compares the result with the concatenation of every member's
/// input in member order, bit for bit, and the reported counts. "" when equal.
inline std::string check_allgather(comm::aggregator& agg, const comm::group& members,
                                   std::size_t most, std::uint64_t seed,
                                   const comm::reduce_options& opt) {
  const auto mine = member_input(agg.rank(), gather_count(agg.rank(), seed, most), seed, false);
  std::vector<float> all;
  std::vector<std::size_t> counts;
  auto st = agg.allgather(members, mine, all, &counts, opt);
  std::ostringstream why;
  why << agg.backend() << " rank " << agg.rank() << " allgather "
      << comm::describe(members, opt.channel) << ": ";
  if (!st) return why.str() + st.err().message;
  std::vector<float> want;
  std::vector<std::size_t> want_counts;
  for (int r : members) {
    const auto v = member_input(r, gather_count(r, seed, most), seed, false);
    want.insert(want.end(), v.begin(), v.end());
    want_counts.push_back(v.size());
  }
  if (counts != want_counts) return why.str() + "counts differ";
  if (!same_bits(all, want))
    return why.str() + "got " + std::to_string(all.size()) + " floats, expected " +
           std::to_string(want.size()) + " (or the bits differ)";
  return "";
}

// ---- commands -------------------------------------------------------------------------------

/// How a command ended and what it printed.
struct command_result {
  int code = -1;       ///< exit status; 128 + the signal when a signal ended it
  std::string out;     ///< stdout and stderr together, in the order written
  double seconds = 0;  ///< wall time
};

/// Runs `cmd` with the shell, its stderr joined to its stdout.
inline command_result run_shell(const std::string& cmd) {
  command_result r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) r.out += buf.data();
  const int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

#ifdef TESSERA_BINARY
/// The tessera binary under test: the build's, or TESSERA_TEST_BINARY's when set (the tests
/// run from a bundle on another machine, scripts/gpu_bundle.sh, where the build path is absent).
inline std::string tessera_binary() {
  const char* env = std::getenv("TESSERA_TEST_BINARY");
  return env && *env ? std::string(env) : std::string(TESSERA_BINARY);
}

/// Runs `tessera <args>` (the binary under test).
inline command_result run_tessera(const std::string& args) {
  return run_shell(tessera_binary() + " " + args);
}
#endif

/// A listening TCP socket of a process.
struct listener {
  bool v6 = false;
  std::string address;  ///< as /proc/net/tcp writes it (hex, network order in host words)
  int port = 0;
  bool loopback() const {
    return v6 ? address == "00000000000000000000000001000000" : address.substr(6) == "7F";
  }
};

/// The listening TCP sockets process `pid` holds (its descriptors matched against the
/// socket tables of its network namespace).
inline std::vector<listener> listeners_of(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::set<std::string> inodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(proc + "/fd", ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<listener> out;
  for (const bool v6 : {false, true}) {
    std::ifstream in(proc + (v6 ? "/net/tcp6" : "/net/tcp"));
    std::string line;
    std::getline(in, line);  // column names
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      row >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      const auto colon = local.find(':');
      if (st != "0A" || !inodes.count(inode) || colon == std::string::npos) continue;  // 0A: LISTEN
      out.push_back({v6, local.substr(0, colon), std::stoi(local.substr(colon + 1), nullptr, 16)});
    }
  }
  return out;
}

/// A TCP connection to 127.0.0.1:`port` (its descriptor), -1 when it cannot be made.
inline int dial_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A shell prefix bounding a command's memory to about 1 GB of address space, so a test of an
/// unbounded input fails fast instead of swapping; empty under AddressSanitizer, whose shadow
/// memory needs terabytes of address space (its own allocator reports a runaway allocation).
inline std::string memory_bound_prefix() {
#if defined(__SANITIZE_ADDRESS__)
  return "";
#else
  return "ulimit -v 1000000; ";
#endif
}

}  // namespace tessera::test
