#pragma once
/// @file job_file.hpp
/// Job-set files in TOML: a simulation's (load_jobs) and a real run's (load_run_jobs).
///
/// A job-set file lists jobs:
///   [[job]]
///   job_type = "ResNet-18 (batch size 64)"   # required
///   scale_factor = 1                          # optional, > 0
///   total_steps = 1000                        # required, > 0
///   arrival = 0.0                             # optional, >= 0
///   priority_weight = 1.0                     # optional, > 0
///   slo = -1.0                                # optional, -1 (none) or > 0 seconds
///   id = 7                                    # optional; default: position in the file
///   acceptable_gpus = [2, 4, 8]               # optional: GPU counts the job accepts (read by
///                                             # hops); default: [scale_factor]
///   max_copies = 3                            # optional, >= 1: most copies a policy may fork
///                                             # it into (1 = never); default: no limit, but 1
///                                             # for a program (its copies merge only if it
///                                             # calls average: say so with max_copies > 1)
///
/// A run's job-set file (`tessera run`, read by load_run_jobs) also takes, per [[job]]:
///   kind = "mlp"          # required: the trainable kind (see train::builtin_trainables)
///   seed = 7              # optional, >= 0; default: id + 1
///   step_time = 0.05      # optional: seconds one step takes on a speed-1.0 server
///   target_loss = 0.3     # optional, > 0: the job is done once its round-end loss is this low
///   merge = "mean"        # optional: how forked copies merge, "mean" or "weighted"
///   [job.config]          # optional: trainable configuration, numbers only (lr = 0.05, ...)
/// and there `job_type` is optional (default: the kind) and total_steps must be whole.
///
/// kind = "program" is the user's own process (docs/lease-protocol.md); it takes instead of
/// seed and [job.config]:
///   command = ["python3", "train.py", "--lr", "0.1"]  # required: argv, searched in PATH
///   workdir = "."            # optional: where it runs, relative to the job file's directory
///                            # (default: that directory)
///   env = { OMP_NUM_THREADS = "1" }   # optional: added to the node's environment
///   max_restarts = 3         # optional, 0..1000: failed rounds before the job is failed
///   grace_seconds = 30       # optional, in [0.1, 3600]: how long the node waits for the
///                            # program (first contact, reports, exit after the lease)
///   checkpoint_every = "1 round"   # optional: how often a process kept warm across rounds
///                            # checkpoints: "N rounds", or a time, "N s", "N min", "N h" or
///                            # a number of seconds; N in [1, 1e6] rounds, [1 s, 1e6 s]
/// and `merge` as above: how the node averages forked copies' buffers ("weighted": by the
/// steps each copy made).
///
/// Errors name the file, the line and the field, as for cluster files
/// (runtime/core/cluster_config.hpp). Bounds (runtime/core/input_limits.hpp): total_steps at most
/// 1e11; scale_factor and acceptable_gpus at most 2^20; arrival and slo at most 1e9 s;
/// priority_weight in [1e-3, 1e3]; id at most 2^53; step_time in [1e-6, 3600] s; target_loss
/// at most 1e6; [job.config] values finite. NaN and infinities are refused everywhere. A file
/// holds at most 16 MiB, in lines of at most 64 KiB.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"
#include "runtime/core/throughput.hpp"
#include "runtime/core/merge_rule.hpp"

namespace tessera {

/// Reads a job-set file. When `table` is given, unknown job types are errors.
result<std::vector<job>> load_jobs(const std::string& path,
                                   const throughput_table* table = nullptr);

/// The job kind of users' own programs.
inline const std::string program_kind = "program";

/// How often a program kept warm across rounds checkpoints (program_spec::checkpoint_every):
/// every `rounds` leases, or, when `seconds` > 0, at the lease end nearest each `seconds`
/// since its last checkpoint. Forked copies and a job's last lease always checkpoint.
struct checkpoint_cadence {
  std::int32_t rounds = 1;  ///< leases between two checkpoints (used when seconds is 0)
  double seconds = 0;       ///< seconds between two checkpoints (0: count rounds)
  bool operator==(const checkpoint_cadence& o) const {
    return rounds == o.rounds && seconds == o.seconds;
  }
};

/// Reads a cadence as a job file writes it ("3 rounds", "10 min", "90 s", "2 h"), or an error
/// saying what is expected.
result<checkpoint_cadence> parse_checkpoint_cadence(std::string_view text);
/// A cadence as a job file writes it ("1 round", "600 s"): parse_checkpoint_cadence's input.
std::string format_checkpoint_cadence(const checkpoint_cadence& c);

/// How a node runs a job of kind "program" (see the file comment).
struct program_spec {
  std::vector<std::string> command;        ///< argv; command[0] is searched in PATH
  std::string workdir;                     ///< absolute directory the processes run in
  std::map<std::string, std::string> env;  ///< added to the node's environment
  std::int32_t max_restarts = 3;           ///< failed rounds allowed before the job fails
  double grace_seconds = 30;               ///< first contact, report gap, exit after lease
  /// How often a warm process checkpoints; the default, every round, keeps a move free (the
  /// state is on disk when the round ends) and a lost node costs at most a round.
  checkpoint_cadence checkpoint_every;
};

/// A job of a real run (`tessera run`): the scheduling description plus what a node needs to
/// build and train it.
struct run_job {
  job spec;                 ///< id, scale, steps, arrival, weight, SLO
  std::string kind;         ///< trainable kind, e.g. "mlp"
  std::uint64_t seed = 0;   ///< trainable seed (default: id + 1)
  double step_time = 0.05;  ///< seconds per step on a speed-1.0 server
  /// Training loss at which the job is done early (checked at round ends); 0 = run to
  /// total_steps.
  double target_loss = 0;
  /// How the copies of this job merge when a policy forks it (runtime/node/train/fork_merge.hpp).
  train::fork_merge_rule merge = train::fork_merge_rule::mean;
  std::map<std::string, double> config;  ///< trainable configuration ([job.config])
  program_spec program;                  ///< kind "program" only
  /// The job set gave `id`; false when the reader numbered the job by its position (a
  /// server taking submissions then gives it the next free id instead).
  bool id_given = true;
  /// True for a user's program (kind "program"), false for a built-in trainable.
  bool is_program() const { return kind == program_kind; }
};

/// Checks one job of a run before anything starts, e.g. that its trainable kind takes its
/// [job.config] (train::trainable_registry::check); the error's message is reported at the
/// job's [job.config] line (its [[job]] line without one).
using run_job_check = std::function<status(const run_job&)>;

/// Reads a run's job-set file (the keys above). When `known_kinds` is given, a kind outside it
/// is an error naming the file, line, field and the known kinds. When `check` is given, every
/// job passes it or the file is refused: one job's bad setting stops the run before it starts,
/// not halfway through, for every job.
result<std::vector<run_job>> load_run_jobs(const std::string& path,
                                           const std::vector<std::string>* known_kinds = nullptr,
                                           const run_job_check& check = {});

/// The text forms of a job set in memory (an API request's body).
enum class job_text_format { toml, json };

/// Reads a run's job set from text exactly as load_run_jobs reads a file: the same keys,
/// bounds and checks. `name` stands for the file in messages (e.g. "request body"); relative
/// workdirs start from `base_dir`. JSON has the TOML file's shape ({"job": [{...}, ...]}, or
/// one job's object); its errors name the job by index and the field ("request body, job[1]:
/// field 'total_steps': ...") since JSON has no line numbers here.
result<std::vector<run_job>> parse_run_jobs(std::string_view text, job_text_format format,
                                            const std::string& name, const std::string& base_dir,
                                            const std::vector<std::string>* known_kinds = nullptr,
                                            const run_job_check& check = {});

/// The id a job without one gets: the smallest id from `from` on that `taken` refuses,
/// wrapping to 0 past limits::max_job_id (so an id a user gave near the limit never pushes
/// the automatic ones out of range); -1 when every id is taken.
std::int64_t free_job_id(std::int64_t from, const std::function<bool(std::int64_t)>& taken);

/// Reads back a job set this program wrote (JSON, as parse_run_jobs reads it) for jobs it
/// accepted before: the same keys and bounds, but the file system is not consulted, since a
/// program's workdir may be gone by now (a finished job's, deleted by its user) and that must
/// not make the record unreadable. Its caller decides what a missing workdir means.
result<std::vector<run_job>> parse_recorded_jobs(std::string_view json, const std::string& name);

}  // namespace tessera
