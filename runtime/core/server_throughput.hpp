#pragma once
/// @file server_throughput.hpp
/// Throughput per server entity (Hops, SoCC'24: fine-grained heterogeneity awareness). Two
/// servers with the same GPU type may differ (host CPU, memory, interconnect), so a job's
/// throughput is looked up per server, in this order:
///  1. the server table: throughputs measured on that very server (`record`);
///  2. the GPU-type table (Gavel's measurements) times the server's speed factor; a
///     multi-server configuration uses Gavel's "_unconsolidated" entry, falling back to the
///     consolidated one exactly as `throughput_table::isolated` does;
///  3. an analytic iteration-time model: per-GPU compute time of one step (the single-GPU rate
///     of tiers 1-2 on this server, else another GPU type's rate scaled by the two types'
///     relative speed) plus a ring all-reduce of the job's gradients, over the in-server
///     bandwidth for a one-server configuration and the slower network across servers, so a
///     multi-server configuration is always slower than a one-server one.
///
/// Units: a step is what Gavel's table counts; a configuration with `g` GPUs runs `g` times
/// its per-GPU rate. A configuration spanning servers runs at its slowest server's per-GPU
/// rate times its GPU count (Hops' rule); with servers of one GPU type this is exactly
/// Gavel's "unconsolidated throughput times the slowest speed factor".
///
/// Complexity: a look-up is O(log E) map searches (E table entries); the analytic tier adds
/// O(T) for T table GPU types. Not thread-safe for concurrent `record` and look-ups.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/throughput.hpp"

namespace tessera {

/// Parameters of the analytic iteration-time model (tier 3). Defaults: NVLink-class bus
/// bandwidth inside a server, 25 Gb/s Ethernet between servers.
struct iteration_model {
  double intra_server_gb_per_s = 50.0;  ///< all-reduce bus bandwidth inside a server (GB/s)
  double inter_server_gb_per_s = 3.0;   ///< all-reduce bandwidth across servers (GB/s)
  double intra_latency_s = 20e-6;       ///< latency of one all-reduce step inside a server
  double inter_latency_s = 100e-6;      ///< latency of one all-reduce step across servers
  double default_gradient_mb = 100.0;   ///< gradient size of a job family not listed
};

/// Gradient size (MB, fp32) of a job type's model, by family name prefix: ResNet-18 45,
/// ResNet-50 98, Transformer 250, LM 130, Recommendation 16, A3C 4, CycleGAN 110 (rounded
/// published parameter counts x 4 bytes); `m.default_gradient_mb` otherwise.
double gradient_megabytes(const std::string& job_type, const iteration_model& m);

/// Which tier of the look-up answered.
enum class throughput_source {
  server_table,  ///< measured on this server
  type_table,    ///< GPU-type table x speed factor
  analytic,      ///< iteration-time model
  none,          ///< no estimate (unknown job type and GPU type)
};

/// One answer of the look-up.
struct server_rate {
  /// Steps/s of the whole configuration if every one of its GPUs ran at this server's
  /// per-GPU rate; 0 when there is no estimate.
  double steps_per_s = 0;
  throughput_source source = throughput_source::none;  ///< the tier that answered
};

/// Per-server throughput estimates for one cluster, with measured updates.
class server_throughput {
 public:
  /// Estimates for `cl` (which must outlive this object) from the GPU-type table `types`.
  server_throughput(const cluster& cl, throughput_table types, iteration_model model = {});

  /// Steps/s that a `gpus`-GPU configuration of `job_type` would reach at server `server`'s
  /// per-GPU rate; `multi_server` when the configuration spans servers.
  server_rate rate_at(int server, const std::string& job_type, int gpus, bool multi_server) const;

  /// Steps/s of `job_type` placed on `shares`: the slowest server's per-GPU rate times the
  /// GPU count, one-server rates when there is one share. 0 when a server has no estimate or
  /// `shares` is empty.
  double rate(const std::string& job_type, const std::vector<server_share>& shares) const;
  /// The same, given `tier2_row(job_type)`: a caller that places the same job every round
  /// looks its row up once instead of hashing the job type each time.
  double rate(const std::string& job_type, const std::vector<double>* row,
              const std::vector<server_share>& shares) const;
  /// The precomputed GPU-type table values of `job_type` (null when the table lacks it);
  /// valid as long as this object.
  const std::vector<double>* tier2_row(const std::string& job_type) const;

  /// Space sharing: the GPU-type table's steps/s of jobs of types `a` and `b`, both of scale
  /// `scale`, sharing GPUs of cluster type `type`: each job's value from its own row (`a`
  /// beside `b`, and `b` beside `a`), or from the other's row when its own is missing.
  /// nullopt when neither row has the entry or a value is 0: the pair cannot share there.
  std::optional<std::pair<double, double>> colocated_table(int type, const std::string& a,
                                                           const std::string& b, int scale) const;

  /// Space sharing: steps/s of two jobs sharing every GPU of `shares`: colocated_table of the
  /// shares' GPU type times the slowest server's speed factor (the rule of `rate`). nullopt
  /// when the shares span GPU types or the table has no entry. Server-table measurements and
  /// the analytic tier are for jobs alone and are not used.
  std::optional<std::pair<double, double>> colocated_rate(
      const std::string& a, const std::string& b, int scale,
      const std::vector<server_share>& shares) const;

  /// Records a measured throughput (steps/s of the whole configuration) of `job_type` on
  /// `shares` into the server table. A multi-server measurement is stored for each of its
  /// servers (it is the slowest one's rate, a conservative estimate for the others).
  /// Non-positive or non-finite values are ignored.
  void record(const std::string& job_type, const std::vector<server_share>& shares,
              double steps_per_s);

  /// True when the server table holds a measurement for `server`.
  bool has_measurements(int server) const;
  /// Changes on every `record` and differs between instances, so callers can cache look-ups
  /// keyed by (address, version).
  std::uint64_t version() const { return version_; }
  /// The cluster.
  const cluster& cl() const { return *cl_; }
  /// The GPU-type table.
  const throughput_table& type_table() const { return types_; }
  /// The analytic model's parameters.
  const iteration_model& model() const { return model_; }

 private:
  /// Tiers 1-2 only.
  server_rate tabled(int server, const std::string& job_type, int gpus, bool multi) const;
  /// Fills cached_ (constructor).
  void build_tier2_cache();
  /// Index into a cached_ row of (server GPU-type kind, GPU count, multi-server); with gpus 0,
  /// kind = the number of kinds gives the row's length.
  std::size_t cached_at(int kind, int gpus, bool multi) const;
  /// The GPU-type table's isolated value (0 when it has none) of `job_type` on `gpus` GPUs
  /// of `server`'s type, from cached_; nullopt when the cache does not cover the question.
  std::optional<double> cached_tier2(int server, const std::string& job_type, int gpus,
                                     bool multi) const;
  /// rate() from `row` (tier2_row of the job type), the same value rate_at gives share by
  /// share; -1 when the cache does not answer (no row, measurements exist, or the GPU count
  /// is outside it).
  double cached_rate(const std::string& job_type, const std::vector<double>* row,
                     const std::vector<server_share>& shares, int gpus, bool multi) const;
  /// Single-GPU rate of `job_type` on `server` from tiers 1-2 or another type's table entry.
  double single_gpu_rate(int server, const std::string& job_type) const;

  const cluster* cl_;
  throughput_table types_;
  iteration_model model_;
  /// (server, job type, GPUs, multi-server) -> measured steps/s of the whole configuration.
  std::map<std::tuple<int, std::string, int, bool>, double> measured_;
  std::vector<char> measured_server_;
  /// relative_[k][t]: geometric-mean speed of cluster type k over table type t (0 = unknown).
  std::vector<std::vector<double>> relative_;
  std::vector<std::string> table_types_;
  /// Tier 2 precomputed at construction, so the simulator's executor looks each placement
  /// up with one hash of the job type rather than two std::map searches that copied it into
  /// keys: per job type of the table, the value for each of the servers' GPU type names
  /// (cached_kind_ per server), GPU count 1..cached_max_gpus_ and consolidation, indexed
  /// [(kind * (cached_max_gpus_ + 1) + gpus) * 2 + multi]. Read-only after construction.
  /// Hash of a job type for cached_: its length and its first and last 8 bytes, which tell
  /// the table's few dozen job types apart ("ResNet-50 (batch size 64)" and "... 128)")
  /// at a fraction of a hash of every byte, done for every placement of every round.
  struct job_type_hash {
    std::size_t operator()(const std::string& t) const;
  };
  std::unordered_map<std::string, std::vector<double>, job_type_hash> cached_;
  std::vector<int> cached_kind_;
  int cached_max_gpus_ = 0;
  std::uint64_t version_ = 0;
};

}  // namespace tessera
