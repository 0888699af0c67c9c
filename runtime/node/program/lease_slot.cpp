#include "runtime/node/program/lease_slot.hpp"

#include <algorithm>
#include <utility>

namespace tessera::program {
namespace {

/// The terms to send now (lease_slot::terms_now), from the slot's state.
lease_terms terms_at(lease_terms t, const std::optional<lease_clock::time_point>& deadline,
                     bool stopped, std::int64_t made, lease_clock::time_point now) {
  t.seconds = -1;
  if (deadline) t.seconds = std::max(0.0, std::chrono::duration<double>(*deadline - now).count());
  if (stopped) {
    t.seconds = 0;
    t.steps = t.steps < 0 ? made : std::min(t.steps, made);
  }
  return t;
}

}  // namespace

lease_slot::lease_slot(lease_terms terms, std::optional<lease_clock::time_point> deadline,
                       double min_after_hello)
    : terms_(terms), deadline_(deadline), min_after_hello_(min_after_hello) {
  view_.lease_end = deadline_;
}

program_view lease_slot::view() const {
  std::lock_guard<std::mutex> lock(m_);
  return view_;
}

void lease_slot::stop() {
  std::lock_guard<std::mutex> lock(m_);
  stopped_ = true;
}

bool lease_slot::take_average(std::vector<std::size_t>& sizes,
                              std::shared_ptr<shared_floats>& shared) {
  std::lock_guard<std::mutex> lock(m_);
  if (!avg_held_) return false;
  sizes = std::move(avg_sizes_);
  shared = std::move(avg_shared_);
  avg_sizes_.clear();
  avg_shared_.reset();
  avg_held_ = false;
  return true;
}

void lease_slot::answer_average(const std::vector<std::size_t>& sizes, std::int32_t copies,
                                std::int64_t step) {
  std::lock_guard<std::mutex> lock(m_);
  if (!view_.average_waiting) return;
  view_.average_waiting = false;
  // Sent under the lock: on_closed (which the server calls before it goes) then cannot clear
  // the sender while it runs, so a sender never posts to a server that is gone.
  if (send_) {
    send_(format_averaged(sizes, copies, step));
    view_.average_answered = true;
  }
}

void lease_slot::refuse_average(const std::string& why) {
  std::lock_guard<std::mutex> lock(m_);
  if (!view_.average_waiting) return;
  view_.average_waiting = false;
  if (refuse_) refuse_(why);
}

bool lease_slot::renew(lease_terms terms, std::optional<lease_clock::time_point> deadline,
                       double min_after_renewal) {
  std::lock_guard<std::mutex> lock(m_);
  if (!view_.renew_waiting || !send_) return false;
  const auto now = lease_clock::now();
  terms_ = terms;
  terms_.renewable = view_.renewable && terms.renewable;  // the hello's answer stands
  deadline_ = deadline;
  if (deadline_ && min_after_renewal > 0)
    deadline_ = std::max(*deadline_, now + std::chrono::duration_cast<lease_clock::duration>(
                                               std::chrono::duration<double>(min_after_renewal)));
  stopped_ = false;
  // The view starts again as at a hello: steps, reports and averages belong to this lease.
  view_.renew_waiting = false;
  ++view_.renewals;
  view_.own_step = terms.step;
  view_.steps = 0;
  view_.final_report = false;
  view_.hello_at = view_.last_contact = now;
  view_.lease_end = deadline_;
  view_.average_values = 0;
  view_.average_answered = false;
  send_(format_lease(terms_at(terms_, deadline_, stopped_, 0, now)));
  return true;
}

void lease_slot::release() {
  std::lock_guard<std::mutex> lock(m_);
  if (!view_.renew_waiting) return;
  view_.renew_waiting = false;
  if (send_) send_(format_exit());
}

lease_terms lease_slot::terms_now() const {
  std::lock_guard<std::mutex> lock(m_);
  return terms_at(terms_, deadline_, stopped_, view_.steps, lease_clock::now());
}

std::string lease_slot::on_request(lease_request r, std::shared_ptr<shared_floats> shared) {
  std::lock_guard<std::mutex> lock(m_);
  const auto now = lease_clock::now();
  ++view_.messages;
  view_.last_contact = now;
  switch (r.op) {
    case request_op::hello:
      view_.said_hello = true;
      view_.pid = r.pid;
      view_.own_step = r.own_step;
      view_.hello_at = now;
      view_.renewable = terms_.renewable && r.renew;
      terms_.renewable = view_.renewable;
      if (deadline_ && min_after_hello_ > 0)
        deadline_ =
            std::max(*deadline_, now + std::chrono::duration_cast<lease_clock::duration>(
                                           std::chrono::duration<double>(min_after_hello_)));
      view_.lease_end = deadline_;
      break;
    case request_op::average:
      view_.average_values = 0;
      view_.average_answered = false;
      for (const auto n : r.sizes) view_.average_values += n;
      avg_sizes_ = std::move(r.sizes);
      avg_shared_ = std::move(shared);
      avg_held_ = true;
      view_.average_waiting = true;
      return "";
    case request_op::report:
    case request_op::complete:
    case request_op::renew:
      // Never past the lease: a program that says more did not get them from this node.
      view_.steps = terms_.steps >= 0 ? std::min(r.steps, terms_.steps) : r.steps;
      if (r.loss) view_.loss = r.loss;
      if (r.op == request_op::renew) {
        view_.renew_waiting = true;  // answered by renew() or release()
        return "";
      }
      if (r.op == request_op::report) {
        view_.final_report = view_.final_report || r.final;
        break;
      }
      view_.complete = true;
      view_.accuracy = r.accuracy;
      return format_exit();
  }
  return format_lease(terms_at(terms_, deadline_, stopped_, view_.steps, now));
}

void lease_slot::on_closed(const std::string& protocol_error) {
  std::lock_guard<std::mutex> lock(m_);
  view_.closed = true;
  if (view_.protocol_error.empty()) view_.protocol_error = protocol_error;
  send_ = nullptr;
  refuse_ = nullptr;
}

void lease_slot::set_sender(std::function<void(std::string)> send,
                            std::function<void(std::string)> refuse) {
  std::lock_guard<std::mutex> lock(m_);
  send_ = std::move(send);
  refuse_ = std::move(refuse);
}

std::string order_error(const lease_request& r, const program_view& v) {
  const std::string op = op_name(r.op);
  if (r.op == request_op::hello) return "'hello' sent twice on one connection";
  if (v.complete) return "'" + op + "' after 'complete' (the program should exit now)";
  if (r.op == request_op::average && v.average_waiting)
    return "'average' sent again before the node answered the first";
  if (v.renew_waiting) return "'" + op + "' sent while its 'renew' waits for the node's answer";
  if (r.op == request_op::renew && v.average_waiting)
    return "'renew' sent while its 'average' waits for the node's answer";
  if (r.op == request_op::renew && !v.renewable)
    return "'renew' on a lease the node did not make renewable (the hello must say "
           "\"renew\": true, and the lease reply then says \"renewable\": true)";
  if (r.op != request_op::average && r.steps < v.steps)
    return "'" + op + "': field 'steps' went down from " + std::to_string(v.steps) + " to " +
           std::to_string(r.steps) + " (it counts the steps made since hello)";
  return "";
}

}  // namespace tessera::program
