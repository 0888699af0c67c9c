#include "actors/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "actors/task_layout.hpp"

namespace tessera::actors {

namespace {

/// One node's part of a copy as ordered: its rank and its layout part.
struct node_part {
  int rank;
  copy_part part;
};

/// Per job copy: the tightest step budget of its assignments (-1 = none).
std::map<copy_id, double> copy_budgets(const round_plan& p) {
  std::map<copy_id, double> budget;
  for (const auto& as : p.assignments) {
    auto [b, fresh] = budget.emplace(as.id(), as.step_budget);
    if (!fresh && as.step_budget >= 0)
      b->second = b->second < 0 ? as.step_budget : std::min(b->second, as.step_budget);
  }
  return budget;
}

/// Checks the copy rules of one job: numbered 0..n-1, forks only with aggregators and on
/// distinct nodes.
status check_copies(std::int64_t id, const std::vector<const copy_layout*>& copies,
                    const dispatch_context& ctx, const std::string& policy_name) {
  std::set<int> ranks;
  std::size_t parts = 0;
  for (std::size_t c = 0; c < copies.size(); ++c) {
    if (copies[c]->copy != static_cast<int>(c))
      return error{error_kind::internal,
                   "policy " + policy_name + " gave job " + std::to_string(id) +
                       " copies that are not numbered 0.." + std::to_string(copies.size() - 1)};
    for (const auto& part : copies[c]->parts) {
      ranks.insert(ctx.live_ranks[part.server]);
      ++parts;
    }
  }
  if (copies.size() > 1 && (!ctx.can_sync || ranks.size() != parts))
    return error{error_kind::internal,
                 "policy " + policy_name + " forked job " + std::to_string(id) +
                     (ctx.can_sync ? " into copies sharing a node"
                                   : " but this launch cannot merge copies (use mpirun)")};
  return {};
}

/// The parts of one copy by rank, shards renumbered in rank order. Without aggregators the
/// first part's node runs all K tasks on the copy's GPUs.
std::vector<node_part> copy_parts(const copy_layout& l, int k, const dispatch_context& ctx) {
  std::vector<node_part> run;
  int gpus = 0;
  for (const auto& part : l.parts) {
    gpus += part.gpus;
    if (part.tasks > 0) run.push_back({ctx.live_ranks[part.server], part});
  }
  std::sort(run.begin(), run.end(),
            [](const node_part& a, const node_part& b) { return a.rank < b.rank; });
  int next = 0;
  for (auto& r : run) {
    r.part.shard_begin = next;
    next += r.part.tasks;
  }
  if (!ctx.can_sync && run.size() > 1) {
    run.resize(1);
    run[0].part = copy_part{run[0].part.server, gpus, k, 0, 1};
  }
  return run;
}

/// The order of one part: what every part of the job shares, then this part's own fields.
start_copy part_order(const dispatch_job& j, int copy, int copies, const node_part& np,
                      const std::vector<std::int32_t>& part_ranks, double budget) {
  const run_job& rj = *j.spec;
  start_copy o;
  o.job = rj.spec.id;
  o.copy = copy;
  o.kind = rj.kind;
  o.seed = rj.seed;
  o.config = rj.config;
  o.scale = rj.spec.scale_factor;
  o.gpus = np.part.gpus;
  o.total_steps = static_cast<std::int64_t>(rj.spec.total_steps);
  o.resume_step = j.step;
  o.step_budget = budget < 0 ? -1 : static_cast<std::int64_t>(std::ceil(budget));
  if (copies > 1) {
    const std::int64_t remaining = o.total_steps - j.step;
    const std::int64_t share = (remaining + copies - 1) / copies;
    o.step_budget = o.step_budget < 0 ? share : std::min(o.step_budget, share);
  }
  o.part_ranks = part_ranks;
  o.shard_begin = np.part.shard_begin;
  o.shards = np.part.tasks;
  o.task_times = np.part.task_times;
  o.channel = (static_cast<std::uint64_t>(rj.spec.id) << 20) ^ j.sync_epoch;
  o.step_time = rj.step_time;
  o.target_loss = rj.target_loss;
  o.merge = train::to_string(rj.merge);
  return o;
}

/// Where the order's copy finds its state and writes the round's checkpoint (the job's book).
void set_checkpoints(start_copy& o, const dispatch_job& j, const dispatch_context& ctx) {
  o.checkpoint_path = checkpoint_file_path(ctx.checkpoint_dir, o.job, ctx.round);
  o.fence_path = fence_file_path(ctx.checkpoint_dir, o.job);
  if (!j.book) return;
  o.epoch = j.book->epoch();
  o.resume_step = j.book->step();
  if (const auto* r = j.book->resume()) o.resume_path = r->path;
  if (const auto* f = j.book->fallback()) {
    o.fallback_path = f->path;
    o.fallback_step = f->step;
  }
}

/// Seconds one step of a part takes: measured on its GPU type when known, else planned.
double part_step_seconds(const dispatch_job& j, const node_part& np, const dispatch_context& ctx) {
  const auto& srv = ctx.configured->servers[np.rank];
  if (j.measured) {
    auto it = j.measured->find(srv.gpu_type);
    if (it != j.measured->end() && it->second > 0) return np.part.task_times / it->second;
  }
  return np.part.task_times * j.spec->step_time / srv.speed;
}

/// The program fields of the order of one part of copy `copy` (whose parts are `run`).
void set_program(start_copy& o, const dispatch_job& j, const std::vector<node_part>& run,
                 const dispatch_context& ctx) {
  const auto& p = j.spec->program;
  o.checkpoint_path = program_checkpoint_dir(ctx.checkpoint_dir, o.job);
  o.resume_step = j.step;  // the program's own files: the book holds none of them
  o.resume_path = o.fallback_path = "";
  o.fallback_step = 0;
  o.program.command = p.command;
  o.program.workdir = p.workdir;
  o.program.env = p.env;
  o.program.grace = p.grace_seconds;
  o.program.checkpoint_rounds = p.checkpoint_every.rounds;
  o.program.checkpoint_seconds = p.checkpoint_every.seconds;
  if (o.scale > 1) {
    double slowest = 0;
    for (const auto& np : run) slowest = std::max(slowest, part_step_seconds(j, np, ctx));
    o.program.lease_steps =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(ctx.round_length / slowest));
  }
  const auto leader = static_cast<std::size_t>(run.front().rank);
  if (leader < ctx.hosts.size()) o.program.master_addr = ctx.hosts[leader];
  const auto spread = static_cast<std::uint64_t>(o.job) * 1000003u +
                      static_cast<std::uint64_t>(o.copy) * 7919u +
                      static_cast<std::uint64_t>(ctx.round);
  o.program.master_port = ctx.master_port_base + static_cast<int>(spread % 4096u);
}

/// The speed share of every job in a pair of `p` (its co-located rate over its solo rate on
/// the pair's GPUs), or an error naming the policy when the rate model has no entry.
result<std::map<job_id, double>> pair_shares(
    const round_plan& p, const dispatch_context& ctx,
    const std::function<const dispatch_job*(std::int64_t)>& job_of,
    const std::string& policy_name) {
  std::map<job_id, double> out;
  for (const auto& as : p.assignments) {
    if (as.partner < 0) continue;
    const auto* a = job_of(as.job);
    const auto* b = job_of(as.partner);
    if (!a || !b) continue;
    const auto& ta = a->spec->spec.job_type;
    const int k = a->spec->spec.scale_factor;
    const auto pair = ctx.rates
                          ? ctx.rates->colocated_rate(ta, b->spec->spec.job_type, k, as.shares)
                          : std::nullopt;
    const double solo = ctx.rates ? ctx.rates->rate(ta, as.shares) : 0;
    if (!pair || !(solo > 0))
      return error{error_kind::internal,
                   "policy " + policy_name + " pairs jobs " + std::to_string(as.job) + " and " +
                       std::to_string(as.partner) + " without a co-location rate"};
    out[as.job] = std::min(1.0, pair->first / solo);
  }
  return out;
}

/// Adds the orders of one job's copies to `orders`; `shares` holds the speed share of each
/// job in a pair.
void dispatch_job_copies(const dispatch_job& j, const std::vector<const copy_layout*>& copies,
                         const std::map<copy_id, double>& budget,
                         const std::map<job_id, double>& shares, const dispatch_context& ctx,
                         std::map<int, round_orders>& orders) {
  const int n = static_cast<int>(copies.size());
  const int k = j.spec->spec.scale_factor;
  std::vector<std::vector<node_part>> runs;
  for (const auto* l : copies) runs.push_back(copy_parts(*l, k, ctx));
  std::vector<std::int32_t> leaders;
  if (n > 1)
    for (const auto& r : runs) leaders.push_back(r.front().rank);
  const auto paired = shares.find(j.spec->spec.id);
  const double share = paired == shares.end() ? 1.0 : paired->second;
  double longest_step = 0;  // the slowest part bounds every collective's wait
  for (const auto& r : runs)
    for (const auto& np : r)
      longest_step = std::max(longest_step, np.part.task_times * j.spec->step_time /
                                                (ctx.configured->servers[np.rank].speed * share));
  for (int c = 0; c < n; ++c) {
    std::vector<std::int32_t> part_ranks;
    if (runs[c].size() > 1)
      for (const auto& np : runs[c]) part_ranks.push_back(np.rank);
    for (const auto& np : runs[c]) {
      start_copy o = part_order(j, c, n, np, part_ranks, budget.at({j.spec->spec.id, c}));
      if (n > 1) o.fork_ranks = leaders;
      if (paired != shares.end()) {
        o.partner = copies[c]->partner;
        o.speed_share = share;
      }
      o.aggregate_timeout = std::max(1.0, ctx.report_grace / 2) + longest_step;
      set_checkpoints(o, j, ctx);
      if (j.spec->is_program()) set_program(o, j, runs[c], ctx);
      orders[np.rank].copies.push_back(std::move(o));
    }
  }
}

}  // namespace

result<std::map<int, round_orders>> dispatch_plan(
    const round_plan& p, const dispatch_context& ctx,
    const std::function<const dispatch_job*(std::int64_t)>& job_of,
    const std::string& policy_name) {
  std::map<int, round_orders> orders;
  for (int r : ctx.live_ranks) {
    orders[r].round = ctx.round;
    orders[r].length = ctx.round_length;
  }
  const auto layouts = layout_copies(p, [&](job_id id) {
    const auto* j = job_of(id);
    return j ? j->spec->spec.scale_factor : 1;
  });
  std::map<std::int64_t, std::vector<const copy_layout*>> by_job;
  for (const auto& l : layouts)
    if (job_of(l.job)) by_job[l.job].push_back(&l);
  for (auto& [id, copies] : by_job) {
    std::sort(copies.begin(), copies.end(),
              [](const copy_layout* a, const copy_layout* b) { return a->copy < b->copy; });
    if (auto st = check_copies(id, copies, ctx, policy_name); !st) return st.err();
  }
  const auto budget = copy_budgets(p);
  const auto shares = pair_shares(p, ctx, job_of, policy_name);
  if (!shares) return shares.err();
  for (const auto& [id, copies] : by_job)
    dispatch_job_copies(*job_of(id), copies, budget, *shares, ctx, orders);
  return orders;
}

}  // namespace tessera::actors
