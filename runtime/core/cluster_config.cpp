#include "runtime/core/cluster_config.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "runtime/core/detail/text.hpp"
#include "runtime/core/detail/toml_reader.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

namespace {

using detail::kind_name;
using detail::line_of;
using detail::parse_toml_file;
using detail::table_reader;
using detail::tables_of;

/// Upper bound on a cluster's GPUs, against typos such as "3600000000 v100".
constexpr long long max_cluster_gpus = limits::max_gpus;
/// Upper bound on a cluster's servers: a million one-GPU servers take seconds to name and
/// index (over 10 s under the sanitizers; found by fuzz/fuzz_cluster).
constexpr long long max_cluster_servers = 1LL << 16;

/// What a server's speed must be, as messages state it.
const std::string speed_expect = "a speed factor in [" +
                                 detail::format_shortest(limits::min_speed) + ", " +
                                 detail::format_shortest(limits::max_speed) + "]";
const std::string gpus_expect =
    "a positive number of GPUs, at most " + std::to_string(max_cluster_gpus);
const std::string count_expect =
    "a positive number of servers, at most " + std::to_string(max_cluster_servers);

/// Hands out default server names "<type>-<k>" and checks that names are unique.
class server_namer {
 public:
  std::string next(const std::string& type) {
    for (;;) {
      std::string name = type + "-" + std::to_string(next_[type]++);
      if (!used_.count(name)) return name;
    }
  }
  bool claim(const std::string& name) { return used_.insert(name).second; }

 private:
  std::map<std::string, int> next_;
  std::set<std::string> used_;
};

bool iequals(std::string_view a, std::string_view b) {
  return detail::to_lower(a) == detail::to_lower(b);
}

std::string prefixed(const std::string& where, const std::string& what) {
  return where.empty() ? what : where + ": " + what;
}

/// Parses a shorthand into servers, naming them through `namer`.
result<std::vector<server>> shorthand_servers(const std::string& text, const std::string& where,
                                              server_namer& namer) {
  auto bad = [&](const std::string& what) {
    return error{error_kind::invalid_input,
                 prefixed(where, what + " (in cluster shorthand " + detail::quoted(text) +
                                     "; expected e.g. \"36 v100 : 36 p100, 4 per server\")")};
  };
  const auto parts = detail::split(text, ',');
  if (parts.size() > 2) return bad("more than one ','");

  // "<count> <type>" groups separated by ':'.
  std::vector<std::pair<long long, std::string>> groups;
  std::set<std::string> seen;
  for (auto g : detail::split(parts[0], ':')) {
    g = detail::trim(g);
    const auto sp = g.find_first_of(" \t");
    if (g.empty() || sp == std::string_view::npos)
      return bad("expected '<GPUs> <type>', got " + detail::quoted(g));
    const auto count = detail::parse_int(g.substr(0, sp));
    const std::string type = detail::to_lower(detail::trim(g.substr(sp)));
    if (!count || *count <= 0 || *count > INT_MAX)
      return bad("expected a positive GPU count, got " + detail::quoted(g.substr(0, sp)));
    if (type.empty() || type.find_first_of(" \t") != std::string::npos)
      return bad("expected one GPU type name after the count, got " +
                 detail::quoted(g.substr(sp + 1)));
    if (!seen.insert(type).second) return bad("GPU type '" + type + "' given twice");
    groups.emplace_back(*count, type);
  }

  // ", <n>[:<n>...] [gpus] per server"; default 1 GPU per server, as Gavel's simulator.
  std::vector<long long> per_server(groups.size(), 1);
  if (parts.size() == 2) {
    std::vector<std::string_view> words;
    for (auto w : detail::split(detail::trim(parts[1]), ' '))
      if (!detail::trim(w).empty()) words.push_back(detail::trim(w));
    const bool tail_ok =
        (words.size() == 3 && iequals(words[1], "per") && iequals(words[2], "server")) ||
        (words.size() == 4 && (iequals(words[1], "gpus") || iequals(words[1], "gpu")) &&
         iequals(words[2], "per") && iequals(words[3], "server"));
    if (!tail_ok)
      return bad("expected '<n> per server' after ',', got " +
                 detail::quoted(detail::trim(parts[1])));
    const auto ns = detail::split(words[0], ':');
    if (ns.size() != 1 && ns.size() != groups.size())
      return bad("expected one GPUs-per-server value, or one per GPU type");
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const auto n = detail::parse_int(ns.size() == 1 ? ns[0] : ns[i]);
      if (!n || *n <= 0 || *n > INT_MAX)
        return bad("expected a positive number of GPUs per server, got " +
                   detail::quoted(words[0]));
      per_server[i] = *n;
    }
  }

  long long total = 0;
  for (const auto& g : groups) total += g.first;
  if (total > max_cluster_gpus)
    return bad("more than " + std::to_string(max_cluster_gpus) + " GPUs");
  long long servers = 0;
  for (std::size_t i = 0; i < groups.size(); ++i)
    servers += (groups[i].first + per_server[i] - 1) / per_server[i];
  if (servers > max_cluster_servers)
    return bad("more than " + std::to_string(max_cluster_servers) + " servers");

  std::vector<server> out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    long long left = groups[i].first;
    while (left > 0) {
      server s;
      s.gpu_type = groups[i].second;
      s.gpus = static_cast<int>(std::min(left, per_server[i]));
      s.speed = 1.0;
      s.name = namer.next(s.gpu_type);
      namer.claim(s.name);
      left -= s.gpus;
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

result<cluster> parse_cluster_shorthand(const std::string& text, const std::string& where) {
  server_namer namer;
  auto servers = shorthand_servers(text, where, namer);
  if (!servers) return servers.err();
  return make_cluster(std::move(*servers));
}

result<cluster> load_cluster(const std::string& path) {
  try {
    auto doc = parse_toml_file(path);
    if (!doc) return doc.err();
    const toml::table& root = *doc;

    table_reader top(path, root, "a cluster file");
    top.allow_only({"cluster"});
    if (top.err()) return *top.err();
    const toml::node* cnode = root.get("cluster");
    if (!cnode) return input_error(path, 0, "cluster", "missing table [cluster]");
    const toml::table* ct = cnode->as_table();
    if (!ct)
      return input_error(path, line_of(*cnode), "cluster",
                         std::string("expected a table, got ") + kind_name(cnode->type()));

    table_reader c(path, *ct, "[cluster]");
    c.allow_only({"name", "shorthand", "server"});
    c.str("name", false);
    const auto shorthand = c.str("shorthand", false);
    if (c.err()) return *c.err();

    server_namer namer;
    std::vector<server> servers;
    if (shorthand) {
      const std::string where = input_message(path, c.line("shorthand"), "shorthand", "");
      // input_message ends in ": " + what; drop the trailing separator for a prefix.
      auto sh = shorthand_servers(*shorthand, where.substr(0, where.size() - 2), namer);
      if (!sh) return sh.err();
      servers = std::move(*sh);
    }

    long long total_gpus = 0;
    for (const auto& sv : servers) total_gpus += sv.gpus;
    if (const toml::node* snode = ct->get("server")) {
      auto tables = tables_of(path, *snode, "cluster.server", c.table_line());
      if (!tables) return tables.err();
      for (const toml::table* st : *tables) {
        table_reader s(path, *st, "[[cluster.server]]");
        s.allow_only({"gpu_type", "gpus", "speed", "count", "name"});
        auto type = s.str("gpu_type", true);
        const auto gpus = s.integer("gpus", true, 1, max_cluster_gpus, gpus_expect.c_str());
        const auto speed = s.number(
            "speed", false,
            [](double v) { return v >= limits::min_speed && v <= limits::max_speed; },
            speed_expect.c_str());
        const auto count = s.integer("count", false, 1, max_cluster_servers, count_expect.c_str());
        const auto name = s.str("name", false);
        if (s.err()) return *s.err();
        const std::string t = detail::to_lower(detail::trim(*type));
        if (t.empty()) return input_error(path, s.line("gpu_type"), "gpu_type", "empty GPU type");
        const long long n = count.value_or(1);
        total_gpus += n * *gpus;
        if (total_gpus > max_cluster_gpus)
          return input_error(
              path, s.line(count ? "count" : "gpus"), count ? "count" : "gpus",
              "the cluster would have more than " + std::to_string(max_cluster_gpus) + " GPUs");
        if (static_cast<long long>(servers.size()) + n > max_cluster_servers)
          return input_error(path, s.line("count"), "count",
                             "the cluster would have more than " +
                                 std::to_string(max_cluster_servers) + " servers");
        for (long long k = 0; k < n; ++k) {
          server sv;
          sv.gpu_type = t;
          sv.gpus = static_cast<int>(*gpus);
          sv.speed = speed.value_or(1.0);
          if (name) {
            sv.name = n == 1 ? *name : *name + "-" + std::to_string(k);
            if (!namer.claim(sv.name))
              return input_error(path, s.line("name"), "name",
                                 "duplicate server name " + detail::quoted(sv.name));
          } else {
            sv.name = namer.next(t);
            namer.claim(sv.name);
          }
          servers.push_back(std::move(sv));
        }
      }
    }
    if (servers.empty())
      return input_error(path, c.table_line(), "cluster",
                         "no servers; give 'shorthand' or [[cluster.server]] entries");
    return make_cluster(std::move(servers));
  } catch (const std::exception& e) {
    return error{error_kind::internal, path + ": " + e.what()};
  }
}

}  // namespace tessera
