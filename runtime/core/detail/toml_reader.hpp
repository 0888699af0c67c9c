#pragma once
/// @file toml_reader.hpp
/// Reading TOML input files (cluster files, job-set files) so that every error names the file,
/// the line and the field: syntax errors, unknown keys, missing fields, wrongly typed or
/// out-of-range values. TOML++ and its exceptions stay behind this header and the loaders
/// that include it. Internal to runtime/: not part of the public API.

#include <toml++/toml.h>

#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/core/detail/text.hpp"
#include "runtime/core/result.hpp"

namespace tessera::detail {

/// What a TOML node holds, for "expected X, got Y" messages ("a table", "an integer", ...).
const char* kind_name(toml::node_type t);

/// The line a node starts on (0 when unknown).
inline int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

/// Reads and parses a TOML file of at most limits::toml_file (16 MiB, lines of 64 KiB);
/// syntax errors give "<file>:<line>:<column>: <description>".
result<toml::table> parse_toml_file(const std::string& path);

/// Parses TOML text already in memory, named `name` in messages, under the same bounds.
result<toml::table> parse_toml_text(std::string_view text, const std::string& name);

/// A JSON document of a TOML file's shape as a TOML table, so that one reader checks both.
/// Nodes carry no line numbers; errors name `name` and the field path ("job[1].config").
/// An object without a "job" key is taken as one job: {"job": [object]}.
result<toml::table> toml_from_json(std::string_view text, const std::string& name);

/// The tables of an array-of-tables key (`[[key]]`), or an error naming it. `line_if_absent`
/// is reported when the node has no line of its own.
result<std::vector<const toml::table*>> tables_of(const std::string& path, const toml::node& n,
                                                  const std::string& key, int line_if_absent);

/// Reads the fields of one TOML table, naming the file, line and field in every error.
/// The first error is kept; later reads are no-ops returning nullopt.
class table_reader {
 public:
  /// `context` names the table in messages, e.g. "[[job]]".
  table_reader(const std::string& path, const toml::table& t, std::string context)
      : path_(path), t_(t), context_(std::move(context)) {}

  /// Rejects keys outside `allowed`, naming the first unknown one.
  void allow_only(std::initializer_list<const char*> allowed);

  /// A string field; required ones report the table's line when missing.
  std::optional<std::string> str(const char* key, bool required);

  /// An integer field within [lo, hi]; `expect` describes it in messages.
  std::optional<long long> integer(const char* key, bool required, long long lo, long long hi,
                                   const char* expect);

  /// A number field (integer or floating point); `ok` validates its value.
  template <class Pred>
  std::optional<double> number(const char* key, bool required, Pred ok, const char* expect) {
    const toml::node* n = find(key, required);
    if (!n) return std::nullopt;
    double v = 0;
    if (const auto* i = n->as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      v = f->get();
    } else {
      return wrong_type<double>(*n, key, expect);
    }
    if (!std::isfinite(v) || !ok(v)) {
      fail(line_of(*n), key, std::string("expected ") + expect + ", got " + format_shortest(v));
      return std::nullopt;
    }
    return v;
  }

  /// Line of a field, or of the table when the field is absent.
  int line(const char* key) const {
    const toml::node* n = t_.get(key);
    return n ? line_of(*n) : table_line();
  }
  /// Line of the table itself (its header).
  int table_line() const { return line_of(t_); }

  /// Records an error (only the first one counts).
  void fail(int line, const std::string& field, const std::string& what) {
    if (!err_) err_ = input_error(path_, line, field, what);
  }
  /// The first error, if any.
  const std::optional<error>& err() const { return err_; }

 private:
  const toml::node* find(const char* key, bool required) {
    if (err_) return nullptr;
    const toml::node* n = t_.get(key);
    if (!n && required) fail(table_line(), key, "missing in " + context_);
    return n;
  }

  template <class T>
  std::optional<T> wrong_type(const toml::node& n, const char* key, const char* expect) {
    fail(line_of(n), key, std::string("expected ") + expect + ", got " + kind_name(n.type()));
    return std::nullopt;
  }

  const std::string& path_;
  const toml::table& t_;
  std::string context_;
  std::optional<error> err_;
};

}  // namespace tessera::detail
