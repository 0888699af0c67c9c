#pragma once
/// @file tessera_client.hpp
/// Header-only C++17 client of tessera's lease channel (protocol version 1,
/// docs/lease-protocol.md): a user's own training program runs as an elastic tessera job.
/// POSIX sockets and the standard library only.
///
///     tessera_client::lease lease(own_step);      // hello to the node (TESSERA_LEASE)
///     while (step < total && lease.next()) {      // false once the lease has expired
///       train_one_step(step++);
///       lease.report(loss);                       // optional: the latest loss
///     }
///     if (lease.expired()) save_checkpoint();     // writer only; average() first if forked
///     else lease.complete(loss);                  // the job is finished; then exit 0
///
/// `next()` is called before every step: it counts the previous step as made, paces it on a
/// node declared slow (after a step of d seconds it sleeps d x (1/speed - 1)), reports the
/// steps made to the node at most every 0.2 s and on the last step, and returns false when
/// the lease's step cap is reached or its time is up. `should_checkpoint()` is true during the
/// lease's last step: the one after which the cap is reached, or after which another step (at
/// the moving average of the step time) would not end before the deadline. A node may shorten
/// a lease in a reply (the job was stopped), so the loop can end with no step flagged:
/// checkpoint after the loop when `expired()`, as above.
///
/// Outside tessera (TESSERA_LEASE unset) a lease is a pass-through: `next()` is always true,
/// it never expires, `average` leaves the buffers as they are, `report`/`complete` do nothing.
///
/// Errors: a node's `error` reply, a broken channel or a malformed reply throw `lease_error`
/// (let it end the program with a non-zero exit: the job restarts from its last checkpoint).
/// A node's `exit` reply ends the lease as an expiry; `average` then leaves the buffers as they
/// are (copies = 1) and `complete` does nothing, so the program checkpoints and exits 0. Not
/// thread-safe: one lease per process, used by one thread.
///
/// This header includes its parts from the tessera_client/ folder beside it (the JSON of the
/// protocol, `average`'s shared memory, the socket channel): a copy takes the folder
/// too.

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// The parts, relative to this header: keep the tessera_client/ folder beside it.
#include "tessera_client/channel.hpp"
#include "tessera_client/json.hpp"
#include "tessera_client/lease_error.hpp"
#include "tessera_client/shared_memory.hpp"

namespace tessera_client {

/// What `lease::average` tells besides the means it writes into the buffers.
struct averaged {
  std::int64_t step = 0;  ///< the job's step after the merge: store it in the checkpoint
  int copies = 1;         ///< how many copies the mean is over
};

namespace detail {

inline std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace detail

/// The lease of one program process (see the file's comment for the loop).
class lease {
 public:
  using clock = std::chrono::steady_clock;
  /// Called at every next() of a copy of several processes with {stop, last} (0 or 1); must
  /// return the element-wise maximum over the copy's processes (an all-reduce with MAX), so
  /// they all take the same number of steps. Not called when standalone.
  using agree_fn = std::function<std::array<int, 2>(std::array<int, 2>)>;

  /// Reads the environment; inside tessera connects and says hello, with `own_step` (the step
  /// the program's own checkpoint is at) when given. `renew`: a warm lease (the process lives
  /// on across rounds while the job stays put; it must checkpoint, and average when forked,
  /// while should_checkpoint() is true, inside its loop: docs/lease-protocol.md).
  explicit lease(std::optional<std::int64_t> own_step = std::nullopt, agree_fn agree = {},
                 bool renew = false)
      : agree_(std::move(agree)), own_step_(own_step), renew_(renew) {
    std::string path = detail::env("TESSERA_LEASE");
    if (path.empty()) {
      standalone_terms();
      return;
    }
    std::string token = detail::env("TESSERA_LEASE_TOKEN");
    if (token.empty()) throw lease_error("TESSERA_LEASE is set but TESSERA_LEASE_TOKEN is not");
    channel_.emplace(path);
    detail::json_writer w("hello");
    w.field("token", token).field("pid", std::int64_t(::getpid()));
    if (own_step) w.field("step", *own_step);
    if (renew_) w.field("renew", true);
    auto sent = clock::now();
    apply(channel_->request("hello", w.line()), sent, true);
    last_report_ = clock::now();
  }
  /// Sends a last report if steps went unreported (best effort), closes the channel.
  ~lease() {
    try {
      close();
    } catch (...) {
    }
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;

  /// Call before every step: true = make one more step, false = the lease has ended.
  bool next() {
    finish_step();
    for (;;) {
      step_started_ = clock::now();
      bool stop = !may_step();
      bool last = !stop && is_last();
      if (agree_ && connected()) {
        auto both = agree_({stop ? 1 : 0, last ? 1 : 0});
        stop = both[0] != 0;
        last = both[1] != 0;
      }
      if (stop && ending_ && renew_lease()) continue;  // the same process, the next lease
      if (stop) {
        end_lease();
        return false;
      }
      last_ = last;
      in_step_ = true;
      return true;
    }
  }

  /// The current step is the lease's last and the node wants a checkpoint at its end (under a
  /// warm lease it may say not yet; then, told exit, the program saves after its loop).
  bool should_checkpoint() const {
    return last_ && (checkpoint_ || !renewable_ || (ends_job_ && cap_ >= 0 && cap_ <= made_ + 1));
  }
  bool expired() const { return expired_; }  ///< the lease (not the program) ended the loop
  bool standalone() const { return !channel_ && !exited_; }  ///< outside tessera
  std::int64_t job() const { return job_; }  ///< job id (-1 standalone without TESSERA_JOB_ID)
  int copy() const { return copy_; }
  int copies() const { return copies_; }  ///< > 1: forked, average at the lease end
  /// The job's step at the lease start (the own step passed to the constructor, if any).
  std::int64_t step() const { return step_; }
  bool writer() const { return writer_; }  ///< this process writes the checkpoint
  double speed() const { return speed_; }
  /// Steps made since the lease began, the one in progress included (after the loop left by
  /// its own condition or a break, it counts the step the loop left in).
  std::int64_t steps_made() const { return made_ + (in_step_ ? 1 : 0); }
  /// The job's step after the step in progress: step() + steps_made() (after average(), the
  /// merged step). What a checkpoint records; steps_made() counts from the latest renewal.
  std::int64_t position() const { return step_ + steps_made(); }
  std::int64_t renewals() const { return renewals_; }  ///< leases renewed in place so far
  /// TESSERA_CHECKPOINT_DIR ("" when unset).
  std::string checkpoint_dir() const { return detail::env("TESSERA_CHECKPOINT_DIR"); }

  /// Records the latest loss; sends a report now when the last one is 0.2 s old (call it
  /// during long work outside the loop: the node kills a program silent for its grace).
  void report(std::optional<double> loss = std::nullopt) {
    if (loss) loss_ = loss;
    if (connected() && clock::now() - last_report_ >= report_interval) send_report(final_sent_);
  }

  /// Averages `buffers` with the job's other copies, in place (their float32 values go to the
  /// node in shared memory, not through the socket); blocks until the node answers.
  /// Standalone or after `exit`: leaves them as they are (step: start + steps made, copies 1).
  averaged average(std::vector<std::vector<float>>& buffers) {
    finish_step();
    if (!channel_) return {step_ + made_, 1};  // standalone or after exit (closed: throws below)
    std::vector<std::int64_t> sizes;
    std::size_t total = 0;
    for (const auto& b : buffers) {
      sizes.push_back(std::int64_t(b.size()));
      total += b.size();
    }
    detail::shared_floats shared(total);
    std::size_t at = 0;
    for (const auto& b : buffers) {
      if (!b.empty()) std::memcpy(shared.data() + at, b.data(), b.size() * sizeof(float));
      at += b.size();
    }
    detail::json_writer w("average");
    w.field("sizes", sizes);
    detail::json reply = channel_->request("average", w.line(), shared.fd());
    const detail::json* op = reply.get("op");
    const detail::json* rs = reply.get("sizes");
    bool same = op->str == "averaged" && rs && rs->k == detail::json::kind::array &&
                rs->items.size() == sizes.size();
    for (std::size_t k = 0; same && k < sizes.size(); ++k)
      same = rs->items[k].k == detail::json::kind::number && rs->items[k].num == double(sizes[k]);
    if (!same) {
      channel_->close();
      throw lease_error("the node answered 'average' with a malformed '" + op->str + "' reply");
    }
    at = 0;
    for (auto& b : buffers) {
      if (!b.empty()) std::memcpy(b.data(), shared.data() + at, b.size() * sizeof(float));
      at += b.size();
    }
    const averaged out{detail::int_field(reply, "step", 0),
                       static_cast<int>(detail::int_field(reply, "copies", 1))};
    step_ = out.step - made_;  // so that position() is the merged step
    return out;
  }

  /// Tells the node the job is finished (then exit 0). Nothing standalone or after `exit`.
  void complete(std::optional<double> loss = std::nullopt,
                std::optional<double> accuracy = std::nullopt) {
    finish_step();
    if (!channel_) return;  // standalone or after exit (a closed channel throws below)
    detail::json_writer w("complete");
    w.field("steps", made_).field("loss", loss ? loss : loss_).field("accuracy", accuracy);
    detail::json reply = channel_->request("complete", w.line());
    bool ok = reply.get("op")->str == "exit";
    channel_.reset();
    exited_ = true;
    if (!ok) throw lease_error("the node answered 'complete' with '" + reply.get("op")->str + "'");
  }

  /// Counts the step in progress, sends a last report if steps went unreported, closes the
  /// channel. For a program that leaves its loop early and exits without complete().
  void close() {
    finish_step();
    if (connected() && made_ != reported_) send_report(true);
    if (channel_) channel_->close();
  }

 private:
  static constexpr std::chrono::milliseconds report_interval{200};
  static constexpr double ewma = 0.25;  // weight of the newest step in the step-time average

  bool connected() const { return channel_.has_value() && channel_->open(); }

  bool may_step() const {
    if (expired_ || ending_) return false;
    if (!connected()) return !channel_;  // standalone: always; a closed channel: never
    if (cap_ >= 0 && made_ >= cap_) return false;
    return !deadline_ || clock::now() < *deadline_;
  }
  bool is_last() const {
    if (!connected()) return false;
    if (cap_ >= 0 && made_ + 1 >= cap_) return true;
    if (!deadline_ || step_time_ < 0) return false;
    return clock::now() + 2 * std::chrono::duration<double>(step_time_) >= *deadline_;
  }
  void finish_step() {
    if (!in_step_) return;
    in_step_ = false;
    ++made_;
    if (!connected()) return;
    std::chrono::duration<double> took = clock::now() - step_started_;
    if (speed_ > 0 && speed_ < 1) std::this_thread::sleep_for(took * (1 / speed_ - 1));
    took = clock::now() - step_started_;
    step_time_ = step_time_ < 0 ? took.count() : (1 - ewma) * step_time_ + ewma * took.count();
    if (last_ && renewable_ && !(ends_job_ && cap_ >= 0 && made_ >= cap_)) {
      ending_ = true;                              // next() asks for the next lease
      if (made_ != reported_) send_report(false);  // exact steps before an average
    } else if (last_) {
      end_lease();
    } else if (clock::now() - last_report_ >= report_interval)
      send_report(false);
  }
  /// Asks for the next lease (blocks until the job's next round is decided): true = renewed,
  /// steps counted afresh; false = the node said exit.
  bool renew_lease() {
    ending_ = false;
    if (!connected()) return false;
    detail::json_writer w("renew");
    w.field("steps", made_).field("loss", loss_);
    detail::json reply = channel_->request("renew", w.line());
    apply(reply, clock::now(), false);  // its seconds run from the answer
    if (exited_) return false;
    step_ = detail::int_field(reply, "step", 0);
    made_ = reported_ = 0;
    final_sent_ = last_ = false;
    ++renewals_;
    last_report_ = clock::now();
    return true;
  }
  void end_lease() {
    expired_ = true;
    if (connected() && !final_sent_) send_report(true);
  }
  void send_report(bool final) {
    detail::json_writer w("report");
    w.field("steps", made_).field("loss", loss_);
    if (final) w.field("final", true);
    auto sent = clock::now();
    detail::json reply = channel_->request("report", w.line());
    last_report_ = clock::now();
    reported_ = made_;
    final_sent_ = final_sent_ || final;
    apply(reply, sent, false);
  }
  void standalone_terms() {
    std::string job = detail::env("TESSERA_JOB_ID"), copy = detail::env("TESSERA_COPY"),
                copies = detail::env("TESSERA_COPIES"), rank = detail::env("RANK");
    job_ = job.empty() ? -1 : std::atoll(job.c_str());
    copy_ = copy.empty() ? 0 : std::atoi(copy.c_str());
    copies_ = copies.empty() ? 1 : std::atoi(copies.c_str());
    step_ = own_step_.value_or(0);
    writer_ = rank.empty() || rank == "0";
    speed_ = 1;
    cap_ = -1;
    deadline_.reset();
  }
  /// Takes the terms of a `lease` reply (its request sent at `sent`), or the end for `exit`.
  void apply(const detail::json& reply, clock::time_point sent, bool first) {
    const std::string& op = reply.get("op")->str;
    if (op == "exit") {
      channel_.reset();
      exited_ = expired_ = true;
      if (first) standalone_terms();
      return;
    }
    if (op != "lease") {
      channel_->close();
      throw lease_error("the node answered with '" + op + "' where a 'lease' was due");
    }
    job_ = detail::int_field(reply, "job", 0);
    copy_ = static_cast<int>(detail::int_field(reply, "copy", 0));
    copies_ = static_cast<int>(detail::int_field(reply, "copies", 1));
    if (first) step_ = own_step_ ? *own_step_ : detail::int_field(reply, "step", 0);
    const detail::json* w = reply.get("writer");
    if (!w || w->k != detail::json::kind::boolean)
      throw lease_error("the node's reply has no valid 'writer'");
    writer_ = w->b;
    cap_ = detail::int_field(reply, "steps", -1);
    double seconds = detail::number_field(reply, "seconds");
    deadline_.reset();
    if (seconds >= 0)
      deadline_ = sent + std::chrono::duration_cast<clock::duration>(
                             std::chrono::duration<double>(seconds));
    speed_ = detail::number_field(reply, "speed");
    if (speed_ <= 0) throw lease_error("the node's reply has speed <= 0");
    const detail::json* r = reply.get("renewable");
    const detail::json* e = reply.get("ends_job");
    renewable_ = renew_ && r && r->k == detail::json::kind::boolean && r->b;
    ends_job_ = e && e->k == detail::json::kind::boolean && e->b;
    const detail::json* c = reply.get("checkpoint");  // absent (an older node): save
    checkpoint_ = !(c && c->k == detail::json::kind::boolean && !c->b);
  }

  agree_fn agree_;
  std::optional<std::int64_t> own_step_;
  bool renew_ = false, renewable_ = false, ends_job_ = false, ending_ = false, checkpoint_ = true;
  std::int64_t renewals_ = 0;
  std::optional<detail::channel> channel_;
  std::int64_t job_ = -1, step_ = 0, cap_ = -1, made_ = 0, reported_ = 0;
  int copy_ = 0, copies_ = 1;
  bool writer_ = true, expired_ = false, exited_ = false, final_sent_ = false;
  bool in_step_ = false, last_ = false;
  double speed_ = 1, step_time_ = -1;
  std::optional<double> loss_;
  std::optional<clock::time_point> deadline_;
  clock::time_point step_started_{}, last_report_{};
};

}  // namespace tessera_client
