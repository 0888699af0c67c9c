#pragma once
/// @file protocol_system.hpp
/// The CAF actor system the message-decoding fuzz targets decode with: the protocol registered
/// exactly as every process of a run registers it (actors::register_protocol), and the list of
/// type names that registration added, read back from the configuration so that a message type
/// added to register_protocol is fuzzed without touching the targets.

#include <algorithm>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/protocol.hpp"

namespace tessera::fuzz {

/// A configuration holding the protocol (and one scheduler thread: the targets send nothing).
class protocol_config : public caf::actor_system_config {
 public:
  protocol_config() {
    actors::register_protocol(*this);
    set("scheduler.max-threads", 1);
  }
};

/// Type names `register_protocol` registered: those of protocol_config that a plain
/// configuration lacks (each message T, and the std::vector<T> and stream<T> CAF adds with it;
/// a peer can send any of them inside a caf::message). Sorted, so input bytes map to the same
/// type from run to run.
inline std::vector<std::string> protocol_type_names(const caf::actor_system_config& cfg) {
  const caf::actor_system_config plain;
  std::vector<std::string> out;
  for (const auto& entry : cfg.value_factories_by_name)
    if (plain.value_factories_by_name.count(entry.first) == 0) out.push_back(entry.first);
  std::sort(out.begin(), out.end());
  return out;
}

/// The process's actor system, made on first use and kept to the end (the fuzzer exits
/// without unwinding the stack, so it is never destroyed).
inline caf::actor_system& protocol_system() {
  static auto* cfg = new protocol_config;
  static auto* sys = new caf::actor_system(*cfg);
  return *sys;
}

}  // namespace tessera::fuzz
