#include "policies/registry.hpp"

#include "policies/fifo.hpp"
#include "policies/fifo_packed.hpp"
#include "policies/finish_time_fairness.hpp"
#include "policies/finish_time_fairness_packed.hpp"
#include "policies/gavel_family.hpp"
#include "policies/hadar.hpp"
#include "policies/hare.hpp"
#include "policies/hare_offline.hpp"
#include "policies/hops.hpp"
#include "policies/max_min_fairness.hpp"
#include "policies/max_min_fairness_packed.hpp"
#include "policies/max_sum_throughput.hpp"
#include "policies/min_total_duration.hpp"
#include "policies/min_total_duration_packed.hpp"
#include "policies/sia.hpp"
#include "policies/tessera_policy.hpp"
#include "policies/type_blind.hpp"

namespace tessera {

namespace {

/// Builds an allocation policy from validated options.
using allocation_factory = std::function<std::unique_ptr<allocation_policy>(const options&)>;

/// A registry entry for a Gavel allocation policy run through the shared mechanism.
policy_entry gavel(std::string name, std::string summary, std::vector<option_spec> opts,
                   allocation_factory make) {
  policy_entry e;
  e.name = name;
  e.summary = std::move(summary);
  e.options = std::move(opts);
  e.make = [make](const std::string& n, const options& o) { return make_gavel_policy(n, make(o)); };
  return e;
}

/// A registry entry for the heterogeneity-agnostic variant of an LP policy: the same policy on
/// the type-blind pooled view of the cluster (policies/type_blind.hpp).
policy_entry blind(std::string name, std::string summary, std::vector<option_spec> opts,
                   allocation_factory make) {
  return gavel(std::move(name), std::move(summary), std::move(opts),
               [make](const options& o) { return make_type_blind(make(o)); });
}

/// FIFO choosing each job's type by `choice`.
allocation_factory fifo_by(fifo_choice choice) {
  return [choice](const options& o) { return make_fifo(o, choice); };
}

std::vector<policy_entry> build_registry() {
  std::vector<policy_entry> r;
  // clang-format off
  r.push_back(gavel("fifo", "Gavel FIFO: whole GPU types in arrival order, most free type first", fifo_options(), fifo_by(fifo_choice::most_free)));
  r.push_back(gavel("fifo_perf", "Gavel FIFO, heterogeneity-aware: each job on its fastest free type", fifo_options(), fifo_by(fifo_choice::fastest)));
  r.push_back(gavel("fifo_packed", "Gavel FIFO with space sharing: a waiting job shares a running job's GPUs when the pair beats time-slicing", fifo_packed_options(), make_fifo_packed));
  r.push_back(blind("max_min_fairness", "Gavel LAS (max-min fairness), heterogeneity-agnostic", max_min_fairness_options(), make_max_min_fairness));
  r.push_back(gavel("max_min_fairness_perf", "Gavel LAS (max-min fairness), heterogeneity-aware LP", max_min_fairness_options(), make_max_min_fairness));
  r.push_back(gavel("max_min_fairness_packed", "Gavel LAS with space sharing: two jobs may share a GPU at their co-located throughputs", max_min_fairness_packed_options(), make_max_min_fairness_packed));
  r.push_back(blind("finish_time_fairness", "Gavel finish-time fairness (Themis), heterogeneity-agnostic", finish_time_fairness_options(), make_finish_time_fairness));
  r.push_back(gavel("finish_time_fairness_perf", "Gavel finish-time fairness (Themis), heterogeneity-aware LP bisection", finish_time_fairness_options(), make_finish_time_fairness));
  r.push_back(gavel("finish_time_fairness_packed", "Gavel finish-time fairness with space sharing: two jobs may share a GPU", finish_time_fairness_options(), make_finish_time_fairness_packed));
  r.push_back(blind("min_total_duration", "Gavel makespan minimisation, heterogeneity-agnostic", min_total_duration_options(), make_min_total_duration));
  r.push_back(gavel("min_total_duration_perf", "Gavel makespan minimisation, heterogeneity-aware LP", min_total_duration_options(), make_min_total_duration));
  r.push_back(gavel("min_total_duration_packed", "Gavel makespan minimisation with space sharing: two jobs may share a GPU", min_total_duration_packed_options(), make_min_total_duration_packed));
  r.push_back(blind("max_sum_throughput", "Gavel maximum total (normalised) throughput, heterogeneity-agnostic", max_sum_throughput_options(), make_max_sum_throughput));
  r.push_back(gavel("max_sum_throughput_perf", "Gavel maximum total (normalised) throughput, heterogeneity-aware LP", max_sum_throughput_options(), make_max_sum_throughput));
  r.push_back({"hops", "Hops: latency-ratio window, priority-weighted placement ILP (CBC) per server class, fragment filling", hops_options(), make_hops});
  r.push_back({"hadar", "Hadar: online primal-dual, exponential GPU-pool prices, one job's GPUs may span types and servers", hadar_options(), make_hadar});
  r.push_back({"hadare", "HadarE: Hadar plus forking each job into up to max_copies copies on distinct servers", hadare_options(), make_hadare});
  r.push_back({"hare", "Hare HLAS: least attained service (work done) first, each job's K tasks on its fastest free GPUs, several per GPU when that is faster", hare_options(), make_hare});
  r.push_back({"hare_offline", "Hare offline (clairvoyant): shortest remaining work at the job's best speed first, same task filling as hare", hare_offline_options(), make_hare_offline});
  r.push_back(gavel("sia", "Sia (rigid jobs): each round an ILP (CBC) gives every job one GPU type or none by its normalised goodput to the power p, damped where it would restart", sia_options(), make_sia));
  r.push_back({"tessera", "tessera: least remaining work first under makespan, latency-ratio and fairness guards, Hare's task filling, forked copies on idle GPUs where they pay after the averaging loss", tessera_policy_options(), make_tessera});
  // clang-format on
  return r;
}

}  // namespace

const std::vector<policy_entry>& policy_registry() {
  static const std::vector<policy_entry> registry = build_registry();
  return registry;
}

result<std::unique_ptr<policy>> make_policy(const std::string& name,
                                            const std::map<std::string, double>& args,
                                            const std::string& where) {
  for (const auto& e : policy_registry()) {
    if (e.name != name) continue;
    auto opts = validate_options(e.options, args, where);
    if (!opts) return opts.err();
    return e.make(e.name, opts.value());
  }
  std::string valid;
  for (const auto& e : policy_registry()) valid += (valid.empty() ? "" : ", ") + e.name;
  return error{error_kind::not_found, "unknown policy '" + name + "' (valid: " + valid + ")"};
}

}  // namespace tessera
