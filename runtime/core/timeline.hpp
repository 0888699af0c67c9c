#pragma once
/// @file timeline.hpp
/// Who ran where in each round: the round loop (runtime/core/round_loop.hpp) hands every validated
/// plan to a `timeline_recorder`, so the simulator and the actor runtime write the same
/// record from the same plans. `tessera plot` draws Gantt charts and per-GPU-type
/// utilisation from it (scripts/plot.py).
///
/// Format: JSON Lines. The first line describes the run:
///   {"timeline":1,"source":"simulate","policy":"fifo","round_length":360,
///    "servers":[{"name":"v100-0","type":"v100","gpus":4},...],
///    "types":[{"name":"v100","gpus":36},...]}
/// then one line per planned round:
///   {"round":0,"start":0,"length":360,"active":12,
///    "placements":[{"job":3,"copy":0,"server":"v100-0","gpus":2,"tasks":0},...]}
/// One placement per server share of each assignment (a job spread over two servers has two).
/// Times are seconds: virtual time in the simulator, seconds since the run began in a run.

#include <fstream>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/plan.hpp"
#include "runtime/core/result.hpp"

namespace tessera {

/// One server share of one assignment, as a timeline line holds it.
struct timeline_placement {
  job_id job = 0;
  int copy = 0;
  std::string server;  ///< server name
  int gpus = 0;
  int tasks = 0;
  bool operator==(const timeline_placement& o) const {
    return job == o.job && copy == o.copy && server == o.server && gpus == o.gpus &&
           tasks == o.tasks;
  }
};

/// One round of a timeline.
struct timeline_round {
  std::int64_t round = 0;
  double start = 0, length = 0;
  int active = 0;  ///< active jobs the policy saw
  std::vector<timeline_placement> placements;
};

/// Writes a timeline to a stream: the header at construction, a line per recorded round.
/// Thread-safe (a round loop records from one thread, but a recorder may be shared).
class timeline_recorder {
 public:
  /// Writes the header line for cluster `cl` (the configured one: a run's live cluster may
  /// lack lost servers, whose names still identify them). `source` is "simulate" or "run".
  timeline_recorder(std::ostream& out, const cluster& cl, const std::string& source,
                    const std::string& policy, double round_length);
  /// Appends the line of plan `p`, whose server indices are into `s.cl`.
  void record(const snapshot& s, const round_plan& p);
  /// An io error when a write failed, naming `path`.
  status check(const std::string& path) const;

 private:
  std::ostream& out_;
  std::mutex mu_;
  std::int64_t rounds_ = 0;
};

/// A timeline written to a file: the file and its recorder, kept together so the stream
/// outlives the recorder's use of it.
class timeline_file {
 public:
  /// Creates (truncates) `path` and writes the header; an io error names the path.
  static result<std::unique_ptr<timeline_file>> open(const std::string& path, const cluster& cl,
                                                     const std::string& source,
                                                     const std::string& policy,
                                                     double round_length);
  timeline_recorder& recorder() { return *rec_; }
  /// Flushes and checks the writes (an io error naming the path).
  status close();

 private:
  timeline_file() = default;
  std::string path_;
  std::ofstream out_;
  std::unique_ptr<timeline_recorder> rec_;
};

/// The placements of plan `p` as a timeline holds them (server indices into `cl`).
std::vector<timeline_placement> placements_of(const cluster& cl, const round_plan& p);

/// Reads the rounds of a timeline (the header line is skipped); errors name `name`, the line
/// and the field.
result<std::vector<timeline_round>> read_timeline(std::istream& in, const std::string& name);

}  // namespace tessera
