#pragma once
/// @file api.hpp
/// The control API's routes (docs/api.md) between the HTTP server (runtime/service/http/server.hpp,
/// its own thread) and the scheduler actor. The server's handler only posts each request to
/// the API actor; the actor asks the scheduler (request/response, never shared state) and
/// answers through the request's responder when the scheduler replies, so neither the
/// server's thread nor a CAF thread ever blocks.
///
/// Submissions are read by runtime/core/job_file.hpp's parse_run_jobs, exactly as `--jobs` files
/// are (TOML, or JSON of the same shape by Content-Type), so a bad body gets 400 naming the
/// field before the scheduler sees it.

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "runtime/service/http/server.hpp"
#include "runtime/core/job_file.hpp"

namespace tessera::actors {

/// What the API actor needs.
struct api_config {
  scheduler_client_api scheduler;        ///< answers the client messages (interfaces.hpp)
  std::vector<std::string> known_kinds;  ///< trainable kinds, for submissions
  run_job_check check;                   ///< the trainables' own checks of a job's config
  std::string base_dir;                  ///< relative program workdirs start here
  /// The server's request counters, for the metrics scrape (empty: none).
  std::function<std::vector<http::request_count>()> request_counts;
  std::chrono::milliseconds timeout{10000};  ///< the scheduler must answer within this (503)
  /// A GET's answer is reused this long (0: never), so polling clients do not load the
  /// scheduler; the dashboard polls once a second.
  std::chrono::milliseconds cache_ttl{250};
  /// Bytes of cached answers at most (older ones are dropped first).
  std::size_t cache_bytes = std::size_t{32} << 20;
  /// Jobs one submission may hold (413 beyond: submit in batches).
  std::size_t max_jobs_per_submission = 10000;
};

/// Why a request's query is refused ("" when it is not): each route reads a few parameters
/// (GET /v1/jobs: state; POST /v1/jobs: base_dir; GET /v1/rounds: limit) and any other is an
/// error, so no query string can multiply the answers the GET cache keeps.
std::string query_refusal(const http::request& r);

/// The GET cache's key of a request that passed query_refusal: its path and its parameters.
std::string cache_key(const http::request& r);

/// Spawns the API actor.
caf::actor spawn_api(caf::actor_system& sys, api_config cfg);

/// The HTTP server's handler: hands each request to the API actor `api`.
http::handler api_handler(caf::actor api);

}  // namespace tessera::actors
