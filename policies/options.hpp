#pragma once
/// @file options.hpp
/// Typed policy parameters (the HiGHS way): each option is one record with name, help, kind,
/// default and bounds, so validation, `tessera policies` and the docs come from one table.
/// Values arrive as numbers (`--policy-arg key=value`, `[policy.args]`); the kind says which
/// numbers are valid: any within the bounds (real), whole ones (integer), 0 or 1 (boolean).

#include <map>
#include <string>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera {

/// What values an option takes.
enum class option_kind {
  real,     ///< any number within the bounds
  integer,  ///< a whole number within the bounds
  boolean,  ///< 0 (off) or 1 (on)
};

/// Short name of a kind as `tessera policies` prints it: "real", "int" or "bool".
const char* to_string(option_kind k);

/// One option of a policy. A plain brace list {name, help, default, min, max} is a real
/// option; integer and boolean ones come from int_option and bool_option.
struct option_spec {
  std::string name;
  std::string help;
  double default_value = 0;
  double min = 0;
  double max = 0;
  option_kind kind = option_kind::real;
};

/// An integer option with default `value` within [min, max].
option_spec int_option(std::string name, std::string help, int value, int min, int max);

/// A boolean option (0 or 1) with default `value`.
option_spec bool_option(std::string name, std::string help, bool value);

/// Validated option values: every declared option has a value of its kind within its bounds.
/// The accessors name the option and assert its kind (std::logic_error otherwise), so a
/// policy reading a flag as a number, or an undeclared name, fails loudly.
class options {
 public:
  options() = default;
  /// Value of a declared real option (its default when the user gave none).
  double get(const std::string& name) const;
  /// Value of a declared integer option.
  int integer(const std::string& name) const;
  /// Value of a declared boolean option.
  bool flag(const std::string& name) const;
  /// Every option's value as a number, by name.
  const std::map<std::string, double>& values() const { return values_; }

 private:
  friend result<options> validate_options(const std::vector<option_spec>& specs,
                                          const std::map<std::string, double>& given,
                                          const std::string& where);
  double value_of(const std::string& name, option_kind kind) const;

  std::map<std::string, double> values_;
  std::map<std::string, option_kind> kinds_;
};

/// Checks `given` against `specs`: unknown names, values not of the option's kind (a
/// fraction for an integer option, anything but 0 or 1 for a boolean one), out-of-range
/// values, NaN and infinities are errors naming `where` (e.g. "sim.toml:7") and the field;
/// missing options take their defaults.
result<options> validate_options(const std::vector<option_spec>& specs,
                                 const std::map<std::string, double>& given,
                                 const std::string& where);

}  // namespace tessera
