#pragma once
/// @file lease_protocol.hpp
/// The lease channel's messages (docs/lease-protocol.md) as plain values, and their one-line
/// JSON form: parsing what a program sends, formatting what the node answers. Pure functions,
/// no I/O, so the framing rules are unit-tested and fuzzed on their own.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera::program {

/// The version of the lease protocol this build speaks ("v" in every message).
constexpr int lease_protocol_version = 2;

/// What a program asks (its "op").
enum class request_op { hello, report, average, complete, renew };

/// One message from a program, parsed and checked (types, required fields, bounds).
struct lease_request {
  request_op op = request_op::hello;
  // hello
  std::string token;                     ///< TESSERA_LEASE_TOKEN
  std::int64_t pid = 0;                  ///< the program's process id
  std::optional<std::int64_t> own_step;  ///< the step its own checkpoint is at
  /// The program keeps its process across leases: at a lease's end it checkpoints when
  /// should_checkpoint() says so and sends `renew` instead of exiting (a warm lease).
  bool renew = false;
  // report, complete, renew
  std::int64_t steps = 0;          ///< steps since hello, cumulative (>= 0)
  std::optional<double> loss;      ///< training loss (finite)
  bool final = false;              ///< report: the program stops stepping
  std::optional<double> accuracy;  ///< complete: held-out accuracy (finite)
  // average: the buffers themselves come in shared memory with the line (lease_server.hpp)
  std::vector<std::size_t> sizes;  ///< length of each buffer (float32 values)
};

/// The terms of a lease, as the node answers a hello or a report.
struct lease_terms {
  std::int64_t job = 0;     ///< job id
  std::int32_t copy = 0;    ///< copy index
  std::int32_t copies = 1;  ///< copies of the job this round (> 1: forked)
  std::int64_t step = 0;    ///< the job's step at the start of the lease
  std::int64_t steps = -1;  ///< steps the program may make, counted from hello; -1 = no cap
  double seconds = -1;      ///< seconds left from now; -1 = no time cap
  double speed = 1;         ///< pace factor (1 = none)
  bool writer = false;      ///< this process writes the job's checkpoint
  /// At the lease's end the program sends `renew` and waits: the node answers with the next
  /// lease when the job's next round keeps it where it is, else with `exit`. Granted only to
  /// a program whose hello said "renew": true.
  bool renewable = false;
  /// Reaching `steps` finishes the job: a renewable lease that ends by its step cap is not
  /// renewed (the program completes); one that ends by its time is.
  bool ends_job = false;
  /// The program checkpoints at this lease's end (should_checkpoint() on its last item). A
  /// renewable lease may say false: the process stays warm with state newer than its
  /// checkpoint, and saves when it is told `exit` (program_order::checkpoint_rounds).
  bool checkpoint = true;
};

/// Parses one line (without its '\n'). Errors (error_kind::invalid_input) say what is wrong in
/// words a program's author understands: not JSON, not an object, "v" missing or another
/// version (naming both), unknown or missing "op", a field missing or of the wrong type, a
/// negative count, an average that carries its data in the line (version 1's way).
result<lease_request> parse_request(std::string_view line);

/// The name of an op as it is written in a message ("hello", ...).
const char* op_name(request_op op);

/// The "token" of a line that is a JSON object with a string "token", whatever else is wrong
/// with it: lets the node tell which process sent a hello it refuses.
std::optional<std::string> token_of(std::string_view line);

/// The node's answers, each one JSON object ending in '\n'.
std::string format_lease(const lease_terms& t);
/// The mean is in the program's shared memory when this reply goes.
std::string format_averaged(const std::vector<std::size_t>& sizes, std::int32_t copies,
                            std::int64_t step);
std::string format_exit();
std::string format_error(std::string_view message);

}  // namespace tessera::program
