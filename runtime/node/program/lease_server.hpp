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
/// `max_connections` open connections (more are closed at once).

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
#include "runtime/node/program/shared_floats.hpp"
#include "runtime/core/result.hpp"

namespace tessera::program {

using lease_clock = std::chrono::steady_clock;

/// What one program process has told the node so far (a copy of the slot's state).
struct program_view {
  bool said_hello = false;                 ///< hello received
  bool closed = false;                     ///< its connection is closed (any reason)
  std::string protocol_error;              ///< why the server closed it ("" = it did not)
  std::int64_t pid = 0;                    ///< from hello
  std::optional<std::int64_t> own_step;    ///< from hello
  std::int64_t steps = 0;                  ///< latest cumulative steps (report, complete)
  std::optional<double> loss;              ///< latest loss
  bool final_report = false;               ///< a report with final = true arrived
  bool complete = false;                   ///< complete arrived
  std::optional<double> accuracy;          ///< from complete
  lease_clock::time_point hello_at{};      ///< when hello arrived
  lease_clock::time_point last_contact{};  ///< when its latest message arrived
  /// When the lease's time runs out (none: no time cap); may move at hello (min_after_hello).
  std::optional<lease_clock::time_point> lease_end;
  std::int64_t messages = 0;       ///< messages received
  bool average_waiting = false;    ///< an average request awaits answer_average
  std::size_t average_values = 0;  ///< float32 values of its latest average request
  bool average_answered = false;   ///< the mean went out on its connection
};

/// One program process's lease: its terms (set by the executor) and what it reported (set by
/// the server). Thread-safe.
class lease_slot {
 public:
  /// `terms.seconds` is ignored: the lease's time is `deadline` (none when unset), but at
  /// least `min_after_hello` seconds from the program's hello, so a program whose start-up
  /// outlasted its round still trains (it restarts every round, and would otherwise never
  /// make a step).
  explicit lease_slot(lease_terms terms,
                      std::optional<lease_clock::time_point> deadline = std::nullopt,
                      double min_after_hello = 0);

  // ---- executor side ----
  /// The current state.
  program_view view() const;
  /// Ends the lease now: later replies grant no more steps than already made, 0 seconds.
  void stop();
  /// Takes the waiting average request's sizes and shared buffer (false when none waits).
  bool take_average(std::vector<std::size_t>& sizes, std::shared_ptr<shared_floats>& shared);
  /// Answers the waiting average request: the mean is in its shared buffer (a no-op when the
  /// connection is gone).
  void answer_average(const std::vector<std::size_t>& sizes, std::int32_t copies,
                      std::int64_t step);
  /// Refuses the waiting average request with `why` (an error line; the connection closes).
  void refuse_average(const std::string& why);

  // ---- server side (public for the server and its tests) ----
  /// The terms to send now: seconds from the deadline, steps capped by stop().
  lease_terms terms_now() const;
  /// Records a request (the server has parsed it and checked it with order_error); returns
  /// the reply line to send now, or "" when the reply comes later (average, whose buffer is
  /// `shared`).
  std::string on_request(lease_request r, std::shared_ptr<shared_floats> shared = nullptr);
  /// Records that the connection closed, with the protocol error that closed it ("" = none).
  void on_closed(const std::string& protocol_error);
  /// Where answer_average sends its line, and how refuse_average fails the connection (set by
  /// the connection; both run on the server's thread).
  void set_sender(std::function<void(std::string)> send,
                  std::function<void(std::string)> refuse = {});

 private:
  mutable std::mutex m_;
  lease_terms terms_;
  std::optional<lease_clock::time_point> deadline_;
  double min_after_hello_ = 0;
  bool stopped_ = false;
  program_view view_;
  std::vector<std::size_t> avg_sizes_;
  std::shared_ptr<shared_floats> avg_shared_;
  bool avg_held_ = false;  ///< avg_sizes_/avg_shared_ hold a request not yet taken
  std::function<void(std::string)> send_;
  std::function<void(std::string)> refuse_;
};

/// Why request `r` may not come now from a program whose slot reads `v` ("" = it may): a
/// second hello, anything after complete, a second average before the first was answered,
/// steps that go down. The server checks it before lease_slot::on_request.
std::string order_error(const lease_request& r, const program_view& v);

/// Limits of a lease server.
struct lease_server_options {
  std::size_t max_line = std::size_t{64} << 20;  ///< bytes per line, '\n' excluded
  std::size_t max_connections = 256;             ///< open connections at once
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
