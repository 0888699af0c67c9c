#pragma once
/// @file sim_executor.hpp
/// The simulator's executor: a job copy placed on servers runs at the table throughput of its
/// GPU type (Gavel's "_unconsolidated" entry when it spans several servers) times the slowest
/// of its servers' speed factors, for the round length minus a restart cost when its placement
/// changed since the previous round. A job finishing mid-round leaves its GPUs idle until the
/// next round, as in Gavel's simulator.

#include <unordered_map>

#include "runtime/executor.hpp"
#include "runtime/throughput.hpp"

namespace tessera {

/// Throughput model + virtual clock executor.
class sim_executor final : public executor {
 public:
  /// `restart_cost`: seconds a job loses each round it starts on other GPUs than it held in
  /// the round before (0 = Gavel's default).
  sim_executor(const cluster& cl, const throughput_table& table, double restart_cost);

  result<std::vector<copy_progress>> execute(const snapshot& s, const round_plan& p) override;

  /// Steps/s of `j` placed on `shares` (0 if the table has no entry).
  double rate(const job& j, const std::vector<server_share>& shares) const;

  /// Number of times a job restarted on new GPUs (preemptions and migrations).
  int restarts(job_id id) const;

 private:
  const cluster& cl_;
  const throughput_table& table_;
  double restart_cost_;
  std::unordered_map<job_id, std::vector<server_share>> last_shares_;
  std::unordered_map<job_id, int> restarts_;
};

}  // namespace tessera
