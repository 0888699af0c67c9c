#include "policies/options.hpp"

#include <sstream>
#include <stdexcept>

namespace tessera {

double options::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("undeclared policy option '" + name + "'");
  return it->second;
}

result<options> validate_options(const std::vector<option_spec>& specs,
                                 const std::map<std::string, double>& given,
                                 const std::string& where) {
  std::map<std::string, double> out;
  for (const auto& s : specs) out[s.name] = s.default_value;
  for (const auto& [name, value] : given) {
    const option_spec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string valid;
      for (const auto& s : specs) valid += (valid.empty() ? "" : ", ") + s.name;
      return error{error_kind::invalid_input,
                   where + ": field '" + name + "': unknown policy option (valid: " +
                       (valid.empty() ? "none" : valid) + ")"};
    }
    if (value < spec->min || value > spec->max) {
      std::ostringstream m;
      m << where << ": field '" << name << "': " << value << " is outside [" << spec->min
        << ", " << spec->max << "]";
      return error{error_kind::invalid_input, m.str()};
    }
    out[name] = value;
  }
  return options(std::move(out));
}

}  // namespace tessera
