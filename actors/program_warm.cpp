#include "actors/program_warm.hpp"

#include <algorithm>
#include <csignal>
#include <iostream>

#include "actors/program_round.hpp"

namespace tessera::actors {

void wait_for_exits(std::vector<task_proc>& tasks, double seconds, std::ostream& out,
                    std::ostream& err) {
  const auto until = program_clock::now() + program_seconds(seconds);
  bool running = true;
  while (running && program_clock::now() < until) {
    running = false;
    for (auto& t : tasks)
      if (t.proc) running = t.proc->poll(20, out, err) || running;
  }
}

void end_groups(std::vector<task_proc>& tasks, double seconds, std::ostream& out,
                std::ostream& err) {
  for (auto& t : tasks)
    if (t.proc) t.proc->signal_group(SIGTERM);
  wait_for_exits(tasks, seconds, out, err);
  for (auto& t : tasks)
    if (t.proc) t.proc->kill_and_reap(out, err);
}

void let_go(std::vector<task_proc>& tasks, program::lease_server* leases, double wait,
            std::ostream& out, std::ostream& err) {
  for (auto& t : tasks) t.lease->release();
  wait_for_exits(tasks, wait, out, err);
  end_groups(tasks, 5, out, err);
  for (auto& t : tasks)
    if (leases) leases->remove(t.token);
  tasks.clear();
}

bool all_parked(const std::vector<task_proc>& tasks) {
  for (const auto& t : tasks) {
    const auto v = t.lease->view();
    if (!t.proc || t.proc->exited() || !v.renew_waiting || v.closed) return false;
  }
  return !tasks.empty();
}

warm_program::~warm_program() {
  const double wait = unsaved_leases > 0 ? order.program.grace : std::min(5.0, order.program.grace);
  let_go(tasks, leases, wait, out ? *out : std::cout, err ? *err : std::cerr);
}

bool warm_program::continues(const start_copy& o, const std::vector<int>& devs) const {
  const auto& a = order;
  const bool same =
      a.job == o.job && a.copy == o.copy && a.scale == o.scale && a.shards == o.shards &&
      a.shard_begin == o.shard_begin && a.part_ranks == o.part_ranks &&
      a.fork_ranks.size() == o.fork_ranks.size() && a.checkpoint_path == o.checkpoint_path &&
      a.program.command == o.program.command && a.program.workdir == o.program.workdir &&
      a.program.env == o.program.env && a.program.master_addr == o.program.master_addr &&
      devices == devs && step == o.resume_step;
  return same && all_parked(tasks);
}

bool warm_unsaved(const copy_slot& slot) { return slot.warm && slot.warm->unsaved_leases > 0; }

bool warm_continues(const copy_slot& slot, const start_copy& o, const std::vector<int>& devices) {
  return slot.warm && slot.warm->continues(o, devices);
}

}  // namespace tessera::actors
