#pragma once
/// @file input_limits.hpp
/// The bounds the input readers enforce: one named constant per bound, with why it is there.
/// Traces (runtime/workload/trace.hpp), job-set files (runtime/core/job_file.hpp), cluster files
/// (runtime/core/cluster_config.hpp), throughput tables (runtime/core/throughput.hpp) and the trace
/// generator (runtime/workload/trace_gen.hpp) read them from here, so a trace the generator writes
/// always reads back and the same field has the same range in every format. A value outside its
/// range, NaN or infinite, is bad input naming the file, line and field. The command line's
/// bounds live with the commands (launcher/common.hpp).

#include <cstddef>

namespace tessera::limits {

// ---- fields of a job (traces, job-set files, the trace generator) ---------------------------

/// Most steps of one job. Gavel's recipe tops out near 4.2e8 (6e5 s at ~700 steps/s); the
/// generator's own ceiling is max_duration x max_steps_per_second = 6e10. 1e11 is above both,
/// exact as a double and as an int64 (the runtime's step counters), and under 2^48, the largest
/// step a run's copies exchange (two floats of 24 bits, actors/copy_round.cpp).
inline constexpr double max_total_steps = 1e11;

/// Latest arrival and longest SLO, in seconds: 1e9 s, about 32 years. Below 2^53
/// microseconds, so whole microseconds (the trace format's 6 decimals) stay exact.
inline constexpr double max_seconds = 1e9;

/// Priority weights: within [1e-3, 1e3]. Gavel's traces use 1; policies multiply LP
/// coefficients by weights, and a ratio of 1e6 between two jobs stays well inside what the
/// solver's 1e-9 tolerances can tell apart.
inline constexpr double min_priority_weight = 1e-3;
inline constexpr double max_priority_weight = 1e3;

/// Most GPUs of one job (scale factor, acceptable GPU counts) and of one cluster: 2^20, far
/// beyond any real cluster, small enough that sums over servers never overflow an int.
inline constexpr long long max_gpus = 1LL << 20;

/// Largest job id: 2^53, so an id written as a JSON number (metrics, summaries) reads back
/// exactly.
inline constexpr long long max_job_id = 1LL << 53;

/// Seconds one step of a run's job takes on a speed-1.0 server: within [1e-6, 3600]. Below a
/// microsecond a step's pacing is under the clock's resolution; above an hour a job makes no
/// visible progress within a run's timeout.
inline constexpr double min_step_time = 1e-6;
inline constexpr double max_step_time = 3600;

/// Largest target loss of a run's job. The built-in models' cross-entropy starts near ln(classes)
/// (at most ~11.5); 1e6 only rules out nonsense.
inline constexpr double max_target_loss = 1e6;

// ---- clusters --------------------------------------------------------------------------------

/// A server's speed factor: within [1e-3, 1e3]. Speeds are relative to a reference server
/// (Hops' clusters span about 0.25 to 4); a factor of 1e-300 made every job run forever.
inline constexpr double min_speed = 1e-3;
inline constexpr double max_speed = 1e3;

// ---- throughput tables -----------------------------------------------------------------------

/// A throughput is 0 (the job cannot run there) or within [1e-6, 1e5] steps/s. Gavel's table
/// spans 0.22 to ~700 steps/s; a positive value below 1e-6 is a unit error, not a GPU.
inline constexpr double min_steps_per_second = 1e-6;
inline constexpr double max_steps_per_second = 1e5;

// ---- the trace generator ---------------------------------------------------------------------

/// Most jobs one trace holds, generated (--jobs) or read: 1e7, a thousand times Gavel's largest
/// experiment; the generator streams, but a simulation keeps every job in memory.
inline constexpr long long max_trace_jobs = 10'000'000;

/// Fastest Poisson arrival rate of the generator, in jobs per hour (~278 jobs/s): beyond it,
/// whole-microsecond arrivals start to coincide.
inline constexpr double max_rate_per_hour = 1e6;

// ---- files -----------------------------------------------------------------------------------

/// How much of one input file a reader accepts. A regular file is checked by its size before
/// reading; a pipe or character device (e.g. /dev/zero) is read under the same byte and line
/// bounds, counted as the data arrives, so no input makes a reader buffer without bound.
struct file_limits {
  std::size_t max_bytes;       ///< whole file
  std::size_t max_line_bytes;  ///< one line, without its line break
  const char* what;            ///< what the file is, for messages ("trace")
};

/// Longest line of a text input: 64 KiB. Gavel's trace lines are under 200 bytes and a TOML
/// line is one key; the bound only stops a file without line breaks from being buffered whole.
inline constexpr std::size_t max_line_bytes = 64 * 1024;

/// Traces: 2 GiB holds the generator's largest output (1e7 jobs at ~160 bytes a line).
inline constexpr file_limits trace_file{2ULL << 30, max_line_bytes, "trace"};

/// Job templates (TSV): Gavel's 26 templates take 3 KiB; 1 MiB is ample.
inline constexpr file_limits templates_file{1 << 20, max_line_bytes, "job templates"};

/// Cluster and job-set TOML files: hand-written or generated lists; a 10 000-job set is ~1 MiB.
/// The TOML parser holds the whole document, so 16 MiB also bounds its memory.
inline constexpr file_limits toml_file{16 << 20, max_line_bytes, "TOML file"};

/// Throughput tables (JSON): the bundled one is 1.2 MiB. The SAX parser keeps no line, and a
/// table written without indentation is one line, so a line may be as long as the file.
inline constexpr file_limits json_table_file{64 << 20, 64 << 20, "throughput table"};

}  // namespace tessera::limits
