#include "runtime/node/program/process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace tessera::program {

namespace {

/// The environment of the child: the node's, with `extra` set on top, as "NAME=value".
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    if (!extra.count(name)) env.push_back(entry);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

/// True when process `pid`'s environment holds `entry` ("NAME=value") exactly. A process of
/// another user, or gone, cannot be read: false.
bool environment_holds(const std::string& pid, const std::string& entry) {
  const int fd = ::open(("/proc/" + pid + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string env;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && env.size() < (std::size_t{1} << 20);)
    env.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  const std::string needle = std::string(1, '\0') + entry + std::string(1, '\0');
  return ("\0" + env).find(needle) != std::string::npos;
}

std::vector<char*> c_strings(std::vector<std::string>& xs) {
  std::vector<char*> out;
  for (auto& x : xs) out.push_back(x.data());
  out.push_back(nullptr);
  return out;
}

/// The child's side after fork: only async-signal-safe calls. Reports an exec failure's errno
/// through `report` (close-on-exec, so a successful exec closes it unwritten).
[[noreturn]] void become_child(const char* workdir, char* const* argv, char* const* envp, int out_w,
                               int err_w, int report, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(out_w, 1);
  ::dup2(err_w, 2);
  // Nothing of the node's but the three standard streams reaches the program: a descriptor
  // opened without O_CLOEXEC (by CAF, Asio, MPI) would otherwise let an orphaned program hold
  // the API's port or the lease socket after the node died. close-on-exec, not closed: the
  // exec failure report must stay open until exec.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    for (int fd = 3; fd < 65536; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  // Signals the node ignores or blocks must not carry over into the program.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  ::signal(SIGXFSZ, SIG_DFL);
  int err = 0;
  if (workdir[0] != '\0' && ::chdir(workdir) != 0) err = errno;
  if (err == 0) {
    ::execvpe(argv[0], argv, envp);
    err = errno;
  }
  [[maybe_unused]] auto n = ::write(report, &err, sizeof err);
  ::_exit(127);
}

}  // namespace

namespace {

/// The thread every program is forked from. PR_SET_PDEATHSIG fires when the thread that forked
/// a child ends, not its process: forked from a node's worker thread, a program was killed at
/// its round's end, so a program kept warm across rounds comes from a thread that lives as
/// long as the process. Made on first use and never joined (the process's end ends it).
class spawner {
 public:
  using task = std::packaged_task<result<child_process>()>;
  static spawner& get() {
    static spawner* s = new spawner();  // never destroyed: its thread may outlive statics
    return *s;
  }
  result<child_process> run(std::function<result<child_process>()> f) {
    task t(std::move(f));
    auto done = t.get_future();
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(std::move(t));
    }
    cv_.notify_one();
    return done.get();
  }

 private:
  spawner() {
    std::thread([this] {
      for (;;) {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        task t = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        t();
      }
    }).detach();
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<task> queue_;
};

}  // namespace

std::string new_program_mark() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool process_carries_mark(pid_t pid, const std::string& mark) {
  return pid > 0 && !mark.empty() &&
         environment_holds(std::to_string(pid), std::string(program_mark_variable) + "=" + mark);
}

result<child_process> child_process::start(const process_spec& spec) {
  return spawner::get().run([&spec] { return start_here(spec); });
}

result<child_process> child_process::start_here(const process_spec& spec) {
  if (spec.argv.empty()) return error{error_kind::invalid_input, "no program to run"};
  std::vector<std::string> argv = spec.argv;
  auto extra = spec.env;
  const std::string mark = spec.mark.empty() ? new_program_mark() : spec.mark;
  extra[program_mark_variable] = mark;  // every process it starts inherits it
  std::vector<std::string> env = child_environment(extra);
  auto argv_c = c_strings(argv);
  auto env_c = c_strings(env);
  int out[2], err[2], report[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return error{error_kind::io, std::strerror(errno)};
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return error{error_kind::io, std::strerror(errno)};
  }
  if (::pipe2(report, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return error{error_kind::io, std::strerror(errno)};
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    become_child(spec.workdir.c_str(), argv_c.data(), env_c.data(), out[1], err[1], report[1],
                 parent);
  for (int fd : {out[1], err[1], report[1]}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], report[0]}) ::close(fd);
    return error{error_kind::io, std::string("fork: ") + std::strerror(errno)};
  }
  ::setpgid(pid, pid);  // also here: no race with a signal_group before the child ran
  int exec_errno = 0;
  ssize_t got;
  do got = ::read(report[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  ::close(report[0]);
  child_process c;
  c.pid_ = pid;
  c.mark_ = mark;
  c.fds_[0] = out[0];
  c.fds_[1] = err[0];
  c.prefix_ = spec.prefix;
  c.tail_bytes_ = spec.tail_bytes;
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    c.status_ = st;
    c.close_fds();
    c.pid_ = -1;
    return error{error_kind::invalid_input,
                 "cannot run " + spec.argv[0] +
                     (spec.workdir.empty() ? "" : " in " + spec.workdir) + ": " +
                     std::strerror(exec_errno)};
  }
  for (int fd : c.fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return c;
}

child_process::child_process(child_process&& o) noexcept { *this = std::move(o); }

child_process& child_process::operator=(child_process&& o) noexcept {
  if (this == &o) return *this;
  pid_ = std::exchange(o.pid_, -1);
  for (int i = 0; i < 2; ++i) {
    fds_[i] = std::exchange(o.fds_[i], -1);
    partial_[i] = std::move(o.partial_[i]);
  }
  tail_ = std::move(o.tail_);
  tail_cut_ = o.tail_cut_;
  tail_bytes_ = o.tail_bytes_;
  prefix_ = std::move(o.prefix_);
  mark_ = std::move(o.mark_);
  status_ = std::exchange(o.status_, std::nullopt);
  return *this;
}

child_process::~child_process() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    if (!status_) {
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    }
    end_descendants();
  }
  close_fds();
}

int child_process::end_descendants() {
  if (mark_.empty()) return 0;
  const std::string entry = std::string(program_mark_variable) + "=" + mark_;
  const std::string self = std::to_string(::getpid());
  int killed = 0;
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string pid = d.path().filename().string();
    if (pid.empty() || pid == self ||
        !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (environment_holds(pid, entry) && ::kill(std::stoi(pid), SIGKILL) == 0) ++killed;
  }
  return killed;
}

void child_process::close_fds() {
  for (int& fd : fds_)
    if (fd >= 0) ::close(std::exchange(fd, -1));
}

void child_process::forward(int which, std::ostream& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds_[which], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        if (!partial_[which].empty()) out << prefix_ << partial_[which] << '\n';
        partial_[which].clear();
        ::close(std::exchange(fds_[which], -1));
      }
      break;
    }
    std::string& part = partial_[which];
    part.append(buf, static_cast<std::size_t>(n));
    if (which == 1) {
      tail_.append(buf, static_cast<std::size_t>(n));
      if (tail_.size() > 2 * tail_bytes_) {
        tail_.erase(0, tail_.size() - tail_bytes_);
        tail_cut_ = true;
      }
    }
    std::size_t at;
    while ((at = part.find('\n')) != std::string::npos) {
      out << prefix_ << part.substr(0, at) << '\n';
      part.erase(0, at + 1);
    }
    if (part.size() > 65536) {  // a very long line is forwarded in pieces
      out << prefix_ << part << '\n';
      part.clear();
    }
  }
  out.flush();
}

bool child_process::poll(int wait_ms, std::ostream& out, std::ostream& err) {
  pollfd p[2];
  nfds_t n = 0;
  for (int i = 0; i < 2; ++i)
    if (fds_[i] >= 0) p[n++] = pollfd{fds_[i], POLLIN, 0};
  if (n > 0) ::poll(p, n, std::max(0, wait_ms));
  if (fds_[0] >= 0) forward(0, out);
  if (fds_[1] >= 0) forward(1, err);
  if (!status_ && pid_ > 0) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) status_ = st;
  }
  return !status_;
}

bool child_process::succeeded() const {
  return status_ && WIFEXITED(*status_) && WEXITSTATUS(*status_) == 0;
}

std::string child_process::describe_exit() const {
  if (!status_) return "is running";
  if (WIFEXITED(*status_)) return "exited with status " + std::to_string(WEXITSTATUS(*status_));
  if (WIFSIGNALED(*status_)) {
    const int sig = WTERMSIG(*status_);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(*status_);
}

std::string child_process::stderr_tail() const {
  if (tail_.size() <= tail_bytes_ && !tail_cut_) return tail_;
  std::string t = tail_.size() <= tail_bytes_ ? tail_ : tail_.substr(tail_.size() - tail_bytes_);
  const auto nl = t.find('\n');
  return nl != std::string::npos && nl + 1 < t.size() ? t.substr(nl + 1) : t;
}

void child_process::signal_group(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

bool child_process::group_alive() const { return pid_ > 0 && ::kill(-pid_, 0) == 0; }

void child_process::kill_and_reap(std::ostream& out, std::ostream& err) {
  signal_group(SIGKILL);
  while (!exited()) poll(50, out, err);
  end_descendants();
  // The group's other members may hold the pipes open: read what is there, do not wait.
  if (fds_[0] >= 0) forward(0, out);
  if (fds_[1] >= 0) forward(1, err);
}

}  // namespace tessera::program
