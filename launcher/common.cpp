#include "launcher/common.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "runtime/core/cluster_config.hpp"
#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera::cli {

namespace {

/// `x` as an integer when it is a moderate whole number ("1000000000"), else in its shortest
/// exact form ("1e-09", "nan").
std::string number_text(double x) {
  char buf[64];
  const bool whole = std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15;
  const auto r = whole ? std::to_chars(buf, buf + sizeof buf, static_cast<long long>(x))
                       : std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace

status check_option(const char* option, double value, double lo, double hi, const char* unit) {
  if (std::isfinite(value) && value >= lo && value <= hi) return {};
  return error{error_kind::invalid_input, std::string(option) + ": expected a number in [" +
                                              number_text(lo) + ", " + number_text(hi) + "]" +
                                              (*unit ? std::string(" (") + unit + ")" : "") +
                                              ", got " + number_text(value)};
}

std::string self_exe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

int report(const error& e) {
  std::cerr << "tessera: " << e.message << '\n';
  return exit_code_for(e);
}

int parse_options(const std::vector<std::string>& args,
                  const boost::program_options::options_description& parsed,
                  const boost::program_options::options_description& shown, const char* usage_line,
                  std::ostream& err) {
  namespace po = boost::program_options;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(parsed).run(), vm);
    if (vm.count("help")) {
      std::cout << usage_line << "\n\n" << shown << '\n';
      return exit_code::ok;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    err << "tessera: " << e.what() << "\n" << usage_line << "\n(see --help)\n";
    return exit_code::bad_input;
  }
  return -1;
}

result<cluster> load_cluster_arg(const std::string& file, const std::string& spec) {
  if (!file.empty() && !spec.empty())
    return error{error_kind::invalid_input, "give either --cluster or --cluster-spec, not both"};
  if (!spec.empty()) return parse_cluster_shorthand(spec, "--cluster-spec");
  return load_cluster(file.empty() ? std::string(TESSERA_CONFIG_DIR "/gavel_108.toml") : file);
}

std::optional<std::string> env_value(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

result<throughput_table> load_table_arg(const std::string& file) {
  return file.empty() ? throughput_table::load_bundled() : throughput_table::load(file);
}

result<std::map<std::string, double>> load_restart_costs(const std::string& file) {
  std::map<std::string, double> out;
  if (file.empty()) return out;
  std::ifstream in(file, std::ios::binary);
  if (!in) return error{error_kind::io, file + ": cannot open"};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (detail::trim(line).empty() || (n == 1 && line.rfind("job_type,", 0) == 0)) continue;
    const auto f = detail::csv_fields(line);
    const std::string where = file + ":" + std::to_string(n);
    if (f.size() != 2 || detail::trim(f[0]).empty())
      return error{error_kind::invalid_input, where + ": expected job_type,seconds"};
    const auto v = detail::parse_double(f[1]);
    if (!v || *v < 0 || *v > option_bounds::max_restart_cost)
      return error{error_kind::invalid_input,
                   where + ": field 'seconds': expected a number in [0, " +
                       detail::format_shortest(option_bounds::max_restart_cost) + "], got " +
                       detail::quoted(f[1])};
    out[std::string(detail::trim(f[0]))] = *v;
  }
  return out;
}

result<std::map<std::string, double>> parse_policy_args(const std::vector<std::string>& kv) {
  std::map<std::string, double> out;
  for (const auto& item : kv) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return error{error_kind::invalid_input, "--policy-arg '" + item + "': expected key=value"};
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (val == "true" || val == "false") {
      out[key] = val == "true" ? 1 : 0;
      continue;
    }
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(val, &used);
      if (used != val.size()) throw std::invalid_argument(val);
    } catch (const std::invalid_argument&) {
      return error{error_kind::invalid_input, "--policy-arg: field '" + key + "': '" + val +
                                                  "' is not a number (or true/false)"};
    } catch (const std::out_of_range&) {
      v = HUGE_VAL;  // beyond a double: refused below with NaN and the infinities
    }
    // NaN would pass every bound a policy checks (it compares false with everything).
    if (!std::isfinite(v))
      return error{error_kind::invalid_input, "--policy-arg: field '" + key +
                                                  "': expected a finite number, got '" + val + "'"};
    out[key] = v;
  }
  return out;
}

result<std::pair<job_id, job_id>> parse_window(const std::string& text) {
  // Whole decimal ids, no sign or blanks; an id past limits::max_job_id is no job's.
  auto id = [](std::string_view s) -> std::optional<long long> {
    long long v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0 ||
        v > limits::max_job_id)
      return std::nullopt;
    return v;
  };
  const auto dash = text.find('-');
  const auto a =
      dash == std::string::npos ? std::nullopt : id(std::string_view(text).substr(0, dash));
  const auto b =
      dash == std::string::npos ? std::nullopt : id(std::string_view(text).substr(dash + 1));
  if (!a || !b || *b < *a)
    return error{error_kind::invalid_input,
                 "--window '" + text + "': expected FIRST-LAST job ids, e.g. 4000-4999"};
  return std::make_pair(static_cast<job_id>(*a), static_cast<job_id>(*b));
}

result<copy_efficiency> parse_copy_efficiency(const std::string& text) {
  copy_efficiency ce;
  if (text == "on") return ce;
  if (text == "off") {
    ce.enabled = false;
    return ce;
  }
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() ||
      !std::isfinite(v) || v <= 0)
    return error{error_kind::invalid_input,
                 "--copy-efficiency '" + text +
                     "': expected on, off or a positive noise scale in samples, e.g. 200"};
  ce.b_noise = v;
  return ce;
}

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  char hex[8];
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C1 controls in UTF-8 (U+0080..U+009F: 0xC2 0x80..0x9F) act as escapes on some terminals.
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += hex;
    } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace tessera::cli
