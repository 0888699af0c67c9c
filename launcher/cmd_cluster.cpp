/// @file cmd_cluster.cpp
/// `tessera cluster from-slurm`: the cluster file of the Slurm allocation this runs in
/// (runtime/core/slurm_cluster.hpp), printed or written for the operator to keep.

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/core/slurm_cluster.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// What `scontrol show job -d JOB` prints, or "" when it cannot be run.
std::string scontrol_job(const std::string& job_id) {
  std::string cmd = "scontrol show job -d '" + job_id + "' 2>/dev/null";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string text;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  return ::pclose(p) == 0 ? text : "";
}

}  // namespace

int cmd_cluster(const std::vector<std::string>& args) {
  const char* usage =
      "usage: tessera cluster from-slurm [--output FILE] [--gpu-type T] [--gpus N] [--add N:T:G]\n"
      "Inside a Slurm allocation (sbatch, salloc), writes the cluster file of the nodes Slurm\n"
      "granted: one server per node of SLURM_JOB_NODELIST, named as Slurm names it, with the\n"
      "GPUs of its grant (the GRES lines of `scontrol show job -d`, e.g. gpu:a100:4) and a\n"
      "speed from the throughput table relative to --reference-type. --gpu-type and --gpus\n"
      "fill in what the grant does not say; --add lists servers a second allocation's nodes\n"
      "may join as. The file is checked as `tessera run` reads it.";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage << "\n";
    return args.empty() ? exit_code::bad_input : exit_code::ok;
  }
  if (args[0] != "from-slurm") {
    std::cerr << "tessera cluster: unknown sub-command '" << args[0] << "'\n" << usage << "\n";
    return exit_code::bad_input;
  }
  std::string out = "-", table_file, scontrol_file, reference;
  std::vector<std::string> spares;
  slurm_defaults defaults;
  po::options_description d("tessera cluster from-slurm options");
  d.add_options()("output,o", po::value(&out), "cluster file to write (default: stdout)")(
      "gpu-type", po::value(&defaults.gpu_type), "GPU type of nodes whose grant names none")(
      "gpus", po::value(&defaults.gpus), "GPUs of nodes Slurm granted none (a CPU partition)")(
      "reference-type", po::value(&reference)->default_value("v100"), "GPU type of speed 1")(
      "throughputs", po::value(&table_file), "throughput table (default: bundled)")(
      "add", po::value(&spares)->composing(),
      "NAME:TYPE:GPUS: a server outside the allocation, for a node that joins later (tessera "
      "node --join); repeatable")(
      "scontrol", po::value(&scontrol_file),
      "read `scontrol show job -d` output from this file instead of running it")("help,h",
                                                                                 "show this help");
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end()))
                  .options(d)
                  .run(),
              vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << d << '\n';
      return exit_code::ok;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "tessera: " << e.what() << "\n(see tessera cluster --help)\n";
    return exit_code::bad_input;
  }
  auto table = load_table_arg(table_file);
  if (!table) return report(table.err());
  std::string scontrol;
  if (!scontrol_file.empty()) {
    std::ifstream f(scontrol_file);
    if (!f) return report(error{error_kind::io, scontrol_file + ": cannot read"});
    std::ostringstream s;
    s << f.rdbuf();
    scontrol = s.str();
  } else if (auto id = env_value("SLURM_JOB_ID")) {
    scontrol = scontrol_job(*id);
  }
  auto alloc = read_slurm_allocation(env_value, scontrol, defaults);
  if (!alloc) return report(alloc.err());
  for (const auto& spec : spares)
    if (auto st = add_spare(*alloc, spec); !st) return report(st.err());
  const std::string text = slurm_cluster_toml(*alloc, *table, reference);
  if (out == "-") {
    std::cout << text;
    return exit_code::ok;
  }
  std::ofstream f(out);
  f << text;
  f.close();
  if (!f) return report(error{error_kind::io, out + ": write failed"});
  if (auto back = load_cluster(out); !back) return report(back.err());  // as run reads it
  std::cerr << "tessera: wrote " << out << " (" << alloc->nodes.size() << " servers)\n";
  return exit_code::ok;
}

}  // namespace tessera::cli
