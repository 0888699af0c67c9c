/// @file cmd_table.cpp
/// `tessera table import sia`: a throughput table from Sia's measurements for the jobs of Sia
/// workloads on a cluster's GPU types (runtime/workload/sia_workload.hpp).

#include <fstream>
#include <iostream>
#include <map>

#include <boost/program_options.hpp>

#include "launcher/commands.hpp"
#include "launcher/common.hpp"
#include "runtime/workload/sia_workload.hpp"

namespace po = boost::program_options;

namespace tessera::cli {

namespace {

/// The Sia kind of each GPU type of Sia's cluster (its simulator_config.py's comments: "aws"
/// is a 4 x T4 instance, "dgx-ext" a DGX A100, "rtx" 8 x RTX 2080Ti; "azure" 8 x V100,
/// "quad" 4 x Quadro RTX 6000).
const std::map<std::string, std::string>& default_kinds() {
  static const std::map<std::string, std::string> k = {{"t4", "aws"},
                                                       {"a100", "dgx-ext"},
                                                       {"rtx2080ti", "rtx"},
                                                       {"v100", "azure"},
                                                       {"rtx6000", "quad"}};
  return k;
}

/// Each GPU type of `cl` with its Sia kind and GPUs per server; an error for a type with no
/// kind or servers of different sizes.
result<std::vector<sia_gpu_kind>> gpu_kinds(const cluster& cl,
                                            std::map<std::string, std::string> kinds) {
  std::vector<sia_gpu_kind> out;
  for (const auto& t : cl.types) {
    const auto k = kinds.find(t.name);
    if (k == kinds.end())
      return error{error_kind::invalid_input,
                   "GPU type '" + t.name + "' has no Sia kind (give --kind " + t.name + "=KIND)"};
    int per_server = 0;
    for (const auto& s : cl.servers) {
      if (s.gpu_type != t.name) continue;
      if (per_server != 0 && s.gpus != per_server)
        return error{error_kind::invalid_input, "GPU type '" + t.name +
                                                    "': servers of different sizes (Sia packs "
                                                    "a job's GPUs onto servers of one size)"};
      per_server = s.gpus;
    }
    out.push_back({t.name, k->second, per_server});
  }
  return out;
}

/// The jobs of every workload file, for their (job type, scale factor) pairs.
result<std::vector<job>> workload_jobs(const std::vector<std::string>& files,
                                       const sia_data& data) {
  std::vector<job> all;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return error{error_kind::io, f + ": cannot open"};
    import_summary summary;
    auto jobs = import_sia_workload(in, f, data, summary);
    if (!jobs) return jobs.err();
    all.insert(all.end(), jobs->begin(), jobs->end());
  }
  return all;
}

/// Sia's restart seconds of each job type of `jobs`, as `job_type,seconds` lines.
status write_restart_costs(const std::string& path, const std::vector<job>& jobs) {
  std::map<std::string, double> costs;
  for (const auto& j : jobs)
    if (const auto shape = parse_sia_job_type(j.job_type))
      for (const auto& s : sia_app_settings())
        if (s.name == shape->first) costs[j.job_type] = s.restart_seconds;
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o << "job_type,seconds\n";
  for (const auto& [type, seconds] : costs) o << '"' << type << "\"," << seconds << '\n';
  if (!o.flush()) return error{error_kind::io, path + ": cannot write"};
  return {};
}

}  // namespace

int cmd_table(const std::vector<std::string>& args) {
  const char* usage =
      "usage: tessera table import sia --sia-dir DIR --cluster FILE --workload CSV... -o OUT\n"
      "Writes a throughput table (Gavel's JSON layout) with the steps/s of every job shape\n"
      "(application, batch size, GPUs) of Sia's workload files on each GPU type of the cluster,\n"
      "from Sia's measurements in DIR (a checkout's sia-simulator folder): the job's GPUs packed\n"
      "onto that type's servers as Sia's simulator places a rigid job (docs/traces.md, \"Sia's\n"
      "workloads\"). GPU types map to Sia's kinds t4=aws, a100=dgx-ext, rtx2080ti=rtx,\n"
      "v100=azure, rtx6000=quad unless --kind says otherwise.";
  std::string sia_dir, cluster_file, out, costs_out;
  std::vector<std::string> workloads, kind_args;
  po::options_description d("tessera table import options");
  d.add_options()("sia-dir", po::value(&sia_dir)->required(), "Sia's sia-simulator folder")(
      "cluster,c", po::value(&cluster_file)->required(), "cluster TOML whose GPU types to cover")(
      "workload,w", po::value(&workloads)->required()->multitoken(), "Sia workload CSV (repeat)")(
      "kind", po::value(&kind_args)->multitoken(), "TYPE=KIND: Sia measurements for a GPU type")(
      "output,o", po::value(&out)->required(), "table to write")(
      "restart-costs-out", po::value(&costs_out),
      "also write each job type's restart seconds (Sia's per application) as CSV for "
      "`simulate --restart-costs`")("help,h", "show this help");
  // "import sia" then options; --help anywhere shows them.
  std::vector<std::string> rest(args);
  bool import_sia = false;
  if (rest.size() >= 2 && rest[0] == "import" && rest[1] == "sia") {
    import_sia = true;
    rest.erase(rest.begin(), rest.begin() + 2);
  } else if (!rest.empty() && rest[0] == "import") {
    rest.erase(rest.begin());
  }
  if (args.empty()) {
    std::cerr << usage << '\n';
    return exit_code::bad_input;
  }
  if (int rc = parse_options(rest, d, d, usage, std::cerr); rc >= 0) return rc;
  if (!import_sia) {
    std::cerr << "tessera: table: only 'table import sia' exists (see tessera table --help)\n";
    return exit_code::bad_input;
  }
  auto kinds = default_kinds();
  for (const auto& a : kind_args) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) {
      std::cerr << "tessera: --kind " << a << ": expected TYPE=KIND, e.g. t4=aws\n";
      return exit_code::bad_input;
    }
    kinds[a.substr(0, eq)] = a.substr(eq + 1);
  }
  auto cl = load_cluster_arg(cluster_file, "");
  if (!cl) return report(cl.err());
  auto types = gpu_kinds(*cl, kinds);
  if (!types) return report(types.err());
  std::vector<std::string> kind_names;
  for (const auto& t : *types) kind_names.push_back(t.kind);
  auto data = sia_data::load(sia_dir, kind_names);
  if (!data) return report(data.err());
  auto jobs = workload_jobs(workloads, *data);
  if (!jobs) return report(jobs.err());
  std::vector<std::string> missing;
  auto table = sia_throughput_table(*data, *jobs, *types, missing);
  if (!table) return report(table.err());
  for (const auto& m : missing) std::cerr << "tessera: no measurement: " << m << '\n';
  std::ofstream o(out, std::ios::binary | std::ios::trunc);
  o << table->to_json();
  if (!o.flush()) return report(error{error_kind::io, out + ": cannot write"});
  if (!costs_out.empty())
    if (auto st = write_restart_costs(costs_out, *jobs); !st) return report(st.err());
  std::size_t entries = 0;
  for (const auto& t : *types) entries += table->job_keys(t.gpu_type).size();
  std::cerr << "tessera: wrote " << entries << " entries (" << types->size() << " GPU types) to "
            << out << (missing.empty() ? "" : "; some shapes have no measurement (above)") << '\n';
  return exit_code::ok;
}

}  // namespace tessera::cli
