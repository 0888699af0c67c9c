#include "runtime/core/throughput.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "runtime/core/detail/input_file.hpp"
#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

namespace {

constexpr std::string_view unconsolidated_suffix = "_unconsolidated";

/// True for a usable table value: 0 (the job cannot run there) or within the bounds of
/// runtime/core/input_limits.hpp (false for NaN).
bool valid_throughput(double v) {
  return v == 0 || (v >= limits::min_steps_per_second && v <= limits::max_steps_per_second);
}

/// What a table value must be, as messages state it.
std::string throughput_expect() {
  return "0 or a number of steps/s in [" + detail::format_shortest(limits::min_steps_per_second) +
         ", " + detail::format_shortest(limits::max_steps_per_second) + "]";
}

/// Splits a table GPU-type name into (lower-case base name, consolidated?).
std::pair<std::string, bool> split_gpu_type(std::string_view name) {
  std::string lower = detail::to_lower(name);
  if (lower.size() > unconsolidated_suffix.size() &&
      std::string_view(lower).substr(lower.size() - unconsolidated_suffix.size()) ==
          unconsolidated_suffix) {
    lower.resize(lower.size() - unconsolidated_suffix.size());
    return {lower, false};
  }
  return {lower, true};
}

/// The stored form of a GPU-type argument (lower-cased only when it has upper-case letters).
std::pair<std::string, bool> lookup_key(const std::string& gpu_type, bool consolidated) {
  return {detail::has_upper(gpu_type) ? detail::to_lower(gpu_type) : gpu_type, consolidated};
}

/// "v100 / ('ResNet-18 (batch size 64)', 1)": where in the table a value is.
std::string where(const std::string& gpu, const std::string& key) { return gpu + " / " + key; }

/// Parses job keys once: the table repeats the same few dozen keys tens of thousands of times.
class key_cache {
 public:
  const job_key* get(const std::string& text) {
    auto it = cache_.find(text);
    if (it != cache_.end()) return it->second ? &*it->second : nullptr;
    auto parsed = parse_job_key(text);
    const auto pos = cache_.emplace(text, std::move(parsed)).first;
    return pos->second ? &*pos->second : nullptr;
  }

 private:
  std::unordered_map<std::string, std::optional<job_key>> cache_;
};

}  // namespace

std::optional<job_key> parse_job_key(const std::string& text) {
  // Form: ('<model>', <scale>) with optional blanks around the parts.
  std::string_view s = detail::trim(text);
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return std::nullopt;
  s = detail::trim(s.substr(1, s.size() - 2));
  if (s.empty()) return std::nullopt;
  const char quote = s.front();
  if (quote != '\'' && quote != '"') return std::nullopt;
  const auto close = s.rfind(quote);
  if (close == 0) return std::nullopt;
  std::string_view name = s.substr(1, close - 1);
  std::string_view rest = detail::trim(s.substr(close + 1));
  if (name.empty() || rest.empty() || rest.front() != ',') return std::nullopt;
  const auto scale = detail::parse_int(rest.substr(1));
  if (!scale || *scale <= 0 || *scale > INT_MAX) return std::nullopt;
  return job_key{std::string(name), static_cast<int>(*scale)};
}

/// Builds a table straight from the parser's events, without a JSON DOM: the bundled table has
/// some 10 000 co-location pairs and every CLI command loads it, so the DOM's extra copy is
/// worth avoiding (bench/table_load_bench.cpp; docs/benchmarks/simulator-scale.md, "Loading
/// the throughput table").
/// Nesting: depth 1 = GPU types, 2 = job keys of a type, 3 = entries of a row, 4 = [self, other].
class throughput_table::sax_builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  sax_builder(throughput_table& t, std::string path) : t_(t), path_(std::move(path)) {}

  /// The error that stopped the parse, if any.
  std::optional<error> failure;

  bool null() override { return bad_value("null"); }
  bool boolean(bool v) override { return bad_value(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return number(v); }
  bool string(string_t& v) override { return bad_value("a string " + detail::quoted(v)); }
  bool binary(binary_t&) override { return bad_value("binary data"); }

  bool start_object(std::size_t) override {
    switch (depth_) {
      case 0:
        break;
      case 1:
        dest_ = &t_.rows_[split_gpu_type(gpu_)];
        break;
      case 2:
        row_ = row{};
        has_alone_ = false;
        break;
      default:
        return bad_value("an object");
    }
    ++depth_;
    return true;
  }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      gpu_ = k;
    } else if (depth_ == 2) {
      row_text_ = k;
      row_key_ = keys_.get(k);
      if (!row_key_)
        return fail(where_row(), "malformed job key; expected ('<job type>', <scale factor>)");
    } else {  // depth 3
      entry_text_ = k;
      is_alone_ = k == "null";
      if (!is_alone_) {
        other_key_ = keys_.get(k);
        if (!other_key_)
          return fail(where_entry(), "malformed job key; expected ('<job type>', <scale factor>)");
      }
    }
    return true;
  }

  bool end_object() override {
    --depth_;
    if (depth_ == 2) {
      if (!has_alone_) return fail(where_row(), "missing the isolated throughput entry \"null\"");
      (*dest_)[*row_key_] = std::move(row_);
    }
    return true;
  }

  bool start_array(std::size_t) override {
    if (depth_ != 3 || is_alone_) return bad_value("an array");
    ++depth_;
    n_pair_ = 0;
    return true;
  }

  bool end_array() override {
    --depth_;
    if (n_pair_ != 2)
      return fail(where_entry(),
                  "expected [self, other] steps/s, got " + std::to_string(n_pair_) + " values");
    row_.with.emplace_hint(row_.with.end(), *other_key_, std::make_pair(pair_[0], pair_[1]));
    return true;
  }

  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    failure = input_error(path_, line_of_(byte), "", std::string("invalid JSON: ") + e.what());
    return false;
  }

  /// Set by load(): maps a byte offset to a line number.
  std::function<int(std::size_t)> line_of_;

 private:
  bool number(double v) {
    if (depth_ == 3 && is_alone_) {
      if (!valid_throughput(v))
        return fail(where_entry(),
                    "expected " + throughput_expect() + ", got " + detail::format_shortest(v));
      row_.alone = v;
      has_alone_ = true;
      return true;
    }
    if (depth_ == 4) {
      if (!valid_throughput(v))
        return fail(where_entry(),
                    "expected " + throughput_expect() + ", got " + detail::format_shortest(v));
      if (n_pair_ < 2) pair_[n_pair_] = v;
      ++n_pair_;
      return true;
    }
    return bad_value("a number");
  }

  /// A value of the wrong kind at the current place.
  bool bad_value(const std::string& got) {
    switch (depth_) {
      case 0:
        return fail("", "expected a JSON object of GPU types, got " + got);
      case 1:
        return fail(gpu_, "expected an object of job keys, got " + got);
      case 2:
        return fail(where_row(), "expected an object of throughputs, got " + got);
      case 3:
        return fail(where_entry(), is_alone_
                                       ? "expected a non-negative number of steps/s, got " + got
                                       : "expected [self, other] steps/s, got " + got);
      default:
        return fail(where_entry(), "expected a number, got " + got);
    }
  }

  bool fail(const std::string& field, const std::string& what) {
    if (!failure) failure = input_error(path_, 0, field, what);
    return false;
  }

  std::string where_row() const { return where(gpu_, row_text_); }
  std::string where_entry() const { return where_row() + " / " + entry_text_; }

  throughput_table& t_;
  std::string path_;
  key_cache keys_;
  int depth_ = 0;
  std::string gpu_, row_text_, entry_text_;
  std::map<job_key, row>* dest_ = nullptr;
  const job_key* row_key_ = nullptr;
  const job_key* other_key_ = nullptr;
  row row_;
  bool has_alone_ = false;
  bool is_alone_ = false;
  int n_pair_ = 0;
  double pair_[2] = {0, 0};
};

result<throughput_table> throughput_table::load(const std::string& path) {
  auto read = detail::read_text_file(path, limits::json_table_file);
  if (!read) return read.err();
  const std::string& text = *read;

  throughput_table t;
  sax_builder b(t, path);
  b.line_of_ = [&text](std::size_t byte) {
    // nlohmann reports the 1-based offset of the offending byte.
    const std::size_t upto = std::min(byte, text.size());
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + upto, '\n'));
  };
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text, &b);
  } catch (const std::exception& e) {
    return input_error(path, 0, "", std::string("invalid JSON: ") + e.what());
  }
  if (!ok || b.failure) return b.failure ? *b.failure : input_error(path, 0, "", "invalid JSON");
  return t;
}

result<throughput_table> throughput_table::load_bundled() {
  return load(TESSERA_DATA_DIR "/gavel/simulation_throughputs.json");
}

std::optional<double> throughput_table::isolated(const std::string& gpu_type, const job_key& key,
                                                 bool consolidated) const {
  auto find = [&](bool cons) -> std::optional<double> {
    auto t = rows_.find(lookup_key(gpu_type, cons));
    if (t == rows_.end()) return std::nullopt;
    auto r = t->second.find(key);
    if (r == t->second.end()) return std::nullopt;
    return r->second.alone;
  };
  if (!consolidated) {
    if (auto v = find(false)) return v;
  }
  return find(true);
}

std::optional<std::pair<double, double>> throughput_table::colocated(const std::string& gpu_type,
                                                                     const job_key& key,
                                                                     const job_key& other) const {
  auto t = rows_.find(lookup_key(gpu_type, true));
  if (t == rows_.end()) return std::nullopt;
  auto r = t->second.find(key);
  if (r == t->second.end()) return std::nullopt;
  auto w = r->second.with.find(other);
  if (w == r->second.with.end()) return std::nullopt;
  return w->second;
}

std::vector<std::string> throughput_table::gpu_types() const {
  std::vector<std::string> out;
  for (const auto& [k, rows] : rows_)
    if (k.second && !rows.empty()) out.push_back(k.first);
  return out;  // rows_ is ordered by name, so this is sorted
}

std::vector<job_key> throughput_table::job_keys(const std::string& gpu_type) const {
  std::vector<job_key> out;
  auto t = rows_.find(lookup_key(gpu_type, true));
  if (t == rows_.end()) return out;
  out.reserve(t->second.size());
  for (const auto& [k, r] : t->second) out.push_back(k);
  return out;
}

bool throughput_table::knows_job_type(const std::string& job_type) const {
  for (const auto& [k, rows] : rows_) {
    auto it = rows.lower_bound(job_key{job_type, INT_MIN});
    if (it != rows.end() && it->first.job_type == job_type) return true;
  }
  return false;
}

bool throughput_table::has_colocated() const {
  for (const auto& [k, rows] : rows_)
    for (const auto& [key, r] : rows)
      if (!r.with.empty()) return true;
  return false;
}

bool throughput_table::knows(const job_key& key) const {
  for (const auto& [k, rows] : rows_)
    if (k.second && rows.count(key)) return true;
  return false;
}

throughput_table throughput_table::consolidated_only() const {
  throughput_table t;
  for (const auto& [k, rows] : rows_)
    if (k.second) t.rows_.emplace(k, rows);
  return t;
}

void throughput_table::set_isolated(const std::string& gpu_type, const job_key& key,
                                    double steps_per_s, bool consolidated) {
  rows_[{detail::to_lower(gpu_type), consolidated}][key].alone = steps_per_s;
}

void throughput_table::set_colocated(const std::string& gpu_type, const job_key& key,
                                     const job_key& other, std::pair<double, double> steps_per_s) {
  rows_[{detail::to_lower(gpu_type), true}][key].with[other] = steps_per_s;
}

std::string throughput_table::to_json() const {
  auto key_text = [](const job_key& k) {
    return "('" + k.job_type + "', " + std::to_string(k.scale_factor) + ")";
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [type, rows] : rows_) {
    auto& t = out[type.first + (type.second ? "" : std::string(unconsolidated_suffix))];
    t = nlohmann::ordered_json::object();
    for (const auto& [key, r] : rows) {
      auto& row = t[key_text(key)];
      row["null"] = r.alone;
      for (const auto& [other, v] : r.with) row[key_text(other)] = {v.first, v.second};
    }
  }
  return out.dump(1) + "\n";
}

}  // namespace tessera
