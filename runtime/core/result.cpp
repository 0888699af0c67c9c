#include "runtime/core/result.hpp"

namespace tessera {

std::string input_message(const std::string& file, int line, const std::string& field,
                          const std::string& what) {
  std::string m = file;
  if (line > 0) m += ":" + std::to_string(line);
  m += ": ";
  if (!field.empty()) m += "field '" + field + "': ";
  m += what;
  return m;
}

error input_error(const std::string& file, int line, const std::string& field,
                  const std::string& what) {
  return error{error_kind::invalid_input, input_message(file, line, field, what)};
}

}  // namespace tessera
