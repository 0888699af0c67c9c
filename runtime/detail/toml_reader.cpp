#include "runtime/detail/toml_reader.hpp"

#include "runtime/detail/input_file.hpp"

namespace tessera::detail {

const char* kind_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a floating-point number";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

result<toml::table> parse_toml_file(const std::string& path) {
  auto read = read_text_file(path, limits::toml_file);
  if (!read) return read.err();
  const std::string& text = *read;
  auto syntax_error = [&](const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return error{error_kind::invalid_input, path + ":" + std::to_string(at.line) + ":" +
                                                std::to_string(at.column) + ": " +
                                                std::string(e.description())};
  };
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return syntax_error(e);
  } catch (const std::exception& e) {
    return input_error(path, 0, "", std::string("cannot parse TOML: ") + e.what());
  }
#else
  auto r = toml::parse(text, path);
  if (!r) return syntax_error(r.error());
  return std::move(r).table();
#endif
}

result<std::vector<const toml::table*>> tables_of(const std::string& path, const toml::node& n,
                                                  const std::string& key, int line_if_absent) {
  const auto* arr = n.as_array();
  if (!arr) {
    const int line = line_of(n) ? line_of(n) : line_if_absent;
    return input_error(
        path, line, key,
        "expected [[" + key + "]] entries (an array of tables), got " + kind_name(n.type()));
  }
  std::vector<const toml::table*> out;
  for (const auto& e : *arr) {
    const auto* t = e.as_table();
    if (!t)
      return input_error(path, line_of(e), key,
                         std::string("expected a table, got ") + kind_name(e.type()));
    out.push_back(t);
  }
  return out;
}

void table_reader::allow_only(std::initializer_list<const char*> allowed) {
  if (err_) return;
  for (auto&& [k, v] : t_) {
    bool known = false;
    std::string list;
    for (const char* a : allowed) {
      known = known || k.str() == a;
      list += list.empty() ? std::string("'") + a + "'" : std::string(", '") + a + "'";
    }
    if (!known) {
      const int line =
          k.source().begin.line ? static_cast<int>(k.source().begin.line) : line_of(v);
      fail(line, std::string(k.str()),
           "unknown key in " + context_ + "; expected one of " + list);
      return;
    }
  }
}

std::optional<std::string> table_reader::str(const char* key, bool required) {
  const toml::node* n = find(key, required);
  if (!n) return std::nullopt;
  if (auto s = n->as_string()) return s->get();
  return wrong_type<std::string>(*n, key, "a string");
}

std::optional<long long> table_reader::integer(const char* key, bool required, long long lo,
                                               long long hi, const char* expect) {
  const toml::node* n = find(key, required);
  if (!n) return std::nullopt;
  const auto* i = n->as_integer();
  if (!i) return wrong_type<long long>(*n, key, expect);
  const long long v = i->get();
  if (v < lo || v > hi) {
    fail(line_of(*n), key, std::string("expected ") + expect + ", got " + std::to_string(v));
    return std::nullopt;
  }
  return v;
}

}  // namespace tessera::detail
