#include "policies/options.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {

/// Why `value` is not of `kind`, or empty when it is.
std::string kind_mismatch(option_kind kind, double value) {
  std::ostringstream m;
  if (kind == option_kind::integer && !(std::isfinite(value) && value == std::floor(value)))
    m << "expected an integer, got " << value;
  else if (kind == option_kind::boolean && !(value == 0 || value == 1))
    m << "expected 0 or 1 (a boolean), got " << value;
  return m.str();
}

/// Checks one given value against its option's kind and bounds; errors name `where` and the
/// field.
status check_value(const option_spec& spec, double value, const std::string& where) {
  const std::string field = where + ": field '" + spec.name + "': ";
  if (const std::string why = kind_mismatch(spec.kind, value); !why.empty())
    return error{error_kind::invalid_input, field + why};
  // Written so that NaN, which compares false with everything, fails too.
  if (!(std::isfinite(value) && value >= spec.min && value <= spec.max)) {
    std::ostringstream m;
    m << field << value << " is outside [" << spec.min << ", " << spec.max << "]";
    return error{error_kind::invalid_input, m.str()};
  }
  return {};
}

}  // namespace

const char* to_string(option_kind k) {
  switch (k) {
    case option_kind::integer:
      return "int";
    case option_kind::boolean:
      return "bool";
    case option_kind::real:
      break;
  }
  return "real";
}

option_spec int_option(std::string name, std::string help, int value, int min, int max) {
  return {std::move(name),          std::move(help),          static_cast<double>(value),
          static_cast<double>(min), static_cast<double>(max), option_kind::integer};
}

option_spec bool_option(std::string name, std::string help, bool value) {
  return {std::move(name), std::move(help), value ? 1.0 : 0.0, 0.0, 1.0, option_kind::boolean};
}

double options::value_of(const std::string& name, option_kind kind) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error("undeclared policy option '" + name + "'");
  if (kinds_.at(name) != kind)
    throw std::logic_error("policy option '" + name + "' is " + to_string(kinds_.at(name)) +
                           ", read as " + to_string(kind));
  return it->second;
}

double options::get(const std::string& name) const { return value_of(name, option_kind::real); }

int options::integer(const std::string& name) const {
  return static_cast<int>(value_of(name, option_kind::integer));
}

bool options::flag(const std::string& name) const {
  return value_of(name, option_kind::boolean) != 0;
}

result<options> validate_options(const std::vector<option_spec>& specs,
                                 const std::map<std::string, double>& given,
                                 const std::string& where) {
  options out;
  for (const auto& s : specs) {
    out.values_[s.name] = s.default_value;
    out.kinds_[s.name] = s.kind;
  }
  for (const auto& [name, value] : given) {
    const option_spec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string valid;
      for (const auto& s : specs) valid += (valid.empty() ? "" : ", ") + s.name;
      return error{error_kind::invalid_input, where + ": field '" + name +
                                                  "': unknown policy option (valid: " +
                                                  (valid.empty() ? "none" : valid) + ")"};
    }
    if (auto st = check_value(*spec, value, where); !st) return st.err();
    out.values_[name] = value;
  }
  return out;
}

}  // namespace tessera
