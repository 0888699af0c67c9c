#pragma once
/// @file job_messages.hpp
/// The messages between the scheduler and its job actors (actors/job_actor.hpp describes the
/// exchange; actors/interfaces.hpp lists who sends which). They never cross a process.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/checkpoints.hpp"
#include "actors/job_life.hpp"
#include "actors/protocol.hpp"

namespace tessera::actors {

/// scheduler -> job: `view_atom, uint64 start`: the round boundary; the job answers with the
/// message `view_atom, start, job_snapshot` (messages, not requests: actors/job_actor.hpp).
using view_atom = caf::atom_constant<caf::atom("jobview")>;
/// scheduler -> job: `node_lost_atom, int64 round, int32 rank`: a node of that round is lost.
using node_lost_atom = caf::atom_constant<caf::atom("jobnodelst")>;
/// scheduler -> job: `summary_atom, bool at_boundary, uint64 index`: the run ends; the job
/// answers with the message `summary_atom, index, job_final` (`index`: its place in the
/// scheduler's job list). At a round boundary a cancel the job is waiting for takes effect
/// first.
using summary_atom = caf::atom_constant<caf::atom("jobsummary")>;
/// job -> scheduler: `write_failed_atom, int64 job, std::string why`: its round checkpoint
/// could not be written (the checkpoint directory's health is the scheduler's).
using write_failed_atom = caf::atom_constant<caf::atom("jobwrtfail")>;

/// One node's part of a job copy in a round.
struct copy_piece {
  int copy = 0;         ///< copy index
  int rank = -1;        ///< node
  int gpus = 0;         ///< GPUs it holds there
  bool leader = false;  ///< the first part of its copy (writes copy 0's checkpoint)
  bool spread = false;  ///< the copy has parts on other nodes too
  caf::actor node;      ///< the node's actor: the only sender whose reports of it count
  /// It shares its GPUs with another job (space sharing): its rate is a co-located one, not
  /// a measurement of the job alone.
  bool shared = false;
};

/// scheduler -> job at a round's start: where the job runs this round, or that it is left out.
struct job_assignment {
  std::int64_t round = 0;                  ///< the round
  double start = 0;                        ///< its start, seconds after the run's start
  caf::actor_clock::time_point run_start;  ///< when the run started (finish times)
  std::vector<copy_piece> pieces;          ///< its parts by copy then rank; none: left out
  std::map<int, double> planned;           ///< per rank: GPU-seconds the plan gives it
  int type = -1;                           ///< live-cluster GPU type of copy 0, -1 if none
  std::uint64_t live_generation = 0;       ///< the live cluster `type` indexes
  bool paused = false;                     ///< every job waits for the checkpoint directory
};

/// A job as the scheduler sees it: the answer to view_atom, and pushed when its state changes.
/// What the policy's view (throughput per type from `measured`, steps, run time, attained
/// service, last type) and the dispatch (step, sync epoch, checkpoint book, measured rates)
/// need, and what clients are shown.
struct job_snapshot {
  std::int64_t id = 0;                 ///< job id
  job_state life = job_state::queued;  ///< actors/job_life.hpp
  /// As clients see it, without its placements: the scheduler keeps those from the
  /// assignments it sends (note_placement), so an assignment needs no push.
  job_status status;
  std::int64_t step = 0;                   ///< step of its latest checkpoint
  double run_time = 0;                     ///< seconds it held GPUs
  double gpu_seconds = 0;                  ///< GPUs x seconds it held (attained service)
  int last_type = -1;                      ///< live-cluster type of its last round, -1: none
  std::uint64_t live_generation = 0;       ///< the live cluster last_type indexes
  std::uint32_t sync_epoch = 0;            ///< its collectives' channel generation
  checkpoint_book book;                    ///< its confirmed checkpoints and fencing epoch
  std::map<std::string, double> measured;  ///< per GPU type: measured steps/s
};

/// A job's answer at the end of the run.
struct job_final {
  job_summary summary;       ///< how it ended
  checkpoint_book book;      ///< its checkpoints (the run's last stray files are removed by it)
  std::int64_t dropped = 0;  ///< reports it refused from actors not nodes of its round
};

/// job -> scheduler: a measured rate for the run's throughput model (run_rates::record).
struct rate_sample {
  int rank = 0;            ///< node
  std::string job_type;    ///< the job's type key
  int scale = 1;           ///< its scale factor
  int task_times = 1;      ///< task-times per step the node ran
  double steps_per_s = 0;  ///< measured
};

}  // namespace tessera::actors

// Messages between the scheduler and its job actors never cross a process.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::job_assignment)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::job_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::job_final)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tessera::actors::rate_sample)
