#pragma once
/// @file admission.hpp
/// Plain pieces of node registration (no actors, so they are tested alone): the proofs a
/// node and the scheduler exchange (actors/auth.hpp) and the scheduler's bounded book of
/// challenges it issued and not yet seen answered.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/auth.hpp"
#include "actors/protocol.hpp"

namespace tessera::actors {

/// The two nonces of one registration exchange.
struct nonce_pair {
  std::vector<std::uint8_t> client;  ///< the node's (auth_request)
  std::vector<std::uint8_t> server;  ///< the scheduler's (auth_challenge)
};

/// What the scheduler's proof covers: its role and both nonces.
std::vector<std::string> scheduler_proof_parts(const nonce_pair& n);

/// What a node's proof covers: its role, both nonces and every field of its hello but the
/// proof, so none can be changed in flight.
std::vector<std::string> hello_proof_parts(const node_hello& h, const nonce_pair& n);

/// The auth_challenge answering `request` under `key`, with a fresh server nonce; the nonces
/// are stored in `issued`. An error when the request's nonce has the wrong size.
result<auth_challenge> answer_request(const secret_key& key, const auth_request& request,
                                      nonce_pair& issued);

/// True when `h` carries a valid proof of `key` over `n`.
bool hello_is_proven(const secret_key& key, const node_hello& h, const nonce_pair& n);

/// Challenges issued and not yet answered, by asker; the oldest are forgotten beyond `cap`,
/// so a peer asking again and again cannot grow the scheduler's memory.
template <class Key>
class challenge_book {
 public:
  explicit challenge_book(std::size_t cap = 64) : cap_(cap) {}

  /// Records the nonces issued to `who` (replacing any earlier ones of it).
  void issue(const Key& who, nonce_pair n) {
    take(who);
    entries_.emplace_back(who, std::move(n));
    while (entries_.size() > cap_) entries_.pop_front();
  }

  /// Removes and returns the nonces issued to `who`: each challenge is answered once.
  std::optional<nonce_pair> take(const Key& who) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first == who) {
        auto n = std::move(it->second);
        entries_.erase(it);
        return n;
      }
    return std::nullopt;
  }

  /// Challenges outstanding.
  std::size_t size() const { return entries_.size(); }

 private:
  std::size_t cap_;
  std::deque<std::pair<Key, nonce_pair>> entries_;
};

}  // namespace tessera::actors
