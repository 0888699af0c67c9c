#pragma once
/// @file cluster_config.hpp
/// Cluster files in TOML, and the cluster shorthand. Job-set files have their own loader
/// (runtime/core/job_file.hpp).
///
/// A cluster file either lists servers or uses the shorthand, or both:
///   [cluster]
///   name = "gavel-108"
///   shorthand = "36 v100 : 36 p100 : 36 k80, 4 per server"   # optional
///   [[cluster.server]]                                       # optional, repeatable
///   gpu_type = "v100"   # required
///   gpus = 8            # required, in [1, 2^20]
///   speed = 1.0         # optional, in [1e-3, 1e3] (runtime/core/input_limits.hpp)
///   count = 2           # optional: this many identical servers
/// A cluster has at most 2^20 GPUs and 65536 servers in all.
///   name = "fast"       # optional
///
/// Unknown keys, missing required fields and wrongly typed or out-of-range values are errors
/// naming the file, the line (of the field, or of the table lacking it) and the field. A
/// cluster has at most 2^20 GPUs; the file at most 16 MiB, in lines of at most 64 KiB.
/// TOML syntax errors read "<file>:<line>:<column>: <parser's description>".

#include <string>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"

namespace tessera {

/// Parses the shorthand "36 v100 : 36 p100 : 36 k80, 4 per server" (GPU counts per type,
/// then GPUs per server; the last server of a type may hold fewer). `where` prefixes errors.
/// Also accepted: "4 gpus per server", one value per type ("4:4:8 per server"), and no
/// ", ... per server" part at all, meaning 1 GPU per server (Gavel's default). Type names are
/// lower-cased; servers are named "<type>-<k>", k counting from 0 within a type.
result<cluster> parse_cluster_shorthand(const std::string& text, const std::string& where);

/// Reads a cluster file. Errors name the file, line and field.
result<cluster> load_cluster(const std::string& path);

}  // namespace tessera
