#include "launcher/watch_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::cli {
namespace {

using nlohmann::json;

// The job states in the order the header lists them (actors/job_life.hpp, and `cancelling`
// from the API); others a newer server may add come after, by name.
const char* const state_order[] = {"queued",   "running", "preempted", "cancelling",
                                   "finished", "failed",  "cancelled"};

// ANSI colours (SGR parameters) of the states and of the node states.
const char* state_colour(std::string_view state) {
  if (state == "running" || state == "alive") return "32";                            // green
  if (state == "queued" || state == "preempted" || state == "waiting") return "33";   // yellow
  if (state == "failed" || state == "lost") return "31";                              // red
  if (state == "cancelling" || state == "cancelled" || state == "left") return "35";  // magenta
  if (state == "finished") return "36";                                               // cyan
  return "0";
}

std::string paint(const std::string& text, const char* sgr, bool use_color) {
  if (!use_color) return text;
  return "\x1b[" + std::string(sgr) + "m" + text + "\x1b[0m";
}

// A finite number field of an object, or `fallback` (absent, null, not a number, NaN).
double number(const json& obj, const char* key, double fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  const double v = it->get<double>();
  return std::isfinite(v) ? v : fallback;
}

// Text with the C0 and C1 control characters (ESC, CSI, newlines, ...) replaced by '?'.
std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(s[i + 1]) <= 0x9F;  // U+0080..U+009F
    if (c < 0x20 || c == 0x7F || c1) {
      out += '?';
      i += c1 ? 1 : 0;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A field shown as text: strings sanitized, numbers and booleans printed, else `fallback`.
std::string text(const json& obj, const char* key, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (it->is_string()) return sanitize(it->get<std::string>());
  if (it->is_number() || it->is_boolean()) return it->dump();
  return fallback;
}

// The array `doc[key]`, or `doc` itself when it is an array; empty otherwise.
const json& items(const json& doc, const char* key) {
  static const json empty = json::array();
  if (doc.is_array()) return doc;
  if (doc.is_object()) {
    const auto it = doc.find(key);
    if (it != doc.end() && it->is_array()) return *it;
  }
  return empty;
}

std::string printf_text(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// `s` cut to `width` display columns; escape sequences are kept whole, and a cut coloured
// text gets a reset so the colour does not run on.
std::string cut(std::string_view s, std::size_t width) {
  std::string out;
  std::size_t cols = 0;
  bool escaped = false, cut_short = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1B) {  // ESC [ parameters final-byte
      std::size_t end = i + 1;
      while (end < s.size() && !(s[end] >= 0x40 && s[end] <= 0x7E && end > i + 1)) ++end;
      out.append(s.substr(i, end + 1 - i));
      i = end;
      escaped = true;
      continue;
    }
    if ((c & 0xC0) != 0x80) {  // a code point starts here
      if (cols == width) {
        cut_short = true;
        break;
      }
      ++cols;
    }
    out += s[i];
  }
  if (cut_short && escaped) out += "\x1b[0m";
  return out;
}

// `s` padded with spaces (on the left when `right`) or cut to exactly `width` columns.
std::string fit(const std::string& s, std::size_t width, bool right = false) {
  const std::size_t w = display_width(s);
  if (w >= width) return cut(s, width);
  const std::string pad(width - w, ' ');
  return right ? pad + s : s + pad;
}

bool ended(std::string_view state) {
  return state == "finished" || state == "failed" || state == "cancelled";
}

// "1 queued, 2 running": the cluster's counts, or counted from the job list (older servers).
std::string job_counts(const json& cluster, const json& jobs, bool use_color) {
  std::map<std::string, long> counts;
  const auto it = cluster.is_object() ? cluster.find("jobs") : cluster.end();
  if (cluster.is_object() && it != cluster.end() && it->is_object()) {
    for (const auto& [state, n] : it->items()) {
      const double v = n.is_number() ? n.get<double>() : 0;
      if (std::isfinite(v) && v > 0)
        counts[sanitize(state)] += static_cast<long>(std::min(v, 1e15));
    }
  } else {
    for (const auto& j : jobs) ++counts[text(j, "state", "?")];
  }
  std::vector<std::string> order(std::begin(state_order), std::end(state_order));
  for (const auto& [state, n] : counts)
    if (std::find(order.begin(), order.end(), state) == order.end()) order.push_back(state);
  std::string out;
  for (const auto& state : order) {
    const auto c = counts.find(state);
    if (c == counts.end() || c->second <= 0) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(c->second) + " " +
           paint(state, state_colour(state), use_color);
  }
  return out.empty() ? "none" : out;
}

// The header: one line, or two (the cluster, then the jobs) when one does not fit `width`.
std::vector<std::string> header_lines(const json& cluster, const json& jobs, std::size_t width,
                                      bool use_color) {
  const double round = number(cluster, "round", -1);
  std::string head = paint("tessera", "1", use_color) + "  policy " + text(cluster, "policy", "?") +
                     "  round " + (round >= 0 ? printf_text("%.0f", round) : "-") + "  uptime " +
                     format_duration(number(cluster, "uptime", -1)) + "  nodes " +
                     text(cluster, "nodes_alive", "?") + "/" + text(cluster, "nodes", "?") +
                     " alive";
  std::string counts = "jobs: " + job_counts(cluster, jobs, use_color);
  if (cluster.is_object() && cluster.value("shutting_down", json(false)) == json(true))
    counts += "  " + paint("SHUTTING DOWN", "1;31", use_color);
  if (display_width(head) + 2 + display_width(counts) <= width) return {head + "  " + counts};
  return {head, counts};
}

// Column widths of the job table. The bar takes what the others leave of the width; the kind
// column gives up columns (down to 4) before the bar's inner part gets under 12.
struct job_columns {
  std::size_t id = 2, kind = 4, state = 10, bar = 8, steps = 5, rate = 7, eta = 6, loss = 8;
};

// "120/400"; "?" for a total that is not positive.
std::string steps_text(const json& j) {
  const double steps = number(j, "steps", 0), total = number(j, "total_steps", 0);
  return printf_text("%.0f", std::max(0.0, steps)) + "/" +
         (total > 0 ? printf_text("%.0f", total) : "?");
}

job_columns size_job_columns(const json& jobs, std::size_t width) {
  job_columns c;
  for (const auto& j : jobs) {
    c.id = std::max(c.id, std::min<std::size_t>(12, display_width(text(j, "id", "?"))));
    c.kind = std::max(c.kind, std::min<std::size_t>(16, display_width(text(j, "kind", "?"))));
    c.steps = std::max(c.steps, std::min<std::size_t>(23, display_width(steps_text(j))));
  }
  // every column but kind and the bar, and the 7 spaces between the 8 columns
  const std::size_t others = c.id + c.state + c.steps + c.rate + c.eta + c.loss + 7;
  const std::size_t want_bar = 12 + 7;  // "[" 12 inner "] " "100%"
  const std::size_t left = width > others ? width - others : 0;
  if (left < c.kind + want_bar)
    c.kind = std::max<std::size_t>(4, left > want_bar ? left - want_bar : 0);
  c.bar = std::clamp<std::size_t>(left > c.kind ? left - c.kind : 0, 8, 60);
  return c;
}

// One line of the job table; `state_sgr` colours the state cell.
std::string job_table_line(const job_columns& c, const std::vector<std::string>& cells,
                           const char* state_sgr, bool use_color) {
  return fit(cells[0], c.id, true) + " " + fit(cells[1], c.kind) + " " +
         paint(fit(cells[2], c.state), state_sgr, use_color) + " " + fit(cells[3], c.bar) + " " +
         fit(cells[4], c.steps, true) + " " + fit(cells[5], c.rate, true) + " " +
         fit(cells[6], c.eta, true) + " " + fit(cells[7], c.loss, true);
}

std::string job_row(const json& j, const job_columns& c, bool use_color, bool unicode) {
  const std::string state = text(j, "state", "?");
  const double steps = number(j, "steps", 0), total = number(j, "total_steps", 0);
  const double sps = number(j, "steps_per_second", -1);
  const double loss = number(j, "loss", std::numeric_limits<double>::quiet_NaN());
  // A job without steps has no loss yet (the API reports 0 until its first round).
  const std::string loss_text = std::isnan(loss) || steps <= 0 ? "-" : printf_text("%.4g", loss);
  return job_table_line(c,
                        {text(j, "id", "?"), text(j, "kind", "?"), state,
                         progress_bar(steps, total, static_cast<int>(c.bar), unicode),
                         steps_text(j), sps >= 0 ? printf_text("%.1f", sps) : "-",
                         ended(state) ? "-" : format_eta(steps, total, sps), loss_text},
                        state_colour(state), use_color);
}

// "job 3 x2, job 5 x2 (copy 1)" and the GPUs left idle on an alive node.
std::string assignment_text(const json& node) {
  std::string out;
  double used = 0;
  for (const auto& a : items(node, "assignment")) {
    const double copy = number(a, "copy", 0), gpus = number(a, "gpus", 0);
    used += std::max(0.0, gpus);
    out += (out.empty() ? "" : ", ") + std::string("job ") + text(a, "job", "?") + " x" +
           text(a, "gpus", "?") + (copy > 0 ? " (copy " + text(a, "copy", "?") + ")" : "");
  }
  const double idle = number(node, "gpus", 0) - used;
  if (text(node, "state", "alive") == "alive" && idle > 0)
    out += (out.empty() ? "" : ", ") + printf_text("%.0f idle", idle);
  return out.empty() ? "-" : out;
}

std::string node_row(const json& node, bool use_color) {
  const std::string state = text(node, "state", "?");
  return fit(text(node, "rank", "?"), 4, true) + " " + fit(text(node, "name", "?"), 10) + " " +
         fit(text(node, "gpu_type", "?") + " x" + text(node, "gpus", "?"), 10) + " " +
         paint(fit(state, 8), state_colour(state), use_color) + " " + assignment_text(node);
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t cols = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {  // skip to the sequence's final byte
      ++i;
      while (i + 1 < text.size() && !(text[i + 1] >= 0x40 && text[i + 1] <= 0x7E)) ++i;
      ++i;
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++cols;
  }
  return cols;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  const double s = std::round(seconds);
  if (s >= 1000.0 * 86400) return ">999d";
  const auto whole = static_cast<long long>(s);
  char buf[32];
  if (whole < 60)
    std::snprintf(buf, sizeof buf, "%llds", whole);
  else if (whole < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", whole / 60, whole % 60);
  else if (whole < 86400)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", whole / 3600, whole / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", whole / 86400, whole / 3600 % 24);
  return buf;
}

std::string format_eta(double steps, double total, double steps_per_second) {
  if (!std::isfinite(total) || !(total > 0) || !std::isfinite(steps_per_second) ||
      !(steps_per_second > 0))
    return "-";
  const double done = std::isfinite(steps) ? std::clamp(steps, 0.0, total) : 0.0;
  return format_duration((total - done) / steps_per_second);
}

std::string progress_bar(double steps, double total, int width, bool unicode) {
  if (width <= 0) return "";
  const bool known = std::isfinite(total) && total > 0;
  const double frac = known && std::isfinite(steps) ? std::clamp(steps / total, 0.0, 1.0) : 0.0;
  const std::string pct = known ? printf_text("%3.0f%%", std::floor(frac * 100)) : "   -";
  const auto w = static_cast<std::size_t>(width);
  if (w < 8) return fit(pct, w, true);
  const std::size_t inner = w - 7;  // "[" inner "] " pct(4)
  std::string bar = "[";
  if (unicode) {
    static const char* const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const auto parts = static_cast<std::size_t>(std::floor(frac * static_cast<double>(inner * 8)));
    for (std::size_t i = 0; i < parts / 8; ++i) bar += "█";
    bar += eighths[parts % 8];
    bar += std::string(inner - parts / 8 - (parts % 8 ? 1 : 0), ' ');
  } else {
    const auto filled = static_cast<std::size_t>(std::floor(frac * static_cast<double>(inner)));
    bar += std::string(filled, '#') + std::string(inner - filled, '.');
  }
  return bar + "] " + pct;
}

std::string render_watch(const json& cluster, const json& jobs_doc, const json& nodes_doc,
                         int width, bool use_color, bool unicode) {
  const std::size_t w = width > 0 ? static_cast<std::size_t>(width) : 80;
  const json& jobs = items(jobs_doc, "jobs");
  const json& nodes = items(nodes_doc, "nodes");
  std::vector<std::string> lines = header_lines(cluster, jobs, w, use_color);
  lines.push_back("");
  const job_columns c = size_job_columns(jobs, w);
  lines.push_back(paint(
      job_table_line(c, {"ID", "KIND", "STATE", "PROGRESS", "STEPS", "STEPS/S", "ETA", "LOSS"}, "0",
                     false),
      "1", use_color));
  for (const auto& j : jobs) lines.push_back(job_row(j, c, use_color, unicode));
  if (jobs.empty()) lines.push_back("  (no jobs)");
  lines.push_back("");
  lines.push_back(paint(fit("RANK", 4, true) + " " + fit("NAME", 10) + " " + fit("GPUS", 10) + " " +
                            fit("STATE", 8) + " ASSIGNMENT",
                        "1", use_color));
  for (const auto& n : nodes) lines.push_back(node_row(n, use_color));
  if (nodes.empty()) lines.push_back("  (no nodes)");
  std::string screen;
  for (const auto& line : lines) screen += cut(line, w) + "\n";
  return screen;
}

}  // namespace tessera::cli
