#pragma once
/// @file registry.hpp
/// The one place that maps policy names to factories, and the one place a policy's name is
/// spelled: the entry hands its name to the factory, and the policy reports it (`name()`) and
/// uses it in its errors. Adding a policy = its header, its source, its test and one line in
/// registry.cpp.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "policies/options.hpp"
#include "runtime/core/policy.hpp"

namespace tessera {

/// A registered policy.
struct policy_entry {
  std::string name;
  std::string summary;               ///< one line for `tessera policies`
  std::vector<option_spec> options;  ///< accepted [policy.args]
  /// Builds the policy named `name` (the entry's) from validated options.
  std::function<std::unique_ptr<policy>(const std::string& name, const ::tessera::options&)> make;
};

/// Every registered policy, in listing order.
const std::vector<policy_entry>& policy_registry();

/// Finds a policy by name and builds it with validated options. An unknown name is an error
/// listing the valid ones; `where` prefixes option errors.
result<std::unique_ptr<policy>> make_policy(const std::string& name,
                                            const std::map<std::string, double>& args = {},
                                            const std::string& where = "policy");

}  // namespace tessera
