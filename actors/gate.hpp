#pragma once
/// @file gate.hpp
/// The gate: the only socket a run's scheduler exposes, and the only way into its CAF. It
/// accepts node connections on the address the cluster needs and relays each to CAF's
/// middleman over a socketpair of its own: CAF listens on no socket at all (a listener on
/// loopback would let any local user speak BASP to it unchecked). The gate reads what a peer
/// sends frame by frame (CAF's BASP framing: a fixed header, then a payload of the length it
/// announces) before CAF sees a byte:
/// - a frame announcing more than `max_message` bytes closes the connection before anything
///   is allocated for it (CAF alone would allocate the announced size, up to 4 GiB);
/// - at most `max_connections` peers at once; later ones are closed on accept;
/// - a peer silent for `idle_timeout` seconds is closed (nodes send heartbeats);
/// - a peer must open with a client handshake naming a node id no other open connection and
///   not the scheduler itself has; afterwards it may send only direct messages, heartbeats
///   and monitor / down notices about its own node (no routed messages, nothing to forward).
///   So every message the scheduler receives is attributed to the connection it came on: no
///   peer can speak as another node's actor (actors/protocol.hpp, "Trust").
/// What CAF sends back is relayed as it is. The gate runs on its own thread (Boost.Asio).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/node_id.hpp>

#include "runtime/core/result.hpp"

namespace tessera::actors {

/// The gate's bounds.
struct gate_limits {
  std::size_t max_message = 16u << 20;  ///< bytes of one frame's payload
  int max_connections = 64;             ///< peers connected at once
  double idle_timeout = 30;             ///< seconds a peer may stay silent
};

/// What the gate did (counts since it opened).
struct gate_stats {
  std::int64_t accepted = 0;       ///< connections relayed
  std::int64_t over_capacity = 0;  ///< connections closed at accept (too many)
  std::int64_t oversized = 0;      ///< closed for a frame over max_message
  std::int64_t idle = 0;           ///< closed after idle_timeout
  std::int64_t bad_frames = 0;     ///< closed for a frame the rules above forbid
  std::int64_t frames = 0;         ///< frames relayed to CAF
  int open = 0;                    ///< connections open now
};

/// Why the gate would close a connection for a frame, or "" when the frame may pass.
/// `hdr` is the frame's header bytes; `payload` its `payload_size` payload bytes. `peer` is the
/// node id the connection's handshake named (empty before it), `self` the scheduler's; `taken(id)`
/// says whether another open connection announced node `id`. On a valid client handshake `peer` is
/// set. Plain function: the gate's rules, tested without sockets.
std::string frame_verdict(const std::uint8_t* hdr, const std::uint8_t* payload,
                          std::size_t payload_size, caf::node_id& peer, const caf::node_id& self,
                          const std::function<bool(const caf::node_id&)>& taken);

/// The announced payload length of a frame header (bytes), or an error when the header does
/// not decode.
result<std::uint32_t> frame_payload_length(const std::uint8_t* hdr);

/// Bytes of a frame header.
std::size_t frame_header_size();

/// Hands CAF one end of a connected socketpair (the descriptor is its own from then on) as
/// a peer that just connected; false when it cannot (the gate then closes the peer).
using upstream_fn = std::function<bool(int fd)>;

/// The way into a CAF actor system's middleman for `whom`: each end handed over becomes a
/// BASP connection on which `whom` is published, as if CAF had accepted it. CAF listens on no
/// socket for it.
upstream_fn caf_upstream(caf::actor_system& sys, const caf::actor& whom);

class gate {
 public:
  /// Opens the gate on `bind`:`port` (0: any free port); each admitted peer is relayed over a
  /// new socketpair whose other end goes to `upstream` (called on the gate's thread). `self`
  /// is the scheduler's node id. An error names the address when it cannot listen.
  static result<std::unique_ptr<gate>> open(const std::string& bind, int port, upstream_fn upstream,
                                            const caf::node_id& self, gate_limits limits = {});
  ~gate();
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  /// The port it listens on.
  int port() const;
  /// A snapshot of its counters.
  gate_stats stats() const;
  /// Waits until no connection is open or `timeout` seconds have passed (so what CAF sent
  /// last, e.g. the nodes' shutdown, reaches them before the gate closes); true when none is.
  bool wait_closed(double timeout) const;

  struct impl;  ///< Asio state (gate.cpp)

 private:
  explicit gate(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace tessera::actors
