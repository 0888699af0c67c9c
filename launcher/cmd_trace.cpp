/// @file cmd_trace.cpp
/// `tessera trace generate`: Gavel's synthetic trace recipe.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include <boost/program_options.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "launcher/trace_out.hpp"
#include "runtime/core/input_limits.hpp"
#include "runtime/workload/trace.hpp"
#include "runtime/workload/trace_gen.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// Checks --jobs and --rate (bounds: runtime/core/input_limits.hpp, shared with the trace reader).
status check_numbers(const trace_gen_config& cfg) {
  if (auto st = check_option("--jobs", cfg.num_jobs, 1, static_cast<double>(limits::max_trace_jobs),
                             "jobs");
      !st)
    return st;
  return check_option("--rate", cfg.rate_per_hour, 0, limits::max_rate_per_hour,
                      "jobs per hour; 0 = all at time 0");
}

}  // namespace

status write_generated_trace(const trace_gen_config& cfg,
                             const std::vector<job_template>& templates,
                             const throughput_table& table, std::ostream& os,
                             const std::string& name) {
  std::int64_t n = 0;
  auto st = generate_trace(cfg, templates, table, [&](const job& j) -> status {
    if (auto ok = check_trace_job(j, name + ": job " + std::to_string(n++)); !ok) return ok;
    write_trace_job(os, j);
    if (!os) return error{error_kind::io, name + ": write failed"};
    return {};
  });
  if (!st) return st;
  os.flush();
  if (!os) return error{error_kind::io, name + ": write failed"};
  return {};
}

status write_trace_file(const trace_gen_config& cfg, const std::vector<job_template>& templates,
                        const throughput_table& table, const std::string& path) {
  const std::string tmp = path + ".part";
  std::ofstream file(tmp, std::ios::trunc);
  if (!file) return error{error_kind::io, tmp + ": cannot open for writing"};
  auto st = write_generated_trace(cfg, templates, table, file, path);
  file.close();
  std::error_code ec;
  if (st && !file) st = error{error_kind::io, path + ": write failed"};
  if (st) std::filesystem::rename(tmp, path, ec);
  if (st && ec) st = error{error_kind::io, path + ": " + ec.message()};
  if (!st) std::filesystem::remove(tmp, ec);
  return st;
}

int cmd_trace(const std::vector<std::string>& args) {
  const char* usage =
      "usage: tessera trace generate --jobs N --rate R [--multi-gpu] [--seed S] --output FILE\n"
      "       tessera trace generate --preset hops [--seed S] --output FILE\n"
      "       tessera trace import FORMAT FILE --output FILE  (helios, philly, pai, sia; see "
      "--help)\n"
      "Writes a trace with Gavel's recipe: Poisson arrivals at R jobs/hour (R = 0 puts every\n"
      "job at time 0), job types uniform over the 26 templates, durations 60*10^U(1.5,3) s\n"
      "(p = 0.8) else 60*10^U(3,4) s, steps = duration x V100 throughput. --preset hops is\n"
      "Hops' setting: 500 jobs at 100 jobs/hour, multi-GPU (--jobs/--rate override it).";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage << "\n";
    return args.empty() ? exit_code::bad_input : exit_code::ok;
  }
  if (args[0] == "import") return cmd_trace_import({args.begin() + 1, args.end()});
  if (args[0] != "generate") {
    std::cerr << "tessera trace: unknown sub-command '" << args[0] << "'\n" << usage << "\n";
    return exit_code::bad_input;
  }
  trace_gen_config cfg;
  std::string out, table_file, templates_file, preset;
  po::options_description d("tessera trace generate options");
  d.add_options()("jobs,n", po::value(&cfg.num_jobs), "number of jobs (1 to 10 000 000)")(
      "rate,r", po::value(&cfg.rate_per_hour),
      "Poisson arrival rate in jobs/hour (0 = all at time 0)")(
      "preset", po::value(&preset),
      "'hops': 500 jobs, 100 jobs/hour, multi-GPU (Hops' simulation setting)")(
      "multi-gpu", po::bool_switch(&cfg.multi_gpu),
      "draw scale factors 1/2/4/8 with p = .70/.10/.15/.05")(
      "seed,s", po::value(&cfg.seed)->default_value(0), "random seed")(
      "output,o", po::value(&out)->required(), "trace file to write ('-' = stdout)")(
      "throughputs", po::value(&table_file), "throughput table (default: bundled)")(
      "templates", po::value(&templates_file), "job templates TSV (default: bundled)")(
      "help,h", "show this help");
  po::variables_map vm;
  try {
    std::vector<std::string> rest(args.begin() + 1, args.end());
    po::store(po::command_line_parser(rest).options(d).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << d << '\n';
      return exit_code::ok;
    }
    po::notify(vm);
    if (!preset.empty()) {
      if (preset != "hops") {
        std::cerr << "tessera: --preset: unknown preset '" << preset << "' (valid: hops)\n";
        return exit_code::bad_input;
      }
      const auto h = hops_trace_config(cfg.seed);
      if (!vm.count("jobs")) cfg.num_jobs = h.num_jobs;
      if (!vm.count("rate")) cfg.rate_per_hour = h.rate_per_hour;
      cfg.multi_gpu = cfg.multi_gpu || h.multi_gpu;
    } else {
      if (!vm.count("jobs")) throw po::required_option("--jobs");
      if (!vm.count("rate")) throw po::required_option("--rate");
    }
  } catch (const po::error& e) {
    std::cerr << "tessera: " << e.what() << "\n(see tessera trace generate --help)\n";
    return exit_code::bad_input;
  }
  if (auto st = check_numbers(cfg); !st) return report(st.err());
  auto table = load_table_arg(table_file);
  if (!table) return report(table.err());
  auto templates =
      templates_file.empty() ? bundled_job_templates() : read_job_templates(templates_file);
  if (!templates) return report(templates.err());
  if (out == "-") {
    auto st = write_generated_trace(cfg, *templates, *table, std::cout, "stdout");
    return st ? exit_code::ok : report(st.err());
  }
  std::ofstream file(out, std::ios::trunc);
  if (!file) return report(error{error_kind::io, out + ": cannot open for writing"});
  if (auto st = write_generated_trace(cfg, *templates, *table, file, out); !st) {
    file.close();
    std::error_code ec;  // no half-written trace left behind (but never a device or pipe)
    if (std::filesystem::is_regular_file(out, ec)) std::filesystem::remove(out, ec);
    return report(st.err());
  }
  std::cerr << "tessera: wrote " << cfg.num_jobs << " jobs to " << out << '\n';
  return exit_code::ok;
}

}  // namespace tessera::cli
