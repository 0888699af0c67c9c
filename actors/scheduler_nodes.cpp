// The scheduler's nodes (actors/scheduler_parts.hpp): registration (the secret's proof, the
// cluster file's checks), attribution of every message to the actor it came from, heartbeats,
// drains and loss.
#include <algorithm>
#include <iostream>

#include "actors/scheduler_parts.hpp"

namespace tessera::actors::sched {

namespace {

/// True while some node is alive.
bool any_alive(const scheduler_state& st) {
  return std::any_of(st.nodes.begin(), st.nodes.end(),
                     [](const node_record& r) { return r.alive; });
}

/// The live node whose actor is `a`, or -1.
int rank_of(const scheduler_state& st, const caf::actor_addr& a) {
  auto it = st.by_addr.find(a);
  return it == st.by_addr.end() ? -1 : it->second;
}

}  // namespace

/// Marks a node lost: its copies' progress this round is gone and they are replanned (each
/// job of the round with a part on it is told, and fences its checkpoint writers). A draining
/// round that waited only for it moves on (reports_check_atom). The run ends when it was the
/// last live node.
bool node_lost(self_ptr self, int rank, const std::string& why) {
  auto& st = self->state;
  auto& n = st.nodes[rank];
  if (!n.alive) return true;
  n.alive = false;
  st.failed_ranks.push_back(rank);
  // Fenced: whatever it sends from now on is refused, and it is told so.
  st.by_addr.erase(n.handle.address());
  st.fenced.insert(n.handle.address());
  self->send(n.handle, fenced_atom::value, "declared lost: " + why);
  std::cerr << "tessera: node rank " << rank << " (" << n.hello.host << ", pid " << n.hello.pid
            << ") lost: " << why << "; its copies resume from their last checkpoints\n";
  for (auto& e : st.jobs) {
    const auto on_rank = [&](const copy_piece& p) { return p.rank == rank; };
    if (std::none_of(e.pieces.begin(), e.pieces.end(), on_rank)) continue;
    self->send(e.handle, node_lost_atom::value, st.round, static_cast<std::int32_t>(rank));
    e.view_due = true;  // asked after this message: the view sees the fence
    e.pieces.erase(std::remove_if(e.pieces.begin(), e.pieces.end(), on_rank), e.pieces.end());
  }
  ++st.job_set_version;
  st.have_last = false;
  st.pending.erase(rank);
  st.unsaved.erase(rank);
  // A node asked to settle that is lost now will not answer: the held orders need not wait.
  if (st.settling.erase(rank) && st.settling.empty() && st.holding_orders)
    self->send(self, settle_due_atom::value, st.round);
  if (!any_alive(st)) {
    finish(self, false, "every node was lost");
    return false;
  }
  self->send(self, reports_check_atom::value);
  return true;
}

void node_down(self_ptr self, const caf::down_msg& d) {
  ++self->state.messages;
  const int rank = rank_of(self->state, d.source);
  if (rank >= 0)
    node_lost(self, rank, "its actor went down (" + describe(self->system(), d.reason) + ")");
  self->state.fenced.erase(d.source);  // gone: nothing more can come from it
}

/// The cluster of live nodes; a change invalidates the last plan and the jobs' last types.
void refresh_live_cluster(scheduler_state& st) {
  std::vector<int> live_ranks;
  std::vector<server> servers;
  for (std::size_t r = 0; r < st.nodes.size(); ++r)
    if (st.nodes[r].alive) {
      live_ranks.push_back(static_cast<int>(r));
      servers.push_back(st.cfg.cl.servers[r]);
    }
  if (live_ranks == st.live_ranks) return;
  st.live_ranks = live_ranks;
  st.live = make_cluster(std::move(servers));
  st.have_last = false;
  ++st.job_set_version;
  ++st.live_generation;  // the jobs' last types index the previous live cluster
}

/// The live node that sent the current message, or -1. Every message counts; one from any
/// other actor is dropped (counted), and a fenced node is reminded that it was declared lost.
int sender_rank(self_ptr self) {
  auto& st = self->state;
  ++st.messages;
  const auto addr = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (const int rank = rank_of(st, addr); rank >= 0) {
    st.nodes[rank].last_seen = self->clock().now();
    return rank;
  }
  ++st.dropped;
  if (st.fenced.count(addr))
    self->send(caf::actor_cast<node_api>(self->current_sender()), fenced_atom::value,
               std::string("this node was declared lost; its reports are refused"));
  return -1;
}

/// True when the current message comes from an actor of the scheduler's own process: the
/// only clients allowed to submit or cancel jobs until clients authenticate.
bool local_sender(self_ptr self) {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

namespace {

/// Why node `h` cannot register, or no error.
caf::error refusal_of(const scheduler_state& st, const node_hello& h) {
  const int n = static_cast<int>(st.nodes.size());
  const std::string who = "node rank " + std::to_string(h.rank) + " (" + h.host + ", pid " +
                          std::to_string(h.pid) + ")";
  if (h.version != protocol_version)
    return make_run_error(run_errc::protocol_mismatch, who + " speaks protocol version " +
                                                           std::to_string(h.version) +
                                                           ", this scheduler speaks version " +
                                                           std::to_string(protocol_version));
  if (h.rank < 0 || h.rank >= n)
    return make_run_error(run_errc::unknown_node,
                          who + " is not in the cluster file, which lists " + std::to_string(n) +
                              " servers (ranks 0.." + std::to_string(n - 1) + ")");
  if (st.nodes[h.rank].alive)
    return make_run_error(run_errc::duplicate_node,
                          who + ": rank " + std::to_string(h.rank) + " is held by a live node");
  const auto& sv = st.cfg.cl.servers[h.rank];
  if (sv.gpu_type != h.gpu_type || sv.gpus != h.gpus || sv.speed != h.speed)
    return make_run_error(run_errc::unknown_node,
                          who +
                              " describes its server differently from the scheduler's "
                              "cluster file (" +
                              h.gpu_type + " x" + std::to_string(h.gpus) + " vs " + sv.gpu_type +
                              " x" + std::to_string(sv.gpus) + ")");
  return {};
}

/// Refuses a registration: logged and counted. Only a proven node whose configuration the
/// cluster cannot take, before the run started, ends the run (the cluster can never be
/// complete); a stranger or a second claim on a live rank leaves the run as it is.
caf::error refuse(self_ptr self, const caf::error& why, bool fatal) {
  auto& st = self->state;
  ++st.refused;
  const std::string text = describe(self->system(), why);
  std::cerr << "tessera: refused " << text << '\n';
  if (fatal) self->send(self, refused_atom::value, text);
  return why;
}

/// Starts the rounds: the nodes registered so far form the cluster (the rest may join).
void start_run(self_ptr self) {
  auto& st = self->state;
  st.run_started = true;
  const auto now = self->clock().now();
  st.registration_seconds = seconds_between(st.created, now);
  st.t0 = now - seconds(st.cfg.clock_base);  // elapsed() is cluster time
  self->send(self, hb_check_atom::value);
  self->send(self, arrival_atom::value);
  self->become(self->state.phases.idle);
}

/// Starts the run once every node of the cluster file has registered.
void start_if_complete(self_ptr self) {
  auto& st = self->state;
  if (st.run_started || !std::all_of(st.nodes.begin(), st.nodes.end(),
                                     [](const node_record& r) { return r.registered; }))
    return;
  start_run(self);
}

/// Seconds since the epoch of the actor clock: the heartbeat gaps' time line.
double clock_seconds(self_ptr self) {
  return std::chrono::duration<double>(self->clock().now().time_since_epoch()).count();
}

}  // namespace

/// Registers a node that proved the cluster secret; after the start it joins the live
/// cluster from the next round.
caf::result<node_welcome> register_node(self_ptr self, const node_hello& h) {
  auto& st = self->state;
  ++st.messages;
  const auto who = caf::actor_cast<caf::actor_addr>(self->current_sender());
  const auto nonces = st.challenges.take(who);
  if (!nonces || !hello_is_proven(st.cfg.secret, h, *nonces))
    return refuse(self,
                  make_run_error(run_errc::unauthenticated,
                                 "a registration as node rank " + std::to_string(h.rank) + " (" +
                                     h.host + ", pid " + std::to_string(h.pid) +
                                     ") without a valid proof of the cluster secret"),
                  false);
  if (auto refusal = refusal_of(st, h))
    return refuse(
        self, refusal,
        !st.run_started && refusal.code() != static_cast<std::uint8_t>(run_errc::duplicate_node));
  auto& rec = st.nodes[h.rank];
  if (rec.handle) st.by_addr.erase(rec.handle.address());
  rec.handle = caf::actor_cast<node_api>(self->current_sender());
  rec.registered = true;
  rec.alive = true;
  rec.leaving = false;
  rec.hello = h;
  rec.last_seen = self->clock().now();
  rec.gaps = heartbeat_gaps{};
  rec.gaps.arrived(clock_seconds(self));
  st.registration_progress = rec.last_seen;
  st.by_addr[who] = h.rank;
  st.fenced.erase(who);
  self->monitor(rec.handle);
  if (st.run_started) {
    ++st.joins;
    ++st.job_set_version;
    std::cerr << "tessera: node rank " << h.rank << " (" << h.host << ", pid " << h.pid
              << ") joined; it gets work from the next round\n";
  }
  start_if_complete(self);
  return node_welcome{h.rank, st.cfg.round_length, st.cfg.heartbeat_interval};
}

/// Answers a registration's first message with the scheduler's nonce and proof.
caf::result<auth_challenge> challenge(self_ptr self, const auth_request& r) {
  auto& st = self->state;
  ++st.messages;
  nonce_pair issued;
  auto answer = answer_request(st.cfg.secret, r, issued);
  if (!answer) {
    ++st.dropped;
    return make_run_error(run_errc::unauthenticated, answer.err().message);
  }
  st.challenges.issue(caf::actor_cast<caf::actor_addr>(self->current_sender()), std::move(issued));
  st.registration_progress = self->clock().now();
  return std::move(*answer);
}

void node_leaves(self_ptr self) {
  const int rank = sender_rank(self);
  if (rank < 0) return;
  self->state.nodes[rank].leaving = true;
  std::cerr << "tessera: node rank " << rank << " asked to leave after this round\n";
  release_if_leaving(self, rank);
}

/// Shuts a node that asked to leave down once it has reported the current round; the run
/// ends when it was the last live node.
bool release_if_leaving(self_ptr self, int rank) {
  auto& st = self->state;
  auto& n = st.nodes[rank];
  if (!n.alive || !n.leaving || st.pending.count(rank)) return true;
  n.alive = false;
  st.by_addr.erase(n.handle.address());
  ++st.job_set_version;
  self->send(n.handle, shutdown_atom::value, std::int32_t{0});
  std::cerr << "tessera: node rank " << rank << " left the cluster (drained)\n";
  // Under a stop every node drains too (mpirun forwards the signal): that is the stop.
  if (any_alive(st)) return true;
  finish(self, st.stopping, st.stopping ? "stopped by request" : "every node left");
  return false;
}

void heartbeat_from(self_ptr self) {
  const int rank = sender_rank(self);
  if (rank >= 0) self->state.nodes[rank].gaps.arrived(clock_seconds(self));
}

namespace {

/// Time this scan ran late beyond one interval: the scheduler itself was starved (a busy
/// host, a stopped process), and its nodes' heartbeats waited in its mailbox. That time is
/// credited to every live node, so a starved scheduler does not blame its nodes.
void credit_own_stall(self_ptr self, caf::actor_clock::time_point now) {
  auto& st = self->state;
  const double interval = st.cfg.heartbeat_interval;
  const double late = st.scanned ? seconds_between(st.last_scan, now) - interval : 0;
  st.last_scan = now;
  st.scanned = true;
  if (late <= interval) return;
  st.stalled += late;
  const auto by = std::chrono::duration_cast<caf::actor_clock::time_point::duration>(
      std::chrono::duration<double>(late));
  for (auto& n : st.nodes)
    if (n.alive) {
      n.last_seen += by;
      n.gaps.credit(late);
    }
  if (st.cfg.verbose)
    std::cerr << "tessera: the scheduler ran " << late
              << " s late; its nodes' silence excludes it\n";
}

/// Why a silent node is lost: its silence against its bound and the gaps behind the bound.
std::string silence_reason(const node_record& n, double silent, double bound,
                           const liveness_settings& s) {
  char text[256];
  std::snprintf(text, sizeof text,
                "no heartbeat for %.2f s (its bound %.2f s: floor %.2f s, ceiling %.2f s, mean gap "
                "%.3f s, sd %.3f s over %zu gaps)",
                silent, bound, s.floor, s.ceiling, n.gaps.mean(), n.gaps.sd(), n.gaps.count());
  return text;
}

}  // namespace

/// Loses every live node silent for longer than its loss bound (actors/liveness.hpp).
void check_heartbeats(self_ptr self) {
  auto& st = self->state;
  const auto now = self->clock().now();
  credit_own_stall(self, now);
  for (std::size_t r = 0; r < st.nodes.size(); ++r) {
    const auto& n = st.nodes[r];
    if (!n.alive) continue;
    const double silent = seconds_between(n.last_seen, now);
    const double bound = n.gaps.bound(st.cfg.liveness);
    if (silent > bound &&
        !node_lost(self, static_cast<int>(r), silence_reason(n, silent, bound, st.cfg.liveness)))
      return;
  }
  self->delayed_send(self, seconds(st.cfg.heartbeat_interval), hb_check_atom::value);
  check_views(self);
}

bool lose_late_nodes(self_ptr self, std::int64_t round) {
  auto& s = self->state;
  // A late node still within its heartbeat bound is slow, not dead: the round waits for it,
  // one report grace at a time, at most twice.
  const auto now = self->clock().now();
  bool waiting = false;
  for (int r : s.pending) {
    const auto& n = s.nodes[r];
    if (s.late_waits < 2 && seconds_between(n.last_seen, now) <= n.gaps.bound(s.cfg.liveness))
      waiting = true;
  }
  if (waiting) {
    ++s.late_waits;
    std::cerr << "tessera: round " << round << ": " << s.pending.size()
              << " node(s) late with their report but alive; waiting " << s.cfg.report_grace
              << " s more\n";
    s.round_deadline += s.cfg.report_grace;
    self->delayed_send(self, seconds(s.cfg.report_grace), round_deadline_atom::value, round);
    return false;
  }
  const std::set<int> late = s.pending;
  for (int r : late)
    if (!node_lost(self, r,
                   "no report for round " + std::to_string(round) + " within " +
                       std::to_string(s.round_deadline) + " s"))
      return false;
  return true;
}

/// Registration's time-out: while nodes keep arriving (or proving themselves) the wait goes
/// on, counted from the last progress; then the run starts with the nodes present when the
/// settings allow it (min_nodes), or ends saying who is missing and how to wait longer.
void registration_overdue(self_ptr self) {
  auto& s = self->state;
  if (s.run_started) return;
  const auto now = self->clock().now();
  const double quiet = seconds_between(s.registration_progress, now);
  if (quiet < s.cfg.register_timeout) {
    self->delayed_send(self, seconds(s.cfg.register_timeout - quiet), reg_timeout_atom::value);
    return;
  }
  std::string missing;
  int present = 0;
  for (std::size_t r = 0; r < s.nodes.size(); ++r) {
    if (s.nodes[r].registered)
      ++present;
    else
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  const std::string counted =
      std::to_string(present) + " of " + std::to_string(s.nodes.size()) + " nodes registered";
  if (s.cfg.min_nodes > 0 && present >= s.cfg.min_nodes) {
    std::cerr << "tessera: " << counted << "; starting with them (--min-nodes " << s.cfg.min_nodes
              << "); missing ranks " << missing << " may join later\n";
    start_run(self);
    return;
  }
  finish(self, false,
         counted + " (none for the last " + std::to_string(static_cast<int>(quiet)) +
             " s); missing ranks: " + missing +
             ". Wait longer with --connect-timeout SECONDS (the wait counts from the last "
             "node that made progress), or start with the nodes present with --min-nodes N");
}

}  // namespace tessera::actors::sched
