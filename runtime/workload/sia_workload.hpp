#pragma once
/// @file sia_workload.hpp
/// Sia's workloads and measurements (SOSP'23, its artifact's `sia-simulator` folder) read into
/// tessera's job model and throughput table, for rigid jobs: each job keeps the GPU count and
/// batch size its workload line gives (docs/traces.md, "Sia's workloads").
///
/// What Sia's simulator knows of an application, per GPU kind ("aws": T4, "dgx-ext": A100,
/// "rtx": RTX 2080Ti, ...): `traces/<app>/placements-<kind>.csv` (step and sync time per
/// placement and per-GPU batch size) and `traces/<app>/validation-<batch>.csv` (per epoch:
/// progress, iterations, gradient square and variance). A job finishes when its progress
/// reaches the end of the application's last epoch; a step at batch size B advances progress
/// by the statistical efficiency (gain) of B in that epoch. Mapped onto tessera:
/// - **steps** of (app, B) = sum over epochs of the epoch's progress / gain(B, epoch): the
///   iterations a job at batch size B takes, so that steps / throughput is Sia's run time;
/// - **throughput** on a kind = the job's iterations per second with its GPUs packed onto that
///   kind's servers (Sia's placement for a rigid job), its per-GPU batch and gradient
///   accumulation chosen as Sia's simulator does, interpolated linearly in the per-GPU batch
///   among the profiled rows of that placement, times Sia's calibration (1 / its slowdown),
///   times steps(B) / steps(B') where B' is the batch Sia's rounding actually runs (so the job
///   takes exactly Sia's time on that kind).
/// Not reproduced: placements Sia never profiled (its simulator interpolates over node and
/// replica counts there; tessera reports them as missing), pipeline-parallel `gpt_pmp`, and
/// adaptive batch sizes (Sia's default mode; tessera's jobs keep theirs).
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/workload/trace_import.hpp"

namespace tessera {

/// What Sia's simulator sets per application in code rather than data (its applications.py
/// and simulator_config.py, artifact commit aaf7a0d): epochs to train, the slowdown its
/// measured throughputs are divided by, and the seconds a (re)start costs.
struct sia_app_setting {
  std::string name;
  int epochs = 0;
  double slowdown = 1;
  double restart_seconds = 30;
};

/// The applications tessera reads, with Sia's settings.
const std::vector<sia_app_setting>& sia_app_settings();

/// One epoch of a validation curve.
struct sia_epoch {
  double progress = 0, grad_sqr = 0, grad_var = 0;
};

/// A profiled step: per-GPU batch, step time and its synchronisation part (s).
struct sia_step {
  double local_batch = 0, step_time = 0, sync_time = 0;
};

/// One application's measurements.
struct sia_application {
  sia_app_setting setting;
  std::map<int, std::vector<sia_epoch>> validation;  ///< batch size -> epochs
  /// GPU kind -> placement ("24": 2 GPUs on one server, 4 on another) -> rows by local batch.
  std::map<std::string, std::map<std::string, std::vector<sia_step>>> placements;
};

/// Sia's measurements of every application in sia_app_settings() found in a folder.
class sia_data {
 public:
  /// Reads `dir` (a `sia-simulator` checkout, or its `traces` folder) for the GPU kinds
  /// `kinds`; errors name the file, line and field.
  static result<sia_data> load(const std::string& dir, const std::vector<std::string>& kinds);
  /// True when `app` was read.
  bool knows(const std::string& app) const { return apps_.count(app) != 0; }
  /// Iterations at batch size `batch` that finish `app`; an error when `batch` is outside the
  /// validated batch sizes.
  result<double> steps(const std::string& app, int batch) const;
  /// Iterations per second of a job of `app` at batch size `batch` on `replicas` GPUs of kind
  /// `kind` packed onto servers of `per_server` GPUs (see the file comment); an error when
  /// Sia has no profile of that placement or batch.
  result<double> throughput(const std::string& app, const std::string& kind, int per_server,
                            int replicas, int batch) const;

 private:
  sia_data() = default;
  const sia_application* find(const std::string& app) const;
  std::map<std::string, sia_application> apps_;
};

/// The job type of (app, batch): "cifar10 (batch size 2048)", Gavel's naming.
std::string sia_job_type(const std::string& app, int batch);
/// (app, batch) back from a job type sia_job_type made; nullopt for any other.
std::optional<std::pair<std::string, int>> parse_sia_job_type(const std::string& job_type);

/// Reads a Sia or Pollux workload CSV (`name,time,application,num_replicas,batch_size`, columns
/// by name, others ignored) into jobs sorted by time (ids 0..n-1): arrival = `time` (already
/// seconds from the trace's start), job type sia_job_type(application, batch_size), scale
/// factor `num_replicas`, steps = data.steps rounded up. Lines of applications `data` lacks,
/// or batch sizes outside its validation, are dropped and counted by reason.
result<std::vector<job>> import_sia_workload(std::istream& in, const std::string& name,
                                             const sia_data& data, import_summary& summary);

/// A GPU type of tessera's cluster and the Sia kind whose measurements it takes.
struct sia_gpu_kind {
  std::string gpu_type;  ///< e.g. "t4"
  std::string kind;      ///< e.g. "aws"
  int per_server = 0;    ///< GPUs per server of that type
};

/// A throughput table with one isolated entry per (job type, scale factor) of `jobs` and GPU
/// type of `kinds`; `missing` gets one line per entry Sia's data cannot give (the job cannot
/// run on that type then).
result<throughput_table> sia_throughput_table(const sia_data& data, const std::vector<job>& jobs,
                                              const std::vector<sia_gpu_kind>& kinds,
                                              std::vector<std::string>& missing);

}  // namespace tessera
