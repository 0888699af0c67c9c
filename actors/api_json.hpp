#pragma once
/// @file api_json.hpp
/// The control API's documents (docs/api.md): the scheduler's status values as JSON, and the
/// Prometheus metrics text. Plain functions, tested without a server.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/protocol.hpp"
#include "runtime/service/http/server.hpp"

namespace tessera::actors {

/// docs/api.md "job"; `placements` only when the status carries them (GET /v1/jobs/ID).
nlohmann::ordered_json to_json(const job_status& j, bool placements);
/// docs/api.md "node".
nlohmann::ordered_json to_json(const node_status& n);
/// docs/api.md "round".
nlohmann::ordered_json to_json(const round_status& r);
/// docs/api.md "cluster".
nlohmann::ordered_json to_json(const cluster_status& c);

/// The Prometheus text format (0.0.4) of docs/api.md's metrics: jobs and nodes by state,
/// round and dispatch latency histograms, per-type utilisation, steps and throughput, and the
/// API's requests by method and code.
std::string metrics_text(const cluster_status& c, const std::vector<http::request_count>& requests);

}  // namespace tessera::actors
