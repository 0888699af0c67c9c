#pragma once
/// @file result.hpp
/// Error values at module edges: `result<T>` holds a value or an `error`. The runtime layer is
/// plain C++ (no CAF), so it carries its own small expected-like type; the actor layer turns an
/// `error` into a `caf::error` at its edge.

#include <string>
#include <utility>
#include <variant>

namespace tessera {

/// What went wrong. `kind` separates bad input from an infeasible model from a broken solver,
/// so a caller can tell "cannot schedule this" from "something broke".
enum class error_kind {
  invalid_input,  ///< a file, flag or value the user gave is wrong
  not_found,      ///< a named thing (policy, job type, GPU type) does not exist
  infeasible,     ///< a model has no solution
  solver_failed,  ///< a solver or numerical routine failed
  io,             ///< reading or writing a file failed
  internal,       ///< a broken invariant inside tessera
};

/// An error with a human-readable message. Messages about input name the file, line and
/// field: "trace.txt:12: field 'scale_factor': expected a positive integer, got '0'".
struct error {
  error_kind kind = error_kind::internal;
  std::string message;
};

/// Exit codes of every tessera command, and of the node processes a run starts.
namespace exit_code {
inline constexpr int ok = 0;         ///< success
inline constexpr int failed = 1;     ///< a run (or a write) failed
inline constexpr int bad_input = 2;  ///< bad input or usage: nothing was run
}  // namespace exit_code

/// The exit code for an error: bad_input for invalid input or an unknown name, else failed.
inline int exit_code_for(const error& e) {
  return e.kind == error_kind::invalid_input || e.kind == error_kind::not_found
             ? exit_code::bad_input
             : exit_code::failed;
}

/// Builds the message for bad input in a file: "<file>:<line>: field '<field>': <what>".
/// `line` 0 means "the whole file"; an empty `field` leaves the field part out.
std::string input_message(const std::string& file, int line, const std::string& field,
                          const std::string& what);

/// Shorthand for an `invalid_input` error built with `input_message`.
error input_error(const std::string& file, int line, const std::string& field,
                  const std::string& what);

/// A value of type T or an error.
template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  result(error e) : v_(std::move(e)) {}      // NOLINT: implicit by design

  /// True when a value is held.
  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  /// The value; only valid when ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// The error; only valid when !ok().
  const error& err() const { return std::get<1>(v_); }

 private:
  std::variant<T, error> v_;
};

/// Success or an error, for operations without a value.
struct status {
  status() = default;
  status(error e) : failed(true), e_(std::move(e)) {}  // NOLINT: implicit by design
  bool failed = false;
  bool ok() const noexcept { return !failed; }
  explicit operator bool() const noexcept { return ok(); }
  const error& err() const { return e_; }

 private:
  error e_;
};

}  // namespace tessera
