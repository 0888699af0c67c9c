/// @file cmd_trace_import.cpp
/// `tessera trace import FORMAT FILE -o OUT`: a production-derived trace (Helios, Philly, PAI, Sia)
/// in tessera's trace format, by the rule of runtime/workload/trace_import.hpp.

#include <fstream>
#include <iostream>
#include <optional>

#include <boost/program_options.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "runtime/workload/trace.hpp"
#include "runtime/workload/sia_workload.hpp"
#include "runtime/workload/trace_import.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// "read 120 jobs, kept 97; dropped: 20 state FAILED, 3 no GPU".
void print_summary(const import_summary& s, const std::string& out) {
  std::cerr << "tessera: read " << s.read << " jobs, wrote " << s.kept << " to " << out;
  if (!s.dropped.empty()) {
    std::cerr << "; dropped:";
    const char* sep = " ";
    for (const auto& [why, n] : s.dropped) {
      std::cerr << sep << n << ' ' << why;
      sep = ", ";
    }
  }
  std::cerr << '\n';
}

}  // namespace

int cmd_trace_import(const std::vector<std::string>& args) {
  const char* usage =
      "usage: tessera trace import FORMAT FILE --output OUT [--seed S]\n"
      "       tessera trace import pai pai_job_table.csv --tasks pai_task_table.csv --output OUT\n"
      "       tessera trace import sia workload-1.csv --sia-dir SIA/sia-simulator --output OUT\n"
      "FORMAT: helios (cluster_log.csv), philly (cluster_job_log) or pai (Alibaba PAI 2020's\n"
      "job table, with its task table); sia reads Sia's and Pollux's workload CSVs, each job\n"
      "keeping its GPU count and batch size, its steps from Sia's measurements (docs/traces.md,\n"
      "\"Sia's workloads\"). For the others, each job that ran to its end becomes one line of a\n"
      "Gavel-format trace: arrival from its submit time, its GPUs as the scale factor (rounded\n"
      "up to one the throughput table knows), a job type drawn among the templates, steps =\n"
      "its run time x that type's throughput on the reference GPU type (docs/traces.md,\n"
      "\"Imported traces\"). Prints what it dropped and why.";
  std::string format, file, out, table_file, templates_file, tasks_file, sia_dir;
  import_options opt;
  po::options_description d("tessera trace import options");
  d.add_options()("output,o", po::value(&out)->required(), "trace file to write")(
      "seed,s", po::value(&opt.seed)->default_value(0), "seed of the job-type draw")(
      "tasks", po::value(&tasks_file), "pai: the task table (pai_task_table.csv)")(
      "sia-dir", po::value(&sia_dir), "sia: a checkout's sia-simulator folder (or its traces)")(
      "reference-type", po::value(&opt.reference_type)->default_value("v100"),
      "GPU type whose throughput turns a job's run time into steps")(
      "throughputs", po::value(&table_file), "throughput table (default: bundled)")(
      "templates", po::value(&templates_file), "job templates TSV (default: bundled)")(
      "help,h", "show this help");
  po::options_description hidden;
  hidden.add_options()("format", po::value(&format)->required(), "")(
      "file", po::value(&file)->required(), "");
  po::positional_options_description pos;
  pos.add("format", 1).add("file", 1);
  po::options_description all;
  all.add(d).add(hidden);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << d << '\n';
      return exit_code::ok;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "tessera: " << e.what() << "\n(see tessera trace import --help)\n";
    return exit_code::bad_input;
  }
  auto fmt = parse_trace_format(format);
  if (!fmt) return report(fmt.err());
  std::optional<sia_data> sia;
  if (*fmt == trace_format::sia) {  // its steps come from Sia's measurements
    if (sia_dir.empty()) {
      std::cerr << "tessera: sia needs --sia-dir (a checkout's sia-simulator folder)\n";
      return exit_code::bad_input;
    }
    auto data = sia_data::load(sia_dir, {});
    if (!data) return report(data.err());
    sia.emplace(std::move(*data));
    opt.sia = &*sia;
  }
  auto table = load_table_arg(table_file);
  if (!table) return report(table.err());
  auto templates =
      templates_file.empty() ? bundled_job_templates() : read_job_templates(templates_file);
  if (!templates) return report(templates.err());
  std::ifstream in(file, std::ios::binary);
  if (!in) return report(error{error_kind::io, file + ": cannot open"});
  std::ifstream tasks;
  if (!tasks_file.empty()) {
    tasks.open(tasks_file, std::ios::binary);
    if (!tasks) return report(error{error_kind::io, tasks_file + ": cannot open"});
    opt.tasks = &tasks;
    opt.tasks_name = tasks_file;
  }
  import_summary summary;
  auto jobs = import_trace(*fmt, in, file, *templates, *table, opt, summary);
  if (!jobs) return report(jobs.err());
  if (auto st = tessera::write_trace_file(out, *jobs); !st) return report(st.err());
  print_summary(summary, out);
  return exit_code::ok;
}

}  // namespace tessera::cli
