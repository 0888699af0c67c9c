#include "actors/admission.hpp"

#include <sstream>

namespace tessera::actors {

namespace {

std::string bytes(const std::vector<std::uint8_t>& b) { return std::string(b.begin(), b.end()); }

/// A double's exact text (hexfloat), the same on every host.
std::string exact(double x) {
  std::ostringstream s;
  s << std::hexfloat << x;
  return s.str();
}

}  // namespace

std::vector<std::string> scheduler_proof_parts(const nonce_pair& n) {
  return {"tessera scheduler", bytes(n.client), bytes(n.server)};
}

std::vector<std::string> hello_proof_parts(const node_hello& h, const nonce_pair& n) {
  return {"tessera node",         bytes(n.client), bytes(n.server),      std::to_string(h.version),
          std::to_string(h.rank), h.name,          h.gpu_type,           std::to_string(h.gpus),
          exact(h.speed),         h.host,          std::to_string(h.pid)};
}

result<auth_challenge> answer_request(const secret_key& key, const auth_request& request,
                                      nonce_pair& issued) {
  if (request.nonce.size() != nonce_bytes)
    return error{error_kind::invalid_input, "an auth_request nonce has " +
                                                std::to_string(request.nonce.size()) +
                                                " bytes, not " + std::to_string(nonce_bytes)};
  auto server = random_bytes(nonce_bytes);
  if (!server) return server.err();
  issued = nonce_pair{request.nonce, std::move(*server)};
  return auth_challenge{issued.server, proof_of(key, scheduler_proof_parts(issued))};
}

bool hello_is_proven(const secret_key& key, const node_hello& h, const nonce_pair& n) {
  return !key.empty() && same_proof(h.proof, proof_of(key, hello_proof_parts(h, n)));
}

}  // namespace tessera::actors
