#include "runtime/node/gpu/devices.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "runtime/core/detail/text.hpp"

namespace tessera::gpu {

namespace {

/// Model-name token -> the cluster file's GPU type. Most tokens are the type itself; variants
/// of one chip map to its type (v100s -> v100).
const std::map<std::string, std::string>& type_table() {
  static const std::map<std::string, std::string> table{
      {"k40", "k40"},     {"k80", "k80"},   {"m60", "m60"},     {"p4", "p4"},     {"p40", "p40"},
      {"p100", "p100"},   {"v100", "v100"}, {"v100s", "v100"},  {"t4", "t4"},     {"a10", "a10"},
      {"a10g", "a10g"},   {"a30", "a30"},   {"a40", "a40"},     {"a100", "a100"}, {"a800", "a800"},
      {"a6000", "a6000"}, {"l4", "l4"},     {"l40", "l40"},     {"l40s", "l40s"}, {"h100", "h100"},
      {"h800", "h800"},   {"h200", "h200"}, {"gh200", "gh200"}, {"b100", "b100"}, {"b200", "b200"},
      {"gb200", "gb200"},
  };
  return table;
}

/// The model name's lower-case tokens (runs of letters and digits).
std::vector<std::string> tokens(const std::string& model) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : model) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

/// "1 GPU" / "4 GPUs".
std::string gpus_text(std::size_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

/// ":" and one line per device; "" for none.
std::string found_text(const std::vector<device_info>& found) {
  if (found.empty()) return "";
  std::string s = ":";
  for (const auto& d : found) s += "\n  " + describe(d);
  return s;
}

}  // namespace

std::optional<std::string> type_of_model(const std::string& model) {
  const auto& table = type_table();
  for (const auto& t : tokens(model))
    if (auto it = table.find(t); it != table.end()) return it->second;
  return std::nullopt;
}

std::string known_types() {
  std::vector<std::string> types;
  for (const auto& [token, type] : type_table()) types.push_back(type);
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  std::string s;
  for (const auto& t : types) s += (s.empty() ? "" : ", ") + t;
  return s;
}

bool is_of_type(const device_info& d, const std::string& type) {
  if (const auto t = type_of_model(d.name)) return *t == type;
  const auto toks = tokens(d.name);
  return std::find(toks.begin(), toks.end(), type) != toks.end();
}

std::string describe(const device_info& d) {
  std::string s = std::to_string(d.index) + ": " + d.name + " (";
  if (d.memory_bytes > 0) {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB, ",
                  static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
    s += mem;
  }
  const auto t = type_of_model(d.name);
  return s + (t ? "type " + *t : std::string("not in the GPU type table")) + ")";
}

status check_devices(const server& srv, const std::vector<device_info>& found,
                     const std::string& where) {
  const bool count_ok = static_cast<int>(found.size()) == srv.gpus;
  bool type_ok = true;
  for (const auto& d : found) type_ok = type_ok && is_of_type(d, srv.gpu_type);
  if (count_ok && type_ok) return {};
  std::string what = "server '" + srv.name + "' declares " + gpus_text(srv.gpus) + " of type " +
                     srv.gpu_type + ", but its node found " + gpus_text(found.size()) +
                     (type_ok ? "" : ", not all of type " + srv.gpu_type) + found_text(found) +
                     "\n(known types: " + known_types() +
                     "; TESSERA_GPU_DISCOVERY=off runs the node on its declared GPUs, "
                     "throttled)";
  return input_error(where, 0, count_ok ? "gpu_type" : "gpus", what);
}

result<std::vector<std::vector<int>>> assign_devices(const std::vector<std::int32_t>& want,
                                                     int gpus) {
  return assign_devices(want, std::vector<int>(want.size(), -1), gpus);
}

namespace {

/// Why `partner` does not pair copies consistently, or "" when it does.
std::string pairing_error(const std::vector<std::int32_t>& want, const std::vector<int>& partner) {
  const int n = static_cast<int>(want.size());
  if (static_cast<int>(partner.size()) != n) return "the partner list does not match the copies";
  for (int i = 0; i < n; ++i) {
    const int p = partner[static_cast<std::size_t>(i)];
    if (p < 0) continue;
    const std::string who = "copy " + std::to_string(i) + " of the round";
    if (p >= n || p == i) return who + " names partner " + std::to_string(p);
    if (partner[static_cast<std::size_t>(p)] != i)
      return who + " names copy " + std::to_string(p) + ", which does not name it back";
    if (want[static_cast<std::size_t>(p)] != want[static_cast<std::size_t>(i)])
      return who + " and its partner ask for different GPU counts";
  }
  return "";
}

}  // namespace

result<std::vector<std::vector<int>>> assign_devices(const std::vector<std::int32_t>& want,
                                                     const std::vector<int>& partner, int gpus) {
  long long total = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] < 0)
      return error{error_kind::internal, "copy " + std::to_string(i) + " of the round asks for " +
                                             std::to_string(want[i]) + " GPUs"};
  }
  if (const auto why = pairing_error(want, partner); !why.empty())
    return error{error_kind::internal, why};
  for (std::size_t i = 0; i < want.size(); ++i)
    if (partner[i] < 0 || static_cast<std::size_t>(partner[i]) > i) total += want[i];
  if (total > gpus)
    return error{error_kind::internal, "the round asks this node for " + std::to_string(total) +
                                           " GPUs (" + std::to_string(want.size()) +
                                           " copies), it has " + std::to_string(gpus)};
  std::vector<std::vector<int>> out;
  out.reserve(want.size());
  int next = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (partner[i] >= 0 && static_cast<std::size_t>(partner[i]) < i) {
      out.push_back(out[static_cast<std::size_t>(partner[i])]);  // the pair's first copy's
      continue;
    }
    std::vector<int> mine(static_cast<std::size_t>(want[i]));
    for (auto& d : mine) d = next++;
    out.push_back(std::move(mine));
  }
  return out;
}

std::string visible_devices(const std::vector<int>& indices, const std::string& node_visible) {
  std::vector<std::string> listed;
  if (!detail::trim(node_visible).empty())
    for (const auto f : detail::split(node_visible, ',')) listed.emplace_back(detail::trim(f));
  std::string s;
  for (const int i : indices) {
    const bool mapped = i >= 0 && static_cast<std::size_t>(i) < listed.size();
    s +=
        (s.empty() ? "" : ",") + (mapped ? listed[static_cast<std::size_t>(i)] : std::to_string(i));
  }
  return s;
}

}  // namespace tessera::gpu
