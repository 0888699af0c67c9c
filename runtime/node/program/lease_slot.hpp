#pragma once
/// @file lease_slot.hpp
/// One program process's lease as the node keeps it (docs/lease-protocol.md): the terms the
/// executor (actors/program_round.hpp) sets, what the process reported through the node's
/// lease server (lease_server.hpp), and the replies that wait for the executor: an `average`
/// until the copies have merged, a `renew` until the next round's orders say whether the same
/// process goes on (a warm lease) or is let go.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/node/program/lease_protocol.hpp"
#include "runtime/node/program/shared_floats.hpp"

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
  bool renewable = false;          ///< its lease may be renewed (the node allows, hello asked)
  bool renew_waiting = false;      ///< a renew request awaits renew() or release()
  std::int64_t renewals = 0;       ///< leases renewed in place so far
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
  /// Only a process carrying `mark` (process_spec::mark: the program the token was made
  /// for, or a process it started) may say hello with this slot's token. Set before the
  /// process starts; "" (the default): any process holding the token.
  void bind_to_mark(std::string mark) { owner_mark_ = std::move(mark); }
  const std::string& owner_mark() const { return owner_mark_; }
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
  /// Answers a waiting `renew` with a new lease of `terms` (the deadline and the minimum after
  /// renewal as in the constructor): the lease starts afresh, its steps counted from now and
  /// its step `terms.step`. False (nothing sent) when no renew waits or the connection is gone.
  bool renew(lease_terms terms, std::optional<lease_clock::time_point> deadline,
             double min_after_renewal);
  /// Answers a waiting `renew` with `exit`: the program's checkpoint is written, it exits.
  void release();

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
  std::string owner_mark_;  ///< bind_to_mark (set before the server can see the token)
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
/// a renew the lease does not allow or while another request waits, steps that go down. The server
/// checks it before lease_slot::on_request.
std::string order_error(const lease_request& r, const program_view& v);

}  // namespace tessera::program
