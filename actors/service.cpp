#include "actors/service.hpp"

#include <sys/stat.h>

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

/// Writes `text` to `path` with mode `mode` atomically (a temporary file, then a rename).
status write_atomically(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return error{error_kind::io, tmp + ": cannot write: " + std::strerror(errno)};
    f << text;
    if (!f.flush()) return error{error_kind::io, tmp + ": cannot write: " + std::strerror(errno)};
  }
  if (::chmod(tmp.c_str(), mode) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0)
    return error{error_kind::io, path + ": cannot write: " + std::strerror(errno)};
  return {};
}

}  // namespace

status prepare_state_dir(const std::string& state_dir) {
  if (state_dir.empty()) return error{error_kind::invalid_input, "no --state-dir given"};
  std::error_code ec;
  if (!std::filesystem::exists(state_dir, ec)) {
    std::filesystem::create_directories(state_dir, ec);
    if (ec)
      return error{error_kind::invalid_input,
                   "--state-dir " + state_dir + ": cannot create it: " + ec.message()};
    ::chmod(state_dir.c_str(), 0700);
  }
  if (!std::filesystem::is_directory(state_dir, ec))
    return error{error_kind::invalid_input, "--state-dir " + state_dir + " is not a directory"};
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

result<std::unique_ptr<service>> service::open(caf::actor_system& sys, caf::actor scheduler,
                                               const service_settings& s) {
  if (auto st = prepare_state_dir(s.state_dir); !st) return st.err();
  auto token = state_dir_token(s.state_dir);
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
  auto server = http::server::open(where->host, static_cast<std::uint16_t>(where->port),
                                   http::limits{}, *token, api_handler(svc->api_));
  if (!server) {
    caf::anon_send_exit(svc->api_, caf::exit_reason::user_shutdown);
    return server.err();
  }
  svc->http_ = std::move(*server);
  svc->counted_->store(svc->http_.get());
  const std::string address = svc->http_->address();
  if (auto w = write_atomically(s.state_dir + "/address", address + "\n", 0644); !w) return w.err();
  if (!s.quiet)
    std::cerr << "tessera: control API on http://" << address << " (token in " << s.state_dir
              << "/token)\ntessera: dashboard: http://" << address << "/#token=" << *token << "\n";
  return svc;
}

service::~service() {
  if (http_) http_->close();
  counted_->store(nullptr);
  if (api_) caf::anon_send_exit(api_, caf::exit_reason::user_shutdown);
}

std::string service::address() const { return http_ ? http_->address() : ""; }

}  // namespace tessera::actors
