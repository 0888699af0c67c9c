// Hops' configuration sets (step 2 of policies/hops.hpp; declared in
// policies/hops_internal.hpp): every configuration a job may take this round, built once per
// (type, scale, GPU counts, runnable classes, last-round placement key) and reused across
// jobs and rounds.
#include <algorithm>

#include "policies/hops_internal.hpp"

namespace tessera::detail {

namespace {

/// The server class of a last-round assignment: -1 none, -2 several.
int previous_class(const hops_server_classes& classes, const assignment* was) {
  int was_class = -1;
  if (!was) return was_class;
  for (const auto& sh : was->shares) {
    const int k = classes.class_of(sh.server);
    if (was_class == -1 || was_class == k)
      was_class = k;
    else
      was_class = -2;  // spanned classes
  }
  return was_class;
}

/// What of a last-round assignment decides which configurations "stay": its class, GPU
/// count and shape (one share, two, more), and the pin, packed in 64 bits.
std::uint64_t placement_key(const assignment* was, int was_class, bool pin) {
  if (!was) return pin ? 1 : 0;
  const auto shares = static_cast<std::uint64_t>(std::min<std::size_t>(was->shares.size(), 3));
  const auto cls = static_cast<std::uint64_t>(static_cast<std::uint32_t>(was_class + 2));
  const auto gpus = static_cast<std::uint64_t>(static_cast<std::uint32_t>(was->gpus()));
  return (pin ? 1 : 0) | 2 | shares << 2 | (cls & 0xFFFFF) << 4 | (gpus & 0xFFFFFFFF) << 24;
}

/// Adds the configurations of g GPUs on every class the job may run on: one server when g
/// fits one; whole servers plus a remainder when it does not (placement-sensitive jobs only
/// when no server holds them); two halves on two servers for low-sensitivity jobs. A
/// configuration "stays" when it matches the job's last-round class, GPU count and shape.
/// Returns whether any was added.
bool add_configs(const cluster& cl, hops_server_classes& classes_,
                 const hops_config_sets::params& p, const job_view& jv, int g,
                 const assignment* was, int was_class, std::vector<hops_config>& out) {
  const hops_class_rates& cr = classes_.rates_for(jv.spec->job_type, g);
  const bool sensitive = cr.sensitivity >= p.sensitivity_threshold;
  const auto& classes = classes_.classes();
  bool any = false;
  for (std::size_t k = 0; k < classes.size(); ++k) {
    const int cap = classes[k].capacity;
    const int n = static_cast<int>(classes[k].servers.size());
    if (!hops_may_run_on(cl, jv, classes[k].servers.front())) continue;
    const bool stays = was && was->gpus() == g && was_class == static_cast<int>(k);
    if (g <= cap) {
      if (cr.single[k] > 0) {
        out.push_back(
            {static_cast<int>(k), g, 0, {g}, cr.single[k], stays && was->shares.size() == 1});
        any = true;
      }
    } else if (!(sensitive && cr.fits_one_server)) {
      const int whole = g / cap, rem = g % cap;
      if (whole + (rem > 0 ? 1 : 0) <= n && cr.multi[k] > 0) {
        hops_config cf{
            static_cast<int>(k), g, whole, {}, cr.multi[k], stays && was->shares.size() > 1};
        if (rem > 0) cf.pieces.push_back(rem);
        out.push_back(cf);
        any = true;
      }
    }
    if (!sensitive && p.split_configs && g >= 2 && g <= cap && n >= 2 && cr.multi[k] > 0) {
      out.push_back({static_cast<int>(k),
                     g,
                     0,
                     {g - g / 2, g / 2},
                     cr.multi[k],
                     stays && was->shares.size() == 2});
      any = true;
    }
  }
  return any;
}

/// The staying configurations of `full`, pinned; empty configurations when it has none.
hops_config_set staying_only(const hops_config_set& full) {
  hops_config_set pinned;
  for (const auto& cf : full.configs)
    if (cf.stay) pinned.configs.push_back(cf);
  for (const auto& cf : pinned.configs) pinned.counts.push_back(cf.gpus);
  std::sort(pinned.counts.begin(), pinned.counts.end());
  pinned.counts.erase(std::unique(pinned.counts.begin(), pinned.counts.end()), pinned.counts.end());
  pinned.best = full.best;
  pinned.pinned = true;
  return pinned;
}

}  // namespace

void hops_config_sets::clear() {
  jobs_ = id_table<job_entry>();
  sets_.clear();
}

const hops_config_set* hops_config_sets::get(const cluster& cl, hops_server_classes& classes,
                                             const params& p, const job_view& jv,
                                             const assignment* was, bool pin) {
  const int was_class = previous_class(classes, was);
  const std::uint64_t key = placement_key(was, was_class, pin);
  job_entry& e = jobs_[jv.spec->id];
  if (e.spec != jv.spec || e.key != key || !e.set) {
    e.spec = jv.spec;
    e.key = key;
    e.set = intern(cl, classes, p, jv, was, was_class, pin, key);
  }
  return e.set->configs.empty() ? nullptr : e.set;
}

const hops_config_set* hops_config_sets::intern(const cluster& cl, hops_server_classes& classes,
                                                const params& p, const job_view& jv,
                                                const assignment* was, int was_class, bool pin,
                                                std::uint64_t key) {
  const job& j = *jv.spec;
  const std::vector<int> options = gpu_options(j);
  std::string& name = scratch_;
  name = j.job_type;
  name += '\x1f';
  append_bytes(name, j.scale_factor);
  for (int g : options) append_bytes(name, g);
  name += '\x1f';
  for (const auto& k : classes.classes())
    name += hops_may_run_on(cl, jv, k.servers.front()) ? '1' : '0';
  append_bytes(name, key);
  auto it = sets_.find(name);
  if (it != sets_.end()) return it->second.get();
  auto full = std::make_unique<hops_config_set>();
  const int total = cl.total_gpus();
  for (int g : options) {
    if (g > total) continue;
    if (add_configs(cl, classes, p, jv, g, was, was_class, full->configs))
      full->counts.push_back(g);
  }
  for (const auto& cf : full->configs) full->best = std::max(full->best, cf.throughput);
  if (pin) {
    auto pinned = std::make_unique<hops_config_set>(staying_only(*full));
    if (!pinned->configs.empty()) full = std::move(pinned);
  }
  return sets_.emplace(name, std::move(full)).first->second.get();
}

}  // namespace tessera::detail
