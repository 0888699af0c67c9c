/// @file cmd_policies.cpp
/// `tessera policies`: the registry, with each policy's options.

#include <iomanip>
#include <iostream>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "policies/registry.hpp"

namespace tessera::cli {

int cmd_policies(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: tessera policies\nLists the registered policies, a line each, with "
                 "their options (set with --policy-arg key=value).\n";
    return exit_code::ok;
  }
  if (!args.empty()) {
    std::cerr << "tessera policies: unexpected argument '" << args[0] << "'\n";
    return exit_code::bad_input;
  }
  for (const auto& e : policy_registry()) {
    std::cout << std::left << std::setw(28) << e.name << e.summary << '\n';
    for (const auto& o : e.options) {
      std::cout << "    " << o.name << " (" << to_string(o.kind) << ", default " << o.default_value;
      // A boolean's range is its kind: 0 or 1.
      if (o.kind != option_kind::boolean) std::cout << ", in [" << o.min << ", " << o.max << "]";
      std::cout << "): " << o.help << '\n';
    }
  }
  return exit_code::ok;
}

}  // namespace tessera::cli
