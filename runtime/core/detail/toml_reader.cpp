#include "runtime/core/detail/toml_reader.hpp"

#include <climits>
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/core/detail/input_file.hpp"

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
  return parse_toml_text(*read, path);
}

result<toml::table> parse_toml_text(std::string_view text, const std::string& name) {
  if (auto st = check_text(text, name, limits::toml_file); !st) return st.err();
  auto syntax_error = [&](const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return error{error_kind::invalid_input, name + ":" + std::to_string(at.line) + ":" +
                                                std::to_string(at.column) + ": " +
                                                std::string(e.description())};
  };
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    return syntax_error(e);
  } catch (const std::exception& e) {
    return input_error(name, 0, "", std::string("cannot parse TOML: ") + e.what());
  }
#else
  auto r = toml::parse(text, name);
  if (!r) return syntax_error(r.error());
  return std::move(r).table();
#endif
}

namespace {

/// Deepest nesting a JSON job set may have (a job set is three levels deep).
constexpr int max_json_depth = 16;

/// The TOML value of JSON value `j` at `where` (a field path for messages), or an error.
result<std::unique_ptr<toml::node>> toml_value(const nlohmann::json& j, const std::string& name,
                                               const std::string& where, int depth) {
  using J = nlohmann::json::value_t;
  const std::string field = where.empty() ? "" : where;
  if (depth > max_json_depth)
    return input_error(name, 0, field, "nested deeper than " + std::to_string(max_json_depth));
  switch (j.type()) {
    case J::object: {
      auto t = std::make_unique<toml::table>();
      for (const auto& [k, v] : j.items()) {
        auto e = toml_value(v, name, where.empty() ? k : where + "." + k, depth + 1);
        if (!e) return e.err();
        t->insert(k, std::move(**e));
      }
      return std::unique_ptr<toml::node>(std::move(t));
    }
    case J::array: {
      auto a = std::make_unique<toml::array>();
      for (std::size_t i = 0; i < j.size(); ++i) {
        auto e = toml_value(j[i], name, where + "[" + std::to_string(i) + "]", depth + 1);
        if (!e) return e.err();
        a->push_back(std::move(**e));
      }
      return std::unique_ptr<toml::node>(std::move(a));
    }
    case J::string:
      return std::unique_ptr<toml::node>(
          std::make_unique<toml::value<std::string>>(j.get<std::string>()));
    case J::boolean:
      return std::unique_ptr<toml::node>(std::make_unique<toml::value<bool>>(j.get<bool>()));
    case J::number_integer:
      return std::unique_ptr<toml::node>(
          std::make_unique<toml::value<std::int64_t>>(j.get<std::int64_t>()));
    case J::number_unsigned:
      if (j.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        return input_error(name, 0, field, "integer too large");
      return std::unique_ptr<toml::node>(std::make_unique<toml::value<std::int64_t>>(
          static_cast<std::int64_t>(j.get<std::uint64_t>())));
    case J::number_float:
      return std::unique_ptr<toml::node>(std::make_unique<toml::value<double>>(j.get<double>()));
    default:
      return input_error(name, 0, field, "null (or a binary value) is not a job-set value");
  }
}

}  // namespace

result<toml::table> toml_from_json(std::string_view text, const std::string& name) {
  if (text.size() > limits::toml_file.max_bytes)
    return input_error(name, 0, "",
                       "larger than " + std::to_string(limits::toml_file.max_bytes) + " bytes");
  if (json_nested_deeper_than(text, max_json_depth))
    return input_error(name, 0, "", "JSON nested deeper than " + std::to_string(max_json_depth));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return input_error(name, 0, "", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object())
    return input_error(name, 0, "", "expected a JSON object (a job set or a job)");
  // One job may be given as the object itself.
  if (!j.contains("job")) j = nlohmann::json{{"job", nlohmann::json::array({j})}};
  auto root = toml_value(j, name, "", 0);
  if (!root) return root.err();
  return std::move(*(*root)->as_table());
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
      const int line = k.source().begin.line ? static_cast<int>(k.source().begin.line) : line_of(v);
      fail(line, std::string(k.str()), "unknown key in " + context_ + "; expected one of " + list);
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
