// hare_offline (and hare) against the lower bound of policies/hare_offline.hpp (point 1): for
// every job, JCT >= total_steps / (its fastest per-server rate), so the mean JCT of any
// schedule is at least the mean of those bounds. Prints the measured ratio, which the header
// promises is reported (docs/benchmarks/policies.md, "hare_offline against its lower
// bound"): no approximation ratio is proven for the general setting.
//
//   build/bench_hare_bound_bench [--cluster config/gavel_108.toml] [--rates 1.4,2.8,4.2,5.6]
//       [--seeds 1,2,3] [--jobs 1000] [--window 500-999]
//
// Per rate and seed: a trace from Gavel's multi-GPU recipe (as `tessera trace generate
// --multi-gpu`), simulated with 360 s rounds until the window has finished; one JSON line per
// policy with the window's mean JCT, mean bound and their ratio.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_cli.hpp"
#include "policies/hare_offline.hpp"
#include "policies/registry.hpp"
#include "runtime/core/cluster_config.hpp"
#include "runtime/sim/sim.hpp"
#include "runtime/workload/trace_gen.hpp"

using namespace tessera;

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "bench_hare_bound_bench: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cluster_file = "config/gavel_108.toml";
  std::vector<double> rates{1.4, 2.8, 4.2, 5.6};
  std::vector<double> seeds{1, 2, 3};
  int jobs = 1000;
  job_id w_begin = 500, w_end = 999;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::option_value(argc, argv, i); };
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_hare_bound_bench [--cluster FILE] [--rates 1.4,2.8] [--seeds 1,2,3]\n"
          "       [--jobs N] [--window A-B]\n"
          "Mean JCT of hare_offline and hare over the window vs the lower bound of\n"
          "policies/hare_offline.hpp. JSON lines.\n");
      return 0;
    } else if (a == "--cluster") {
      cluster_file = next();
    } else if (a == "--rates") {
      rates = bench::parse_list<double>(next());
    } else if (a == "--seeds") {
      seeds = bench::parse_list<double>(next());
    } else if (a == "--jobs") {
      jobs = std::atoi(next().c_str());
    } else if (a == "--window") {
      const auto w = next();
      const auto dash = w.find('-');
      if (dash == std::string::npos) return fail("--window needs A-B");
      w_begin = std::atoll(w.substr(0, dash).c_str());
      w_end = std::atoll(w.substr(dash + 1).c_str());
    } else {
      std::fprintf(stderr, "unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  auto cl = load_cluster(cluster_file);
  if (!cl) return fail(cl.err().message);
  auto table = throughput_table::load_bundled();
  if (!table) return fail(table.err().message);
  auto templates = bundled_job_templates();
  if (!templates) return fail(templates.err().message);
  for (const double rate : rates)
    for (const double seed : seeds) {
      trace_gen_config tc;
      tc.rate_per_hour = rate;
      tc.num_jobs = jobs;
      tc.multi_gpu = true;
      tc.seed = static_cast<std::uint64_t>(seed);
      auto trace = generate_trace(tc, *templates, *table);
      if (!trace) return fail(trace.err().message);
      const auto bound = hare_offline_lower_bound(*cl, *table, *trace);
      for (const char* name : {"hare_offline", "hare"}) {
        auto pol = make_policy(name);
        if (!pol) return fail(pol.err().message);
        sim_config sc;
        sc.window_begin = w_begin;
        sc.window_end = w_end;
        auto res = simulate(*cl, *table, *trace, **pol, sc);
        if (!res) return fail(res.err().message);
        double jct = 0, lb = 0;
        int n = 0;
        for (std::size_t i = 0; i < res->jobs.size(); ++i) {
          const auto& r = res->jobs[i];
          if (r.id < w_begin || r.id > w_end || r.finish < 0) continue;
          jct += r.finish - r.arrival;
          lb += bound[i];
          ++n;
        }
        if (n == 0 || lb <= 0) return fail("no finished window job");
        std::printf(
            "{\"rate\": %g, \"seed\": %g, \"policy\": \"%s\", \"window_jobs\": %d, "
            "\"mean_jct_h\": %.3f, \"mean_bound_h\": %.3f, \"ratio\": %.3f}\n",
            rate, seed, name, n, jct / n / 3600, lb / n / 3600, jct / lb);
        std::fflush(stdout);
      }
    }
  return 0;
}
