#include "runtime/core/slurm_cluster.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iomanip>
#include <regex>
#include <sstream>

#include "runtime/core/detail/text.hpp"

namespace tessera {

namespace {

error list_error(const std::string& list, const std::string& what) {
  return error{error_kind::invalid_input, "host list '" + list + "': " + what};
}

/// Splits `text` at commas outside brackets.
std::vector<std::string> top_level_items(const std::string& text) {
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  items.push_back(cur);
  return items;
}

/// Expands one bracket body ("01-03,7") into its numbers as written (zero padding kept).
result<std::vector<std::string>> expand_ranges(const std::string& body, const std::string& list) {
  std::vector<std::string> out;
  std::stringstream parts(body);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const auto dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    const auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 9 &&
             std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    if (!digits(lo) || !digits(hi)) return list_error(list, "'" + part + "' is not a range");
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a) return list_error(list, "'" + part + "' runs backwards");
    if (b - a > 65535) return list_error(list, "'" + part + "' names more than 65536 hosts");
    for (long k = a; k <= b; ++k) {
      std::ostringstream n;
      n << std::setw(static_cast<int>(lo.size())) << std::setfill('0') << k;
      out.push_back(n.str());
    }
  }
  return out;
}

}  // namespace

result<std::vector<std::string>> expand_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  if (detail::trim(list).empty()) return list_error(list, "empty");
  for (const auto& raw : top_level_items(list)) {
    const std::string item(detail::trim(raw));
    if (item.empty()) return list_error(list, "an empty entry");
    std::vector<std::string> names{""};
    std::size_t i = 0;
    while (i < item.size()) {  // prefix[ranges]middle[ranges]suffix: a product
      const auto open = item.find('[', i);
      const std::string text = item.substr(i, open == std::string::npos ? open : open - i);
      for (auto& n : names) n += text;
      if (open == std::string::npos) break;
      const auto close = item.find(']', open);
      if (close == std::string::npos) return list_error(list, "an unclosed '['");
      auto nums = expand_ranges(item.substr(open + 1, close - open - 1), list);
      if (!nums) return nums.err();
      std::vector<std::string> next;
      for (const auto& n : names)
        for (const auto& k : *nums) next.push_back(n + k);
      names = std::move(next);
      i = close + 1;
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  return hosts;
}

result<std::vector<int>> expand_tasks_per_node(const std::string& spec, std::size_t nodes) {
  static const std::regex item(R"(\s*(\d{1,6})(?:\(x(\d{1,6})\))?\s*)");
  std::vector<int> out;
  std::stringstream parts(spec);
  std::string part;
  while (std::getline(parts, part, ',')) {
    std::smatch m;
    if (!std::regex_match(part, m, item))
      return error{error_kind::invalid_input,
                   "SLURM_TASKS_PER_NODE '" + spec + "': '" + part + "' is not N or N(xK)"};
    const int count = std::stoi(m[1]);
    const int times = m[2].matched ? std::stoi(m[2]) : 1;
    if (out.size() + static_cast<std::size_t>(times) > nodes) break;
    out.insert(out.end(), static_cast<std::size_t>(times), count);
  }
  if (out.size() != nodes)
    return error{error_kind::invalid_input, "SLURM_TASKS_PER_NODE '" + spec + "' does not give " +
                                                std::to_string(nodes) + " nodes a task count"};
  return out;
}

result<std::map<std::string, node_gpus>> parse_job_gres(const std::string& scontrol_text) {
  // "Nodes=<list> ... GRES=<gres>": the list has no spaces; GRES ends at a space or line end.
  static const std::regex line(R"(\bNodes=(\S+)\s[^\n]*?\bGRES=(\S+))");
  static const std::regex gpu(
      R"((?:^|,)gpu(?::([A-Za-z0-9_.-]+))?(?::(\d+))?(?:\((?:CNT:(\d+)|IDX:[^)]*)\))?)");
  std::map<std::string, node_gpus> out;
  for (std::sregex_iterator it(scontrol_text.begin(), scontrol_text.end(), line), end; it != end;
       ++it) {
    auto hosts = expand_hostlist((*it)[1]);
    if (!hosts) return hosts.err();
    const std::string gres = (*it)[2];
    std::smatch m;
    if (!std::regex_search(gres, m, gpu)) continue;  // GRES of other kinds only
    node_gpus g;
    // "gpu:4" has a count and no type; "gpu:a100:4" both.
    if (m[1].matched && !m[2].matched &&
        std::all_of(m[1].first, m[1].second, [](unsigned char c) { return std::isdigit(c); })) {
      g.count = std::stoi(m[1]);
    } else {
      g.type = detail::to_lower(m[1].str());
      if (m[2].matched) g.count = std::stoi(m[2]);
    }
    if (m[3].matched) g.count = std::stoi(m[3]);
    for (const auto& h : *hosts) out[h] = g;
  }
  return out;
}

result<slurm_allocation> read_slurm_allocation(
    const std::function<std::optional<std::string>(const std::string&)>& env,
    const std::string& scontrol_text, const slurm_defaults& defaults) {
  const auto list = env("SLURM_JOB_NODELIST");
  if (!list)
    return error{error_kind::invalid_input,
                 "SLURM_JOB_NODELIST is not set: run inside a Slurm allocation (sbatch, salloc)"};
  slurm_allocation a;
  auto hosts = expand_hostlist(*list);
  if (!hosts) return hosts.err();
  a.nodes = std::move(*hosts);
  // Unset (an allocation without a task layout): one task per node.
  auto tasks = expand_tasks_per_node(
      env("SLURM_TASKS_PER_NODE").value_or("1(x" + std::to_string(a.nodes.size()) + ")"),
      a.nodes.size());
  if (!tasks) return tasks.err();
  a.tasks_per_node = std::move(*tasks);
  auto grants = parse_job_gres(scontrol_text);
  if (!grants) return grants.err();
  for (const auto& n : a.nodes) {
    node_gpus g;
    if (auto it = grants->find(n); it != grants->end()) g = it->second;
    if (g.count == 0) g.count = defaults.gpus;
    if (g.type.empty()) g.type = defaults.gpu_type;
    if (g.count <= 0)
      return error{error_kind::invalid_input,
                   "node " + n +
                       ": Slurm granted it no GPUs (ask for --gres=gpu:TYPE:N or give "
                       "--gpus N)"};
    if (g.type.empty())
      return error{error_kind::invalid_input,
                   "node " + n +
                       ": its GPU grant names no type (--gres=gpu:TYPE:N, or give "
                       "--gpu-type T)"};
    a.gpus.push_back(g);
  }
  return a;
}

status add_spare(slurm_allocation& a, const std::string& spec) {
  static const std::regex form(R"(([A-Za-z0-9_.-]+):([A-Za-z0-9_.-]+):(\d{1,4}))");
  std::smatch m;
  const auto bad = [&](const std::string& why) {
    return error{error_kind::invalid_input, "--add '" + spec + "': " + why};
  };
  if (!std::regex_match(spec, m, form)) return bad("expected NAME:TYPE:GPUS, e.g. n4:a100:4");
  const int gpus = std::stoi(m[3]);
  if (gpus < 1 || gpus > 1024) return bad("GPUS must be 1 to 1024");
  if (std::find(a.nodes.begin(), a.nodes.end(), m[1].str()) != a.nodes.end())
    return bad("node " + m[1].str() + " is listed already");
  a.nodes.push_back(m[1]);
  a.tasks_per_node.push_back(0);
  a.gpus.push_back({detail::to_lower(m[2].str()), gpus});
  ++a.spare;
  return {};
}

std::string slurm_step_problem(
    const std::function<std::optional<std::string>(const std::string&)>& env, bool under_mpi) {
  const auto tasks = env("SLURM_STEP_NUM_TASKS");
  if (under_mpi || !tasks) return "";
  const auto n = detail::parse_int(*tasks);
  if (!n || *n <= 1) return "";
  return "Slurm started " + std::to_string(*n) +
         " tasks of this step, but MPI sees each as a world of one, so every task would be "
         "rank 0: srun needs a PMI plugin. Run `srun --mpi=pmix` (Debian's Open MPI reads "
         "PMIx, not PMI-2), or mpirun inside the allocation";
}

std::optional<double> type_speed(const throughput_table& table, const std::string& gpu_type,
                                 const std::string& reference) {
  double log_sum = 0;
  int n = 0;
  for (const auto& key : table.job_keys(reference)) {
    if (key.scale_factor != 1) continue;
    const auto mine = table.isolated(gpu_type, key), ref = table.isolated(reference, key);
    if (!mine || !ref || *mine <= 0 || *ref <= 0) continue;
    log_sum += std::log(*mine / *ref);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

std::string slurm_cluster_toml(const slurm_allocation& a, const throughput_table& table,
                               const std::string& reference) {
  std::ostringstream out;
  out << "# Built by `tessera cluster from-slurm` from the allocation's " << a.nodes.size()
      << " nodes: one server per node, GPUs as Slurm granted them, speeds relative to " << reference
      << " from the throughput table (geometric mean over its job types).\n"
      << "[cluster]\nname = \"slurm\"\n";
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto speed = type_speed(table, a.gpus[i].type, reference);
    out << "\n[[cluster.server]]\nname = \"" << a.nodes[i] << "\"\ngpu_type = \"" << a.gpus[i].type
        << "\"\ngpus = " << a.gpus[i].count << "\nspeed = " << std::setprecision(4)
        << std::clamp(speed.value_or(1.0), 1e-3, 1e3);
    if (!speed) out << "  # the table does not know " << a.gpus[i].type;
    out << '\n';
    if (i + a.spare >= a.nodes.size())
      out << "# not in the allocation: a node joins as it (tessera node --join)\n";
  }
  return out.str();
}

}  // namespace tessera
