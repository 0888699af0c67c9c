#include "actors/service.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "actors/api.hpp"
#include "actors/auth.hpp"
#include "runtime/service/http/client.hpp"

namespace tessera::actors {

namespace {

/// True for an address only this host can reach.
bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

/// Writes `text` to `path` with mode `mode` atomically: a new temporary file beside it
/// (mkstemp: O_EXCL, a name no one can guess, so no planted file or link is written through),
/// then a rename, which replaces whatever `path` was (a link too) without following it.
status write_file_atomically(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return error{error_kind::io, path + ": cannot write: " + std::strerror(errno)};
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fchmod(fd, mode) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    ::unlink(tmp.c_str());
    return error{error_kind::io, path + ": cannot write: " + std::strerror(e)};
  }
  return {};
}

namespace {

/// Why `state_dir` (lstat's `sb`) cannot be trusted, or "": it must be a real directory (not a
/// link), owned by this process's effective user, and writable by no one else. Otherwise
/// another local user could plant a token (and run jobs as this user) or links that make this
/// user write where they choose.
std::string distrust_of(const std::string& state_dir, const struct stat& sb) {
  const std::string name = "--state-dir " + state_dir;
  if (S_ISLNK(sb.st_mode)) return name + " is a symbolic link; give the directory itself";
  if (!S_ISDIR(sb.st_mode)) return name + " is not a directory";
  if (sb.st_uid != ::geteuid())
    return name + " is owned by uid " + std::to_string(sb.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + "); use a directory of your own";
  if ((sb.st_mode & 022) != 0)
    return name + " may be written by others (mode " + std::to_string((sb.st_mode >> 6) & 7) +
           std::to_string((sb.st_mode >> 3) & 7) + std::to_string(sb.st_mode & 7) +
           "); chmod 700 it";
  return "";
}

}  // namespace

status prepare_state_dir(const std::string& state_dir) {
  if (state_dir.empty()) return error{error_kind::invalid_input, "no --state-dir given"};
  struct stat sb {};
  if (::lstat(state_dir.c_str(), &sb) != 0) {
    if (errno != ENOENT)
      return error{error_kind::invalid_input,
                   "--state-dir " + state_dir + ": " + std::strerror(errno)};
    // The parents as any directory; the state directory itself 0700 from its first moment.
    std::error_code ec;
    const auto parent = std::filesystem::path(state_dir).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec || (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST))
      return error{error_kind::invalid_input, "--state-dir " + state_dir + ": cannot create it: " +
                                                  (ec ? ec.message() : std::strerror(errno))};
    if (::lstat(state_dir.c_str(), &sb) != 0)
      return error{error_kind::invalid_input,
                   "--state-dir " + state_dir + ": " + std::strerror(errno)};
  }
  if (auto why = distrust_of(state_dir, sb); !why.empty())
    return error{error_kind::invalid_input, why};
  return {};
}

result<std::string> state_dir_token(const std::string& state_dir) {
  // The token is a secret like the cluster's: the same file rules (created 0600 and never
  // through someone else's file; refused when others may read it), the same 32 random bytes.
  const std::string path = state_dir + "/token";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    auto key = read_secret_file(path);
    if (!key) return key.err();
    return to_hex(*key);
  }
  auto key = make_secret();
  if (!key) return key.err();
  if (auto w = write_secret_file(path, *key); !w) return w.err();
  return to_hex(*key);
}

result<std::string> given_token(const std::string& token_file) {
  auto key = read_secret_file(token_file);
  if (!key) return error{key.err().kind, "--token-file " + key.err().message};
  return to_hex(*key);
}

result<std::unique_ptr<service>> service::open(caf::actor_system& sys, caf::actor scheduler,
                                               const service_settings& s) {
  if (auto st = prepare_state_dir(s.state_dir); !st) return st.err();
  auto token = s.token_file.empty() ? state_dir_token(s.state_dir) : given_token(s.token_file);
  if (!token) return token.err();
  auto where = http::parse_server_address(s.listen, true);
  if (!where) return error{error_kind::invalid_input, "--listen: " + where.err().message};
  std::unique_ptr<service> svc(new service());
  api_config ac;
  ac.scheduler = caf::actor_cast<scheduler_client_api>(std::move(scheduler));
  ac.known_kinds = s.known_kinds;
  ac.check = s.check;
  ac.base_dir = std::filesystem::current_path().string();
  // The metrics scrape reads the server's counters; the server opens after the API actor
  // (its handler needs it) and closes before it, hence the pointer set in between.
  ac.request_counts = [server = svc->counted_] {
    const auto* s = server->load();
    return s ? s->request_counts() : std::vector<http::request_count>{};
  };
  svc->api_ = spawn_api(sys, ac);
  http::limits lim;
  lim.hosts = s.allow_hosts;  // and IP literals, which a rebound DNS name is not
  for (const char* local : {"localhost", "localhost.localdomain"}) lim.hosts.push_back(local);
  if (char name[256] = {0}; ::gethostname(name, sizeof name - 1) == 0) lim.hosts.push_back(name);
  auto server = http::server::open(where->host, static_cast<std::uint16_t>(where->port), lim,
                                   *token, api_handler(svc->api_));
  if (!server) {
    caf::anon_send_exit(svc->api_, caf::exit_reason::user_shutdown);
    return server.err();
  }
  svc->http_ = std::move(*server);
  svc->counted_->store(svc->http_.get());
  const std::string address = svc->http_->address();
  if (auto w = write_file_atomically(s.state_dir + "/address", address + "\n", 0644); !w)
    return w.err();
  // The token is never printed: logs are read by more people than the state directory.
  const std::string token_path = s.token_file.empty() ? s.state_dir + "/token" : s.token_file;
  if (!s.quiet)
    std::cerr << "tessera: control API on http://" << address << " (token in " << token_path
              << ")\ntessera: dashboard: http://" << address << "/#token=$(cat " << token_path
              << ")\n";
  if (!is_loopback_host(where->host))
    std::cerr << "tessera: warning: the control API listens on " << where->host
              << ", beyond this host: anyone who reaches it and holds the token can run "
                 "programs as this user; put TLS and a firewall in front of it\n";
  return svc;
}

service::~service() {
  if (http_) http_->close();
  counted_->store(nullptr);
  if (api_) caf::anon_send_exit(api_, caf::exit_reason::user_shutdown);
}

std::string service::address() const { return http_ ? http_->address() : ""; }

}  // namespace tessera::actors
