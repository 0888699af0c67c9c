#pragma once
/// @file summary.hpp
/// A run's outcome in the simulator's terms: the run_summary the scheduler sends becomes a
/// schedule_result, so runtime/core/metrics.hpp computes a run's figures of merit (JCT, makespan,
/// waiting, utilisation, latency ratio, fragmentation) with the very code that computes a
/// simulation's.

#include <string>

#include "actors/protocol.hpp"
#include "runtime/core/metrics.hpp"
#include "runtime/core/records.hpp"

namespace tessera::actors {

/// The schedule a run achieved. Times are seconds after the run's start; finish-time
/// fairness needs an isolated-share time a run does not measure, so it is left out (0).
schedule_result schedule_of(const run_summary& s, const std::string& policy, int total_gpus);

/// Its metrics, with every job in the window.
metrics run_metrics(const run_summary& s, const std::string& policy, int total_gpus);

}  // namespace tessera::actors
