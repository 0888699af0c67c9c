#include "actors/job_life.hpp"

namespace tessera {

result<job_state> next_state(job_state s, job_event e) {
  using S = job_state;
  using E = job_event;
  std::optional<S> to;
  switch (s) {
    case S::queued:
      if (e == E::placed)
        to = S::running;
      else if (e == E::left_out)
        to = S::queued;
      else if (e == E::cancelled)
        to = S::cancelled;
      break;
    case S::running:
      if (e == E::placed)
        to = S::running;
      else if (e == E::left_out)
        to = S::preempted;
      else if (e == E::completed)
        to = S::finished;
      else if (e == E::failed)
        to = S::failed;
      else if (e == E::cancelled)
        to = S::cancelled;
      break;
    case S::preempted:
      if (e == E::placed)
        to = S::running;
      else if (e == E::left_out)
        to = S::preempted;
      else if (e == E::cancelled)
        to = S::cancelled;
      break;
    case S::finished:
    case S::failed:
    case S::cancelled:
      break;
  }
  if (!to)
    return error{error_kind::invalid_input,
                 std::string("a ") + state_name(s) + " job cannot be " + event_name(e)};
  return *to;
}

bool is_final(job_state s) {
  return s == job_state::finished || s == job_state::failed || s == job_state::cancelled;
}

const char* state_name(job_state s) {
  switch (s) {
    case job_state::queued:
      return "queued";
    case job_state::running:
      return "running";
    case job_state::preempted:
      return "preempted";
    case job_state::finished:
      return "finished";
    case job_state::failed:
      return "failed";
    case job_state::cancelled:
      return "cancelled";
  }
  return "?";
}

const char* event_name(job_event e) {
  switch (e) {
    case job_event::placed:
      return "placed";
    case job_event::left_out:
      return "left out";
    case job_event::completed:
      return "completed";
    case job_event::failed:
      return "failed";
    case job_event::cancelled:
      return "cancelled";
  }
  return "?";
}

std::optional<job_state> parse_state(const std::string& name) {
  for (auto s : {job_state::queued, job_state::running, job_state::preempted, job_state::finished,
                 job_state::failed, job_state::cancelled})
    if (name == state_name(s)) return s;
  return std::nullopt;
}

}  // namespace tessera
