#pragma once
/// @file throughput.hpp
/// Gavel's measured throughput table (simulation_throughputs.json): steps/s of a job type at a
/// scale factor on a GPU type, alone ("null" entry) or co-located with another job.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/result.hpp"

namespace tessera {

/// Key of a table row: job type and scale factor.
struct job_key {
  std::string job_type;
  int scale_factor = 1;
  bool operator<(const job_key& o) const {
    return job_type != o.job_type ? job_type < o.job_type : scale_factor < o.scale_factor;
  }
  bool operator==(const job_key& o) const {
    return job_type == o.job_type && scale_factor == o.scale_factor;
  }
};

/// The throughput table. GPU type names are stored lower-case; Gavel's "<type>_unconsolidated"
/// entries (a multi-GPU job spread over several servers) are kept apart from consolidated ones.
class throughput_table {
 public:
  /// Reads Gavel's JSON layout `{gpu_type: {"('<model>', <scale>)": {"null": tput,
  /// "('<other>', <scale>)": [self, other], ...}}}`. Errors name the file and the key.
  /// Every value is 0 (cannot run) or within [1e-6, 1e5] steps/s; the file at most 64 MiB
  /// (runtime/core/input_limits.hpp).
  static result<throughput_table> load(const std::string& path);

  /// The bundled copy of Gavel's table (data/gavel/simulation_throughputs.json).
  static result<throughput_table> load_bundled();

  /// Isolated throughput of `key` on `gpu_type`, consolidated (one server) or not; the
  /// unconsolidated lookup falls back to the consolidated value when the table lacks it.
  std::optional<double> isolated(const std::string& gpu_type, const job_key& key,
                                 bool consolidated = true) const;

  /// Throughputs of `key` and `other` when co-located on one GPU of `gpu_type`.
  std::optional<std::pair<double, double>> colocated(const std::string& gpu_type,
                                                     const job_key& key,
                                                     const job_key& other) const;

  /// GPU types with consolidated entries, sorted.
  std::vector<std::string> gpu_types() const;
  /// Every job key of a GPU type, sorted.
  std::vector<job_key> job_keys(const std::string& gpu_type) const;
  /// True when some GPU type has an entry for this job type (at any scale).
  bool knows_job_type(const std::string& job_type) const;
  /// True when some GPU type has a consolidated entry for this job type at this scale factor.
  bool knows(const job_key& key) const;
  /// True when some row has a co-location entry: two jobs can share a GPU somewhere.
  bool has_colocated() const;

  /// A copy without the "_unconsolidated" entries, so every unconsolidated look-up answers
  /// the consolidated value: a job spanning servers runs as fast as on one server (Gavel's
  /// simulator's assumption, sim_config::assume_consolidated).
  throughput_table consolidated_only() const;

  /// Sets (or replaces) an isolated entry, e.g. from a measured throughput.
  void set_isolated(const std::string& gpu_type, const job_key& key, double steps_per_s,
                    bool consolidated = true);
  /// Sets (or replaces) the co-location entry of `key` beside `other` on one GPU of
  /// `gpu_type`: (steps/s of `key`, steps/s of `other`). The mirror entry is not touched.
  void set_colocated(const std::string& gpu_type, const job_key& key, const job_key& other,
                     std::pair<double, double> steps_per_s);
  /// The table in Gavel's JSON layout, as load() reads it (values in their shortest exact
  /// form, so a written table reads back equal).
  std::string to_json() const;

 private:
  class sax_builder;  // builds a table from the JSON parser's events
  struct row {
    double alone = 0;
    std::map<job_key, std::pair<double, double>> with;
  };
  // (gpu_type, consolidated?) -> key -> row
  std::map<std::pair<std::string, bool>, std::map<job_key, row>> rows_;
};

/// Parses Gavel's key form "('ResNet-18 (batch size 64)', 2)"; nullopt when malformed.
std::optional<job_key> parse_job_key(const std::string& text);

}  // namespace tessera
