#pragma once
/// @file lease_server.hpp
/// The node's side of the lease channel (docs/lease-protocol.md): a Unix-domain socket served
/// with Boost.Asio on the server's own thread. Program processes are known by their token; the
/// executor of a program copy (actors/program_round.hpp) registers one `lease_slot` per
/// process before starting it, watches the slot while the process runs, and answers its
/// `average` request. The server never blocks on the executor and the executor never touches
/// a socket. An `average` line comes with one descriptor (SCM_RIGHTS): the program's sealed
/// memfd holding the buffers (shared_floats.hpp), which the executor reduces in place.
///
/// Rules the server enforces (each closes the connection after an `error` reply and records
/// the reason in the slot when the connection had a slot): hello first, with a registered,
/// unused token; one line at most `max_line` bytes; every line a valid request
/// (lease_protocol.hpp); every `average` with its memfd (descriptors are taken by the
/// averages in the order they arrive, since a stream socket does not tie one to a line; at
/// most two may wait); at most one `average` waiting per connection; at most
/// `max_connections` open connections (more are closed at once); hello within
/// `hello_timeout`; at most `max_waiting_hello` connections before their hello (one more
/// closes the oldest).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/node/program/lease_protocol.hpp"
#include "runtime/node/program/lease_slot.hpp"
#include "runtime/node/program/shared_floats.hpp"
#include "runtime/core/result.hpp"

namespace tessera::program {

/// Limits of a lease server.
struct lease_server_options {
  /// Bytes per line, '\n' excluded: buffers go through shared memory, lines carry a few
  /// numbers (a 64 MiB limit let one program take its node from 24 MB to 777 MB).
  std::size_t max_line = std::size_t{1} << 20;
  std::size_t max_connections = 256;  ///< open connections at once
  /// A connection says hello within this or is closed (a program says it first thing).
  std::chrono::milliseconds hello_timeout{10000};
  /// Connections that have not said hello yet, at most: one more closes the oldest of them,
  /// so a process that holds connections open cannot fill the node's slots.
  std::size_t max_waiting_hello = 16;
};

/// The lease socket of one node process.
class lease_server {
 public:
  /// Binds `socket_path` (its directory must exist; mode 0600 on the socket), starts the
  /// server's thread. Errors name the path and the system's reason.
  static result<std::unique_ptr<lease_server>> start(const std::string& socket_path,
                                                     lease_server_options opt = {});
  /// Stops the thread, closes every connection, removes the socket file.
  ~lease_server();
  lease_server(const lease_server&) = delete;
  lease_server& operator=(const lease_server&) = delete;

  /// The socket's path (TESSERA_LEASE).
  const std::string& path() const;
  /// Lets the holder of `token` (64 hex digits, from a cryptographic source) say hello once.
  void add(const std::string& token, std::shared_ptr<lease_slot> slot);
  /// Forgets a token (its connection, if any, is closed).
  void remove(const std::string& token);
  /// Connections accepted and refused so far (for tests and benchmarks).
  std::int64_t accepted() const;
  std::int64_t refused() const;

 private:
  struct impl;
  explicit lease_server(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace tessera::program
