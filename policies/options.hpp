#pragma once
/// @file options.hpp
/// Typed policy parameters (the HiGHS way): each option is one record with name, help,
/// default and bounds, so validation, `tessera policies` and the docs come from one table.

#include <map>
#include <string>
#include <vector>

#include "runtime/result.hpp"

namespace tessera {

/// One numeric option of a policy.
struct option_spec {
  std::string name;
  std::string help;
  double default_value = 0;
  double min = 0;
  double max = 0;
};

/// Validated option values: every declared option has a value within its bounds.
class options {
 public:
  options() = default;
  explicit options(std::map<std::string, double> v) : values_(std::move(v)) {}
  /// Value of a declared option (its default when the user gave none).
  double get(const std::string& name) const;
  const std::map<std::string, double>& values() const { return values_; }

 private:
  std::map<std::string, double> values_;
};

/// Checks `given` against `specs`: unknown names and out-of-range values are errors naming
/// `where` (e.g. "sim.toml:7") and the field; missing options take their defaults.
result<options> validate_options(const std::vector<option_spec>& specs,
                                 const std::map<std::string, double>& given,
                                 const std::string& where);

}  // namespace tessera
