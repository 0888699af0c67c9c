#include "runtime/core/metrics.hpp"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tessera {

metrics compute_metrics(const schedule_result& r, job_id window_begin, job_id window_end) {
  metrics m;
  m.policy = r.policy;
  m.jobs = static_cast<int>(r.jobs.size());
  m.rounds = static_cast<int>(r.rounds.size());
  double first_arrival = std::numeric_limits<double>::infinity(), last_finish = 0;
  double jct_sum = 0, win_sum = 0, wait_sum = 0, ftf_sum = 0, lr_sum = 0, gpu_sec = 0;
  double lre_sum = 0;
  int lr_n = 0, ftf_n = 0, lre_n = 0;
  for (const auto& j : r.jobs) {
    first_arrival = std::min(first_arrival, j.arrival);
    gpu_sec += j.gpu_seconds;
    if (j.finish < 0) continue;
    ++m.finished;
    const double jct = j.finish - j.arrival;
    jct_sum += jct;
    last_finish = std::max(last_finish, j.finish);
    if (window_begin >= 0 && j.id >= window_begin && j.id <= window_end) {
      ++m.window_jobs;
      win_sum += jct;
    }
    const double wait = std::max(0.0, jct - j.run_time);
    wait_sum += wait;
    if (j.run_time > 0) {
      const double lr = wait / j.run_time;
      lr_sum += lr;
      m.lr_max = std::max(m.lr_max, lr);
      ++lr_n;
    }
    if (j.expected_time > 0) {
      lre_sum += wait / j.expected_time;
      m.lre_max = std::max(m.lre_max, wait / j.expected_time);
      ++lre_n;
    }
    if (j.iso_share_time > 0) {
      const double rho = jct / j.iso_share_time;
      ftf_sum += rho;
      m.ftf_max = std::max(m.ftf_max, rho);
      ++ftf_n;
    }
  }
  if (m.finished > 0) {
    m.avg_jct = jct_sum / m.finished;
    m.avg_wait = wait_sum / m.finished;
    m.makespan = last_finish - first_arrival;
  }
  if (m.window_jobs > 0) m.avg_jct_window = win_sum / m.window_jobs;
  if (lr_n > 0) m.lr_avg = lr_sum / lr_n;
  if (lre_n > 0) m.lre_avg = lre_sum / lre_n;
  if (ftf_n > 0) m.ftf_avg = ftf_sum / ftf_n;
  if (m.makespan > 0 && r.total_gpus > 0) m.utilisation = gpu_sec / (r.total_gpus * m.makespan);
  double frag = 0;
  for (const auto& rr : r.rounds)
    if (rr.waiting_jobs > 0) frag += rr.idle_gpus;
  if (!r.rounds.empty()) m.fragmentation = frag / r.rounds.size();
  return m;
}

void print_metrics_table(std::ostream& out, const std::vector<metrics>& runs, time_unit unit) {
  const bool window =
      std::any_of(runs.begin(), runs.end(), [](const metrics& m) { return m.window_jobs > 0; });
  std::size_t w = 6;
  for (const auto& m : runs) w = std::max(w, m.policy.size());
  const bool hours = unit == time_unit::hours;
  auto h = [hours](double s) { return hours ? s / 3600.0 : s; };
  const std::string u = hours ? "(h)" : "(s)";
  out << std::left << std::setw(static_cast<int>(w)) << "policy" << std::right << std::setw(10)
      << "finished" << std::setw(10) << "JCT" + u;
  if (window) out << std::setw(12) << "winJCT" + u;
  out << std::setw(12) << "makespan" + u << std::setw(10) << "wait" + u << std::setw(8) << "util"
      << std::setw(9) << "FTFavg" << std::setw(9) << "FTFmax" << std::setw(8) << "LRavg"
      << std::setw(8) << "LRmax" << std::setw(7) << "frag" << '\n';
  out << std::fixed;
  for (const auto& m : runs) {
    out << std::left << std::setw(static_cast<int>(w)) << m.policy << std::right << std::setw(10)
        << (std::to_string(m.finished) + "/" + std::to_string(m.jobs)) << std::setprecision(2)
        << std::setw(10) << h(m.avg_jct);
    if (window) out << std::setw(12) << h(m.avg_jct_window);
    out << std::setw(12) << h(m.makespan) << std::setw(10) << h(m.avg_wait) << std::setw(8)
        << m.utilisation << std::setw(9) << m.ftf_avg << std::setw(9) << m.ftf_max << std::setw(8)
        << m.lr_avg << std::setw(8) << m.lr_max << std::setw(7) << m.fragmentation << '\n';
  }
  out.unsetf(std::ios::fixed);
}

void write_metrics_json(std::ostream& out, const std::vector<metrics>& runs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& m : runs) {
    arr.push_back({{"policy", m.policy},
                   {"jobs", m.jobs},
                   {"finished", m.finished},
                   {"avg_jct_s", m.avg_jct},
                   {"window_jobs", m.window_jobs},
                   {"avg_jct_window_s", m.avg_jct_window},
                   {"makespan_s", m.makespan},
                   {"avg_wait_s", m.avg_wait},
                   {"utilisation", m.utilisation},
                   {"ftf_avg", m.ftf_avg},
                   {"ftf_max", m.ftf_max},
                   {"latency_ratio_avg", m.lr_avg},
                   {"latency_ratio_max", m.lr_max},
                   {"latency_ratio_expected_avg", m.lre_avg},
                   {"latency_ratio_expected_max", m.lre_max},
                   {"fragmentation_gpus", m.fragmentation},
                   {"rounds", m.rounds}});
  }
  out << arr.dump(2) << '\n';
}

void write_jobs_csv(std::ostream& out, const schedule_result& r) {
  out << "job_id,job_type,scale_factor,total_steps,arrival_s,first_start_s,finish_s,jct_s,"
         "run_time_s,gpu_seconds,restarts,iso_share_time_s,expected_time_s\n";
  out << std::setprecision(10);
  for (const auto& j : r.jobs) {
    std::string type = j.job_type;
    if (type.find_first_of(",\"") != std::string::npos) {
      std::string q = "\"";
      for (char c : type) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
      type = q + "\"";
    }
    out << j.id << ',' << type << ',' << j.scale_factor << ',' << j.total_steps << ',' << j.arrival
        << ',' << j.first_start << ',' << j.finish << ','
        << (j.finish >= 0 ? j.finish - j.arrival : -1) << ',' << j.run_time << ',' << j.gpu_seconds
        << ',' << j.restarts << ',' << j.iso_share_time << ',' << j.expected_time << '\n';
  }
}

}  // namespace tessera
