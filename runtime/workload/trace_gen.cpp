#include "runtime/workload/trace_gen.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <set>

#include "runtime/core/detail/input_file.hpp"
#include "runtime/core/detail/text.hpp"
#include "runtime/core/input_limits.hpp"

namespace tessera {

namespace {

/// Field names of a template line, as error messages name them.
constexpr const char* template_fields[] = {"job_type", "command", "working_dir", "num_steps_arg",
                                           "needs_data_dir"};
constexpr std::size_t n_template_fields = std::size(template_fields);

/// Draws from a seeded 64-bit Mersenne Twister through fixed formulas rather than the
/// standard distributions, whose output differs between standard libraries: a trace is then
/// the same for a seed on every platform.
class draws {
 public:
  explicit draws(std::uint64_t seed) : g_(seed) {}

  /// Uniform in [0, 1), 53 random bits.
  double unit() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * unit(); }
  /// Uniform index in [0, n).
  std::size_t index(std::size_t n) {
    return std::min(n - 1, static_cast<std::size_t>(unit() * static_cast<double>(n)));
  }
  /// Exponential with the given mean (inverse CDF; 1 - unit() is in (0, 1]).
  double exponential(double mean) { return -mean * std::log(1.0 - unit()); }

 private:
  std::mt19937_64 g_;
};

/// Gavel's duration mix: 60 * 10^U(1.5, 3) s with probability 0.8, else 60 * 10^U(3, 4) s.
double draw_duration(draws& d) {
  const bool short_job = d.unit() < 0.8;
  const double exponent = short_job ? d.uniform(1.5, 3.0) : d.uniform(3.0, 4.0);
  return 60.0 * std::pow(10.0, exponent);
}

/// Gavel's multi-GPU scale factors: 1/2/4/8 with p = .70/.10/.15/.05.
int draw_scale(draws& d) {
  const double r = d.unit();
  if (r < 0.70) return 1;
  if (r < 0.80) return 2;
  if (r < 0.95) return 4;
  return 8;
}

}  // namespace

result<std::vector<job_template>> read_job_templates(const std::string& path) {
  auto in = detail::open_input(path, limits::templates_file);
  if (!in) return in.err();
  std::vector<job_template> out;
  std::set<std::string> seen;
  detail::line_reader lines(*in, path, limits::templates_file);
  std::string_view line;
  while (lines.next(line)) {
    const int line_no = lines.line_no();
    const auto t = detail::trim(line);
    if (t.empty() || t.front() == '#') continue;
    const auto f = detail::split(line, '\t');
    if (f.size() != n_template_fields) {
      const std::string count = "(found " + std::to_string(f.size()) +
                                " tab-separated fields, expected " +
                                std::to_string(n_template_fields) + ")";
      if (f.size() < n_template_fields)
        return input_error(path, line_no, template_fields[f.size()], "missing " + count);
      return input_error(path, line_no, template_fields[n_template_fields - 1],
                         "unexpected text after it " + count);
    }
    job_template jt;
    jt.job_type = std::string(f[0]);
    if (detail::trim(jt.job_type).empty())
      return input_error(path, line_no, "job_type", "empty job type");
    if (!seen.insert(jt.job_type).second)
      return input_error(path, line_no, "job_type",
                         "duplicate job type " + detail::quoted(jt.job_type));
    jt.command = std::string(f[1]);
    jt.working_dir = std::string(f[2]);
    jt.num_steps_arg = std::string(f[3]);
    const auto dd = detail::trim(f[4]);
    if (dd != "0" && dd != "1")
      return input_error(path, line_no, "needs_data_dir",
                         "expected 0 or 1, got " + detail::quoted(f[4]));
    jt.needs_data_dir = dd == "1";
    out.push_back(std::move(jt));
  }
  if (lines.err()) return *lines.err();
  if (out.empty()) return input_error(path, 0, "", "no job templates");
  return out;
}

result<std::vector<job_template>> bundled_job_templates() {
  return read_job_templates(TESSERA_DATA_DIR "/job_templates.tsv");
}

trace_gen_config hops_trace_config(std::uint64_t seed) {
  trace_gen_config cfg;
  cfg.num_jobs = 500;
  cfg.rate_per_hour = 100;
  cfg.multi_gpu = true;
  cfg.seed = seed;
  return cfg;
}

status check_trace_gen_config(const trace_gen_config& cfg) {
  if (cfg.num_jobs <= 0 || cfg.num_jobs > limits::max_trace_jobs)
    return error{error_kind::invalid_input, "trace generator: num_jobs must be in [1, " +
                                                std::to_string(limits::max_trace_jobs) + "], got " +
                                                std::to_string(cfg.num_jobs)};
  if (!(cfg.rate_per_hour >= 0 && cfg.rate_per_hour <= limits::max_rate_per_hour))
    return error{error_kind::invalid_input, "trace generator: rate_per_hour must be in [0, " +
                                                detail::format_count(limits::max_rate_per_hour) +
                                                "], got " +
                                                detail::format_shortest(cfg.rate_per_hour)};
  return {};
}

namespace {

/// Every template needs a usable scale-1 throughput on the reference type: scale 1 is the
/// fallback that ends the scale factor's redraw loop.
status check_templates(const std::vector<job_template>& templates, const std::string& ref,
                       const throughput_table& table) {
  if (templates.empty())
    return error{error_kind::invalid_input, "trace generator: no job templates"};
  for (const auto& t : templates) {
    const auto tput = table.isolated(ref, job_key{t.job_type, 1});
    if (!tput || !(*tput > 0))
      return error{error_kind::not_found,
                   "trace generator: job type " + detail::quoted(t.job_type) +
                       " has no positive isolated throughput on '" + ref + "' at scale 1"};
  }
  return {};
}

/// Job `i` of a generated trace arriving at `clock` from template `t`.
job make_generated_job(int i, const job_template& t, int scale, double steps, double clock) {
  job j;
  j.id = i;
  j.job_type = t.job_type;
  j.scale_factor = scale;
  j.total_steps = steps;
  // Whole microseconds, so the trace file's 6 decimals hold the exact value.
  j.arrival = std::round(clock * 1e6) / 1e6;
  j.priority_weight = 1;
  j.slo = -1;
  j.command = t.command;
  j.working_dir = t.working_dir;
  j.num_steps_arg = t.num_steps_arg;
  j.needs_data_dir = t.needs_data_dir;
  return j;
}

}  // namespace

status generate_trace(const trace_gen_config& cfg, const std::vector<job_template>& templates,
                      const throughput_table& table, const job_sink& sink) {
  if (auto st = check_trace_gen_config(cfg); !st) return st;
  const std::string ref = detail::to_lower(cfg.reference_type);
  if (auto st = check_templates(templates, ref, table); !st) return st;

  // Per job, in this order: inter-arrival gap (jobs after the first, when rate > 0), template,
  // duration (2 draws), and, for multi-GPU traces, scale factor (redrawn until the table has
  // a positive throughput for it).
  draws d(cfg.seed);
  const bool poisson = cfg.rate_per_hour > 0;
  const double mean_gap = poisson ? 3600.0 / cfg.rate_per_hour : 0.0;
  double clock = 0.0;
  for (int i = 0; i < cfg.num_jobs; ++i) {
    if (poisson && i > 0) clock += d.exponential(mean_gap);
    const auto& t = templates[d.index(templates.size())];
    const double duration = draw_duration(d);
    int scale = 1;
    double tput = *table.isolated(ref, job_key{t.job_type, 1});
    if (cfg.multi_gpu) {
      for (;;) {
        scale = draw_scale(d);
        const auto v = table.isolated(ref, job_key{t.job_type, scale});
        if (v && *v > 0) {
          tput = *v;
          break;
        }
      }
    }
    if (clock > limits::max_seconds)
      return error{error_kind::invalid_input,
                   "trace generator: job " + std::to_string(i) + " would arrive after " +
                       detail::format_count(limits::max_seconds) +
                       " s, the latest arrival a trace holds; raise the rate or generate "
                       "fewer jobs"};
    const double steps = std::max(1.0, std::round(duration * tput));
    if (auto st = sink(make_generated_job(i, t, scale, steps, clock)); !st) return st;
  }
  return {};
}

result<std::vector<job>> generate_trace(const trace_gen_config& cfg,
                                        const std::vector<job_template>& templates,
                                        const throughput_table& table) {
  std::vector<job> jobs;
  auto st = generate_trace(cfg, templates, table, [&jobs](const job& j) -> status {
    jobs.push_back(j);
    return {};
  });
  if (!st) return st.err();
  return jobs;
}

}  // namespace tessera
