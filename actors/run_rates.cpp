#include "actors/run_rates.hpp"

#include <algorithm>

#include "runtime/core/detail/text.hpp"

namespace tessera {

void run_rates::add(run_job& j) {
  const std::string source_type = j.spec.job_type;
  const auto [first, fresh] = first_step_time_.emplace(j.spec.job_type, j.step_time);
  if (!fresh && first->second != j.step_time)
    j.spec.job_type += " @" + detail::format_shortest(j.step_time) + "s";
  const int k = j.spec.scale_factor;
  for (const int g : gpu_options(j.spec)) {
    const double per_step = ((k + g - 1) / g) * j.step_time;
    for (const auto& t : configured_.types)
      types_.set_isolated(t.name, {j.spec.job_type, g}, 1.0 / per_step);
  }
  const job_key key{j.spec.job_type, k};
  if (registered_.emplace(key, registered{source_type, 1.0 / j.step_time}).second) add_pairs(key);
  live_.reset();  // the next for_live() rebuilds with the new entries
}

std::optional<std::pair<double, double>> run_rates::colocation_ratios(const std::string& gpu_type,
                                                                      const job_key& a,
                                                                      const job_key& b) const {
  const job_key sa{registered_.at(a).source_type, a.scale_factor};
  const job_key sb{registered_.at(b).source_type, b.scale_factor};
  const auto ab = colocation_->colocated(gpu_type, sa, sb);
  const auto ba = colocation_->colocated(gpu_type, sb, sa);
  const auto solo_a = colocation_->isolated(gpu_type, sa);
  const auto solo_b = colocation_->isolated(gpu_type, sb);
  if ((!ab && !ba) || !solo_a || !solo_b || !(*solo_a > 0) || !(*solo_b > 0)) return std::nullopt;
  const double va = ab ? ab->first : ba->second;
  const double vb = ba ? ba->first : ab->second;
  if (!(va > 0) || !(vb > 0)) return std::nullopt;
  return std::make_pair(va / *solo_a, vb / *solo_b);
}

void run_rates::add_pairs(const job_key& a) {
  if (!colocation_) return;
  const double solo_a = registered_.at(a).solo;
  for (const auto& [b, reg] : registered_) {
    if (b.scale_factor != a.scale_factor) continue;
    for (const auto& t : configured_.types) {
      const auto r = colocation_ratios(t.name, a, b);
      if (!r) continue;
      const std::pair<double, double> rates{solo_a * r->first, reg.solo * r->second};
      types_.set_colocated(t.name, a, b, rates);
      types_.set_colocated(t.name, b, a, {rates.second, rates.first});
    }
  }
}

const server_throughput& run_rates::for_live(const cluster& live, const std::vector<int>& ranks) {
  if (live_ && ranks == live_ranks_ && &live_->cl() == &live) return *live_;
  live_ranks_ = ranks;
  live_ = std::make_unique<server_throughput>(live, types_);
  for (const auto& [key, rate] : measured_) {
    const auto it = std::find(ranks.begin(), ranks.end(), std::get<0>(key));
    if (it == ranks.end()) continue;
    const int server = static_cast<int>(it - ranks.begin());
    live_->record(std::get<1>(key), {{server, std::get<2>(key)}}, rate);
  }
  return *live_;
}

void run_rates::record(int rank, const std::string& job_type, int scale, int task_times,
                       double steps_per_s) {
  if (!(steps_per_s > 0)) return;
  const double gang = steps_per_s * std::max(1, task_times);
  measured_[{rank, job_type, scale}] = gang;
  if (!live_) return;
  const auto it = std::find(live_ranks_.begin(), live_ranks_.end(), rank);
  if (it != live_ranks_.end())
    live_->record(job_type, {{static_cast<int>(it - live_ranks_.begin()), scale}}, gang);
}

}  // namespace tessera
