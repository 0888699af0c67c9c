#include "launcher/common.hpp"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "runtime/cluster_config.hpp"

namespace tessera::cli {

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
                  const boost::program_options::options_description& shown,
                  const char* usage_line, std::ostream& err) {
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
  return load_cluster(file.empty() ? std::string(TESSERA_CONFIG_DIR "/gavel_108.toml")
                                   : file);
}

result<throughput_table> load_table_arg(const std::string& file) {
  return file.empty() ? throughput_table::load_bundled() : throughput_table::load(file);
}

result<std::map<std::string, double>> parse_policy_args(const std::vector<std::string>& kv) {
  std::map<std::string, double> out;
  for (const auto& item : kv) {
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return error{error_kind::invalid_input,
                   "--policy-arg '" + item + "': expected key=value"};
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (val == "true" || val == "false") {
      out[key] = val == "true" ? 1 : 0;
      continue;
    }
    try {
      std::size_t used = 0;
      double v = std::stod(val, &used);
      if (used != val.size()) throw std::invalid_argument(val);
      out[key] = v;
    } catch (const std::exception&) {
      return error{error_kind::invalid_input, "--policy-arg: field '" + key + "': '" + val +
                                                 "' is not a number (or true/false)"};
    }
  }
  return out;
}

result<std::pair<job_id, job_id>> parse_window(const std::string& text) {
  long long a = 0, b = 0;
  char dash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%c", &a, &dash, &b, &extra) != 3 || dash != '-' ||
      a < 0 || b < a)
    return error{error_kind::invalid_input,
                 "--window '" + text + "': expected FIRST-LAST job ids, e.g. 4000-4999"};
  return std::make_pair(static_cast<job_id>(a), static_cast<job_id>(b));
}

progress_line::progress_line(bool enabled)
    : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0), last_() {}

progress_line::~progress_line() { finish(); }

void progress_line::update(const std::string& name, const sim_progress& p) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  state_[name] = p;
  const auto now = std::chrono::steady_clock::now();
  const auto gap = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(5000);
  if (now - last_ < gap) return;
  last_ = now;
  std::ostringstream line;
  for (const auto& [n, s] : state_) {
    line << n << ": t=" << static_cast<long>(s.now / 3600) << "h round " << s.rounds << ", "
         << s.completed << "/" << s.total << " done, " << s.active << " active   ";
  }
  if (tty_) {
    std::cerr << '\r' << line.str() << std::flush;
    dirty_ = true;
  } else {
    std::cerr << line.str() << '\n';
  }
}

void progress_line::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_) std::cerr << '\n';
  dirty_ = false;
}

}  // namespace tessera::cli
