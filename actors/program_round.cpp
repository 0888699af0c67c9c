#include "actors/program_round.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "actors/auth.hpp"
#include "actors/program_average.hpp"
#include "actors/program_warm.hpp"
#include "runtime/core/detail/text.hpp"
#include "runtime/node/gpu/devices.hpp"
#include "runtime/node/program/process.hpp"
#include "runtime/node/train/checkpoint.hpp"

namespace tessera::actors {

namespace {

using clock_type = program_clock;

clock_type::duration secs(double s) { return program_seconds(s); }
double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Tasks this node runs of the order's copy (all K when the copy is not split).
int local_tasks(const start_copy& o) { return o.shards > 0 ? o.shards : o.scale; }

/// The round of one program copy on this node (see the header).
class program_run {
 public:
  program_run(copy_slot& slot, const program_context& ctx, double length, comm::aggregator* agg)
      : slot_(slot),
        o_(slot.order),
        ctx_(ctx),
        agg_(agg),
        t0_(clock_type::now()),
        deadline_(t0_ + secs(length)),
        out_(ctx.out ? *ctx.out : std::cout),
        err_(ctx.err ? *ctx.err : std::cerr) {}
  ~program_run() {
    for (auto& t : tasks_) ctx_.leases->remove(t.token);
  }

  bool start();
  void watch();
  void finish();
  /// After finish(): parks the processes for the next round (park()), or lets them go.
  void keep_or_let_go() {
    park();
    if (!tasks_.empty()) let_go(tasks_, ctx_.leases, std::min(5.0, o_.program.grace), out_, err_);
  }
  /// True when the copy's processes went on from the round before (a renewed lease).
  bool renewed() const { return renewed_; }

 private:
  void fail(const std::string& why, const task_proc* t);
  bool leads() const { return o_.shard_begin == 0; }
  std::int64_t lease_cap() const;
  /// A one-process lease lasts at least this long after hello: half a round (see start()).
  double min_lease_seconds() const { return 0.5 * seconds_between(t0_, deadline_); }
  /// When task view `v`'s lease runs out: the round's end, or later for a late hello.
  clock_type::time_point lease_end(const program::program_view& v) const {
    return v.lease_end ? *v.lease_end : deadline_;
  }
  void check_task(task_proc& t, clock_type::time_point now);
  bool lease_over(const program::program_view& v, clock_type::time_point now) const;
  void maybe_average();
  bool maybe_final_lease();
  std::string merge_with_copies(const std::shared_ptr<program::shared_floats>& mine,
                                std::int64_t steps, std::int32_t& copies, std::int64_t& step);
  void end_all();
  void refuse_silent_program();
  program::lease_terms terms_for(int i) const;
  bool adopt_warm();
  void park();
  bool checkpoint_due() const;
  /// Sets whether this round's leases end in a checkpoint (see checkpoint_due()).
  void plan_checkpoint() { checkpoint_due_ = checkpoint_due(); }

  copy_slot& slot_;
  const start_copy& o_;
  const program_context& ctx_;
  comm::aggregator* agg_;
  clock_type::time_point t0_, deadline_;
  std::ostream& out_;
  std::ostream& err_;
  std::vector<task_proc> tasks_;
  bool averaged_ = false;  ///< the copy's average is done (or given up)
  /// The first process's view when its lease was renewed as the job's last (0 steps, so the
  /// program completes): finish() adds its steps and times to the final lease's.
  std::optional<program::program_view> before_final_;
  std::int64_t merged_step_ = -1;  ///< the job's step after the merge (-1: no merge)
  bool renewed_ = false;           ///< the processes are the round before's (adopt_warm)
  /// The processes' last checkpoint: leases since, and when (new processes start from one).
  std::int32_t unsaved_leases_ = 0;
  clock_type::time_point saved_at_ = t0_;
  bool checkpoint_due_ = true;  ///< this round's leases end in a checkpoint
};

std::int64_t program_run::lease_cap() const {
  std::int64_t cap = std::max<std::int64_t>(0, o_.total_steps - o_.resume_step);
  if (o_.step_budget >= 0) cap = std::min(cap, o_.step_budget);
  if (o_.program.lease_steps >= 0) cap = std::min(cap, o_.program.lease_steps);
  return cap;
}

void program_run::fail(const std::string& why, const task_proc* t) {
  if (!slot_.error.empty()) return;
  slot_.program_failed = true;
  std::string text =
      "job " + std::to_string(o_.job) + " copy " + std::to_string(o_.copy) + ": its program " + why;
  if (t && t->proc) {
    const auto tail = t->proc->stderr_tail();
    if (!tail.empty()) text += "; the end of its stderr:\n" + tail;
  }
  slot_.error = text;
}

bool program_run::start() {
  std::error_code ec;
  std::filesystem::create_directories(o_.checkpoint_path, ec);
  if (ec) {
    slot_.checkpoint_error =
        "cannot make the checkpoint directory " + o_.checkpoint_path + ": " + ec.message();
    return false;
  }
  if (adopt_warm()) return true;
  unsaved_leases_ = 0;  // new processes start from the checkpoint (or from nothing)
  saved_at_ = t0_;
  plan_checkpoint();
  const int n = local_tasks(o_);
  const bool single = o_.scale == 1;
  for (int i = 0; i < n; ++i) {
    auto bytes = random_bytes(32);
    if (!bytes) {
      fail("could not be given a lease token: " + bytes.err().message, nullptr);
      return false;
    }
    task_proc t;
    t.token = to_hex(*bytes);
    t.lease = std::make_shared<program::lease_slot>(
        terms_for(i), single ? std::optional<clock_type::time_point>(deadline_) : std::nullopt,
        min_lease_seconds());
    program::process_spec spec;
    spec.mark = program::new_program_mark();
    t.lease->bind_to_mark(spec.mark);  // the token works for this process and its own only
    ctx_.leases->add(t.token, t.lease);
    spec.argv = o_.program.command;
    spec.workdir = o_.program.workdir;
    spec.env = program_environment(o_, i, ctx_, ctx_.leases->path());
    spec.env["TESSERA_LEASE_TOKEN"] = t.token;
    spec.prefix = "[job " + std::to_string(o_.job) + "." + std::to_string(o_.copy) + " rank " +
                  std::to_string(o_.shard_begin + i) + "] ";
    auto p = program::child_process::start(spec);
    if (!p) {
      ctx_.leases->remove(t.token);
      fail("could not start: " + p.err().message, nullptr);
      return false;
    }
    t.proc.emplace(std::move(*p));
    tasks_.push_back(std::move(t));
  }
  return true;
}

/// The terms of task `i`'s lease this round. Every lease may be renewed: a program whose hello
/// asks for it keeps its process across rounds while its assignment stays.
program::lease_terms program_run::terms_for(int i) const {
  program::lease_terms terms;
  terms.job = o_.job;
  terms.copy = o_.copy;
  terms.copies = static_cast<std::int32_t>(std::max<std::size_t>(1, o_.fork_ranks.size()));
  terms.step = o_.resume_step;
  terms.steps = lease_cap();
  terms.speed = ctx_.speed;
  terms.writer = o_.copy == 0 && o_.shard_begin + i == 0;
  terms.renewable = true;
  // Reaching the lease's step cap finishes the job: the program completes, nothing to renew.
  terms.ends_job = lease_cap() >= o_.total_steps - o_.resume_step;
  terms.checkpoint = checkpoint_due_;
  return terms;
}

/// Whether this round's leases end in a checkpoint: at the cadence of the job's
/// checkpoint_every (every so many leases, or at the lease end nearest each so many seconds
/// since the last one), and always for a forked copy, which merges with the others at every
/// lease's end (the merged state is what the next round starts from).
bool program_run::checkpoint_due() const {
  const auto& p = o_.program;
  if (o_.fork_ranks.size() > 1) return true;
  if (p.checkpoint_seconds > 0)
    return seconds_between(saved_at_, deadline_) + 0.5 * seconds_between(t0_, deadline_) >=
           p.checkpoint_seconds;
  return unsaved_leases_ + 1 >= std::max<std::int32_t>(1, p.checkpoint_rounds);
}

/// Renews the leases of the processes parked after the round before when this round's order
/// keeps them where they are (warm_program::continues); else lets them go (exit, reaped)
/// before new ones start. True when the round runs on the renewed processes.
bool program_run::adopt_warm() {
  auto warm = std::move(slot_.warm);
  if (!warm || !warm->continues(o_, ctx_.devices)) return false;  // `warm` lets them go
  unsaved_leases_ = warm->unsaved_leases;
  saved_at_ = warm->saved_at;
  plan_checkpoint();
  const auto deadline =
      o_.scale == 1 ? std::optional<clock_type::time_point>(deadline_) : std::nullopt;
  for (std::size_t i = 0; i < warm->tasks.size(); ++i)
    if (!warm->tasks[i].lease->renew(terms_for(static_cast<int>(i)), deadline, min_lease_seconds()))
      return false;  // its connection went: all go, and the round starts new processes
  tasks_ = std::move(warm->tasks);
  warm->tasks.clear();
  renewed_ = true;
  return true;
}

/// Keeps the copy's processes for the next round when each has sent `renew` (its checkpoint
/// written when this lease said so) and the round went well; the next round's order renews
/// or lets them go.
void program_run::park() {
  if (!slot_.error.empty() || slot_.finished || !all_parked(tasks_)) return;
  auto w = std::make_shared<warm_program>();
  w->tasks = std::move(tasks_);
  tasks_.clear();
  w->leases = ctx_.leases;
  w->order = o_;
  w->devices = ctx_.devices;
  w->step = slot_.end_step;
  w->unsaved_leases = checkpoint_due_ ? 0 : unsaved_leases_ + 1;
  w->saved_at = checkpoint_due_ ? clock_type::now() : saved_at_;
  w->out = ctx_.out;
  w->err = ctx_.err;
  slot_.warm = std::move(w);
}

bool program_run::lease_over(const program::program_view& v, clock_type::time_point now) const {
  if (v.final_report || v.complete) return true;
  if (o_.scale == 1 && now >= lease_end(v)) return true;
  return lease_cap() >= 0 && v.steps >= lease_cap() && v.said_hello;
}

/// Applies the grace rules to one task (see the header).
void program_run::check_task(task_proc& t, clock_type::time_point now) {
  const auto v = t.lease->view();
  const double grace = o_.program.grace;
  if (!v.protocol_error.empty()) return fail("broke the lease protocol: " + v.protocol_error, &t);
  if (t.proc->exited()) {
    if (!t.proc->succeeded())
      fail(t.proc->describe_exit() +
               (v.average_values > 0 && !v.average_answered
                    ? " while its 'average' of " + std::to_string(v.average_values) +
                          " float32 values waited for the other copies "
                          "(the others carry on)"
                    : std::string()),
           &t);
    return;
  }
  if (!v.said_hello) {
    if (seconds_between(t0_, now) > grace)
      fail("did not reach its lease within " + detail::format_shortest(grace) + " s", &t);
    return;
  }
  if (v.average_waiting || v.renew_waiting) return;  // it waits for the node
  if (lease_over(v, now)) {
    const bool by_time = o_.scale == 1 && !v.final_report && !v.complete && now >= lease_end(v);
    const auto end = by_time ? lease_end(v) : v.last_contact;
    if (seconds_between(end, now) > grace)
      fail("still ran " + detail::format_shortest(grace) + " s after its lease ended", &t);
    return;
  }
  if (seconds_between(v.last_contact, now) > grace)
    fail("sent nothing for " + detail::format_shortest(grace) + " s while its lease ran", &t);
}

void program_run::watch() {
  const bool sync = o_.fork_ranks.size() > 1;
  while (true) {
    bool running = false;
    for (auto& t : tasks_) {
      const bool live = t.proc->poll(tasks_.size() == 1 ? 20 : 5, out_, err_);
      running = (live && !t.lease->view().renew_waiting) || running;  // parked: its round is over
    }
    const auto now = clock_type::now();
    if (slot_.stop.load(std::memory_order_relaxed))
      for (auto& t : tasks_) t.lease->stop();
    if (slot_.abort.load(std::memory_order_relaxed)) fail("was ended: its node stops", nullptr);
    for (auto& t : tasks_) check_task(t, now);
    if (!slot_.error.empty()) break;
    maybe_average();
    if (maybe_final_lease()) running = true;  // the processes go on to complete
    if (!running) break;
  }
  // A forked copy's leader takes part in the merge even when its program failed or never
  // asked: the other copies wait for it in the collective. Not asking is a failure, unless
  // the program said its job is complete.
  if (sync && leads() && !averaged_) {
    if (slot_.error.empty() && !tasks_.empty() && !tasks_[0].lease->view().complete)
      fail("exited without calling average, and its job is forked", &tasks_[0]);
    std::int32_t copies = 0;
    std::int64_t step = 0;
    merge_with_copies(nullptr, 0, copies, step);
    averaged_ = true;
  }
  if (!slot_.error.empty()) end_all();
}

/// Answers the copy's average requests once every local process asked or exited; a forked
/// copy's leader merges with the other copies first, in its first process's shared buffer,
/// which the copy's other local processes then receive.
void program_run::maybe_average() {
  if (averaged_) return;
  bool any = false, all = true;
  for (auto& t : tasks_) {
    const auto v = t.lease->view();
    any = any || v.average_waiting;
    all = all && (v.average_waiting || t.proc->exited());
  }
  if (!any || !all) return;
  std::vector<std::size_t> sizes0;
  std::shared_ptr<program::shared_floats> first;
  const bool have_first = leads() && tasks_[0].lease->take_average(sizes0, first);
  std::int32_t copies = 1;
  const auto v0 = tasks_[0].lease->view();
  std::int64_t step = v0.own_step.value_or(o_.resume_step) + v0.steps;
  std::string refused;  // why this copy's processes get no mean ("" = they do)
  if (o_.fork_ranks.size() > 1 && leads())
    refused = merge_with_copies(have_first ? first : nullptr, v0.steps, copies, step);
  averaged_ = true;
  for (std::size_t i = 0; i < tasks_.size(); ++i) {
    std::vector<std::size_t> sizes;
    std::shared_ptr<program::shared_floats> mine;
    if (i == 0 && have_first) {
      sizes = sizes0, mine = first;
    } else if (!tasks_[i].lease->take_average(sizes, mine)) {
      continue;
    }
    if (!refused.empty()) {
      tasks_[i].lease->refuse_average(refused);
      continue;
    }
    // The copy's other local processes get its first process's buffers (the mean).
    if (i > 0 && first && mine && mine->size() == first->size())
      std::copy(first->data(), first->data() + first->size(), mine->data());
    tasks_[i].lease->answer_average(sizes, copies, step);
  }
  merged_step_ = step;
}

/// A warm copy whose processes all wait on `renew` with the job's step at its total (a forked
/// job's merge reached it, or a step budget did) gets a last lease of 0 steps instead: its
/// loop ends and the program completes (with its accuracy) rather than being let go.
bool program_run::maybe_final_lease() {
  if (before_final_ || tasks_.empty() || !slot_.error.empty()) return false;
  for (auto& t : tasks_)
    if (!t.lease->view().renew_waiting) return false;
  const auto v0 = tasks_[0].lease->view();
  const std::int64_t step =
      merged_step_ >= 0 ? merged_step_ : v0.own_step.value_or(o_.resume_step) + v0.steps;
  if (step < o_.total_steps) return false;
  before_final_ = v0;
  for (std::size_t i = 0; i < tasks_.size(); ++i) {
    auto terms = terms_for(static_cast<int>(i));
    terms.step = step;
    terms.steps = 0;
    terms.renewable = false;
    terms.ends_job = true;
    tasks_[i].lease->renew(terms, std::nullopt, 0);
  }
  return true;
}

/// The forked copies' merge (actors/program_average.hpp), in place in `mine` (null: this
/// copy's program did not ask). Sets the copies in the mean and the job's step after it;
/// returns why this copy's processes get no mean ("" = they get it).
std::string program_run::merge_with_copies(const std::shared_ptr<program::shared_floats>& mine,
                                           std::int64_t steps, std::int32_t& copies,
                                           std::int64_t& step) {
  if (!agg_) {
    fail("is forked but this node has no aggregator (that needs the MPI launch)", nullptr);
    return slot_.error;
  }
  comm::group leaders(o_.fork_ranks.begin(), o_.fork_ranks.end());
  std::sort(leaders.begin(), leaders.end());
  comm::reduce_options opt;
  opt.channel = o_.channel;
  // A copy whose program failed early comes at once: it waits for the others' leases too.
  const double others = std::max(0.0, seconds_between(clock_type::now(), deadline_));
  opt.timeout = std::chrono::milliseconds(
      static_cast<long>((others + o_.aggregate_timeout + o_.program.grace) * 1000));
  const copy_offer me{o_.copy, mine != nullptr, steps, mine ? mine->size() : 0};
  auto merged =
      merge_copies(*agg_, leaders, me, mine ? mine->data() : nullptr, mine, o_.merge, o_.job, opt);
  if (!merged) {
    slot_.retry = true;
    if (slot_.error.empty()) slot_.error = merged.err().message;
    return merged.err().message;
  }
  copies = merged->copies;
  step = (tasks_.empty() ? o_.resume_step
                         : tasks_[0].lease->view().own_step.value_or(o_.resume_step)) +
         merged->steps;
  if (!merged->left_out.empty()) fail(merged->left_out, nullptr);
  return merged->left_out;
}

/// Ends every process group of the copy on this node: SIGTERM, SIGKILL after at most 5 s.
void program_run::end_all() { end_groups(tasks_, std::min(5.0, o_.program.grace), out_, err_); }

/// A program that exited 0 without a word to its node (a script written for torchrun, say)
/// would be started again every round for ever: the job fails now, naming the client it needs
/// (not a restart: running it again changes nothing).
void program_run::refuse_silent_program() {
  slot_.retry = false;
  slot_.program_failed = false;
  slot_.end_step = o_.resume_step;
  slot_.error = "job " + std::to_string(o_.job) + " copy " + std::to_string(o_.copy) +
                ": its program exited 0 without a word to its node (no hello on TESSERA_LEASE), "
                "so the node cannot tell its steps or when it should stop, and it would be "
                "started again every round. A job of kind \"program\" trains through the tessera "
                "client: Python `from tessera_client import Lease` (clients/python), C++ "
                "clients/cpp/tessera_client.hpp; docs/lease-protocol.md";
}

void program_run::finish() {
  // Anything still in a process group (a program's own children) goes with it, but for a
  // process waiting on its renew (park() keeps it, or finish_round lets it go).
  for (auto& t : tasks_)
    if (t.proc && t.proc->group_alive() && !t.lease->view().renew_waiting)
      t.proc->kill_and_reap(out_, err_);
  if (tasks_.empty()) return;
  auto v = tasks_[0].lease->view();
  if (before_final_) {  // the round's steps and times were the lease before the final one
    v.steps += before_final_->steps;
    v.own_step = before_final_->own_step;
    v.hello_at = before_final_->hello_at;
    v.last_contact = before_final_->last_contact;
  }
  if (v.said_hello) slot_.startup_seconds = seconds_between(t0_, v.hello_at);
  const std::int64_t from = v.own_step.value_or(o_.resume_step);
  slot_.start_step = from;
  slot_.steps = v.steps;
  slot_.end_step = merged_step_ >= 0 ? merged_step_ : from + v.steps;
  if (v.loss) slot_.loss = *v.loss;
  if (!slot_.error.empty()) {
    slot_.end_step = o_.resume_step;
    return;
  }
  if (!v.said_hello) return refuse_silent_program();
  slot_.finished = v.complete || slot_.end_step >= o_.total_steps;
  if (v.accuracy) slot_.accuracy = *v.accuracy;
  const bool writer = o_.copy == 0 && leads();
  if (writer && !o_.fence_path.empty())
    if (auto st = train::check_fence(o_.fence_path, o_.epoch); !st) {
      slot_.fenced = true;
      slot_.retry = true;
      slot_.error = st.err().message;
      return;
    }
  slot_.checkpointed = writer;
  const double ran = seconds_between(v.hello_at, v.last_contact);
  if (ran > 0 && v.steps > 0) {
    const double rate = v.steps / ran;
    slot_.ema_throughput =
        slot_.ema_throughput > 0 ? 0.5 * slot_.ema_throughput + 0.5 * rate : rate;
  }
}

}  // namespace

std::map<std::string, std::string> program_environment(const start_copy& o, int local,
                                                       const program_context& ctx,
                                                       const std::string& socket_path) {
  std::map<std::string, std::string> env = o.program.env;
  const int n = local_tasks(o);
  env["RANK"] = std::to_string(o.shard_begin + local);
  env["WORLD_SIZE"] = std::to_string(o.scale);
  env["LOCAL_RANK"] = std::to_string(local);
  env["LOCAL_WORLD_SIZE"] = std::to_string(n);
  env["MASTER_ADDR"] = o.program.master_addr.empty() ? "127.0.0.1" : o.program.master_addr;
  env["MASTER_PORT"] = std::to_string(o.program.master_port);
  std::vector<int> mine;
  if (!ctx.devices.empty())
    mine.push_back(ctx.devices[static_cast<std::size_t>(local) % ctx.devices.size()]);
  env["CUDA_VISIBLE_DEVICES"] = gpu::visible_devices(mine, ctx.node_visible);
  env["TESSERA_JOB_ID"] = std::to_string(o.job);
  env["TESSERA_COPY"] = std::to_string(o.copy);
  env["TESSERA_COPIES"] = std::to_string(std::max<std::size_t>(1, o.fork_ranks.size()));
  env["TESSERA_CHECKPOINT_DIR"] = o.checkpoint_path;
  env["TESSERA_LEASE"] = socket_path;
  return env;
}

void run_program_round(copy_slot& slot, const program_context& ctx, double length,
                       const std::function<void(std::int64_t)>& on_started, comm::aggregator* agg) {
  const auto t0 = clock_type::now();
  slot.steps = 0;
  slot.finished = slot.reached_target = slot.checkpointed = slot.fenced = slot.retry = false;
  slot.program_failed = false;
  slot.renewed = false;
  slot.startup_seconds = 0;
  slot.checkpoint_error.clear();
  slot.error.clear();
  slot.bad_files.clear();
  slot.source_why.clear();
  slot.start_step = slot.end_step = slot.order.resume_step;
  slot.source = slot.order.resume_step > 0 ? state_source::resume : state_source::fresh;
  if (!ctx.leases) {
    slot.error = "job " + std::to_string(slot.order.job) +
                 " is a program but this node has no "
                 "lease socket";
  } else {
    program_run run(slot, ctx, length, agg);
    if (run.start()) {
      if (on_started) on_started(slot.order.resume_step);
      run.watch();
    } else {
      run.watch();  // ends what did start, takes part in a fork's merge
    }
    run.finish();
    run.keep_or_let_go();
    slot.renewed = run.renewed();
  }
  slot.busy_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
}

}  // namespace tessera::actors
