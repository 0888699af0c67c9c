#include "runtime/run_rates.hpp"

#include <algorithm>

#include "runtime/detail/text.hpp"

namespace tessera {

void run_rates::add(run_job& j) {
  const auto [first, fresh] = first_step_time_.emplace(j.spec.job_type, j.step_time);
  if (!fresh && first->second != j.step_time)
    j.spec.job_type += " @" + detail::format_shortest(j.step_time) + "s";
  const int k = j.spec.scale_factor;
  for (const int g : gpu_options(j.spec)) {
    const double per_step = ((k + g - 1) / g) * j.step_time;
    for (const auto& t : configured_.types)
      types_.set_isolated(t.name, {j.spec.job_type, g}, 1.0 / per_step);
  }
  live_.reset();  // the next for_live() rebuilds with the new entries
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
