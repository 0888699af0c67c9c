#pragma once
/// @file service.hpp
/// The service side of a cluster's scheduler process (`tessera serve`, or `tessera run
/// --listen`): its state directory, the API token, the HTTP server with the API actor
/// (actors/api.hpp) in front of the scheduler, and what it tells the operator.
///
/// State directory (created 0700 when missing):
///   token    the API's bearer token, 64 hex characters, mode 0600, made at the first start
///            and kept by `--resume` (a client configured once keeps working)
///   address  HOST:PORT the API listens on, one line, written once it listens (clients read
///            it, so --listen HOST:0 works)
///   journal  (runtime/service/journal.hpp) accepted submissions and state changes

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "runtime/service/http/server.hpp"
#include "runtime/core/job_file.hpp"
#include "runtime/core/result.hpp"

namespace tessera::actors {

/// What the service needs from the run's settings.
struct service_settings {
  std::string state_dir;                 ///< see the file comment
  std::string token_file;                ///< the token's file as given; "" = state_dir/token
  std::string listen = "127.0.0.1:0";    ///< HOST:PORT of the API (port 0: any free one)
  std::vector<std::string> known_kinds;  ///< trainable kinds submissions may name
  run_job_check check;                   ///< the trainables' checks of a job's config
  bool quiet = false;                    ///< no "listening" lines
  /// DNS names the API answers to besides localhost, this host's name and IP addresses.
  std::vector<std::string> allow_hosts;
};

/// The service of one scheduler process; closing it (destructor) stops the HTTP server.
class service {
 public:
  /// Prepares the state directory and its token, starts the HTTP server and the API actor in
  /// front of `scheduler`, writes the address file and prints where the dashboard is. Errors
  /// name the file or address that failed.
  static result<std::unique_ptr<service>> open(caf::actor_system& sys, caf::actor scheduler,
                                               const service_settings& s);
  ~service();
  /// "HOST:PORT" the API listens on.
  std::string address() const;

 private:
  service() = default;
  std::unique_ptr<http::server> http_;
  caf::actor api_;
  /// The open server, for the API actor's metrics (null before it opens and after it closes).
  std::shared_ptr<std::atomic<const http::server*>> counted_ =
      std::make_shared<std::atomic<const http::server*>>(nullptr);
};

/// The token in `state_dir`/token: 64 hex characters, made when the file does not exist and
/// kept by the same rules as the cluster secret (actors/auth.hpp: written 0600, never through
/// another's file); an error when others may read it or it holds no token.
result<std::string> state_dir_token(const std::string& state_dir);

/// The token in `token_file`, an existing file under the same rules (a Kubernetes Secret
/// mounted with subPath, say); nothing is made.
result<std::string> given_token(const std::string& token_file);

/// Writes `text` to `path` with mode `mode` atomically, through no planted file or link: a
/// new temporary file of an unguessable name beside it, then a rename over `path`.
status write_file_atomically(const std::string& path, const std::string& text, mode_t mode);

/// The state directory, created with mode 0700 when missing; an error naming it when it is a
/// link, not a directory, owned by another user or writable by others.
status prepare_state_dir(const std::string& state_dir);

}  // namespace tessera::actors
