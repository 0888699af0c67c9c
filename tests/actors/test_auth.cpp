// The cluster secret and registration proofs (actors/auth.hpp, actors/admission.hpp): files
// only their owner may read, proofs that bind every field, challenges answered once.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include <sys/stat.h>

#include "actors/admission.hpp"
#include "actors/auth.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::actors;

namespace {

node_hello sample_hello() {
  node_hello h;
  h.rank = 2;
  h.name = "gpu-2";
  h.gpu_type = "k80";
  h.gpus = 4;
  h.speed = 0.5;
  h.host = "host-b";
  h.pid = 1234;
  return h;
}

nonce_pair sample_nonces() {
  return {std::vector<std::uint8_t>(nonce_bytes, 1), std::vector<std::uint8_t>(nonce_bytes, 2)};
}

}  // namespace

TEST_CASE("auth: secrets are random, hex round-trips", "[actors][auth]") {
  auto a = make_secret(), b = make_secret();
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->size() == secret_bytes);
  CHECK(*a != *b);
  auto back = from_hex(to_hex(*a));
  REQUIRE(back);
  CHECK(*back == *a);
  CHECK_FALSE(from_hex("abc"));
  CHECK_FALSE(from_hex("zz"));
  CHECK(to_hex({0x00, 0xff, 0x5a}) == "00ff5a");
}

TEST_CASE("auth: a secret file is created 0600, never over an existing file", "[actors][auth]") {
  tessera::test::scratch_dir dir("auth");
  const std::string path = dir.file("secret");
  const secret_key key(secret_bytes, 0x42);
  REQUIRE(write_secret_file(path, key));
  struct stat sb {};
  REQUIRE(::stat(path.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);
  auto read = read_secret_file(path);
  REQUIRE(read);
  CHECK(*read == key);
  // Never replaces a file (an attacker's link or file could be there).
  CHECK_FALSE(write_secret_file(path, key));
  // A file others may read is refused, as are short, long and non-hex ones.
  ::chmod(path.c_str(), 0644);
  auto open = read_secret_file(path);
  REQUIRE_FALSE(open);
  CHECK_THAT(open.err().message, Catch::Contains("read or written by others"));
  for (const std::string& text :
       {std::string("abcd\n"), std::string(200, 'a'), std::string(64, 'x')}) {
    const std::string p = dir.file("bad-" + std::to_string(text.size()) + text.substr(0, 1));
    std::ofstream(p) << text;
    ::chmod(p.c_str(), 0600);
    auto bad = read_secret_file(p);
    INFO(text);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.err().message, Catch::Contains(p));
  }
  CHECK_FALSE(read_secret_file(dir.file("missing")));
  CHECK_FALSE(read_secret_file(dir.str()));  // a directory
}

TEST_CASE("auth: proofs depend on the key and on every part, parts are framed", "[actors][auth]") {
  const secret_key k1(secret_bytes, 1), k2(secret_bytes, 2);
  const auto p = proof_of(k1, {"ab", "c"});
  CHECK(p.size() == 32);  // SHA-256
  CHECK(same_proof(p, proof_of(k1, {"ab", "c"})));
  CHECK_FALSE(same_proof(p, proof_of(k2, {"ab", "c"})));
  CHECK_FALSE(same_proof(p, proof_of(k1, {"a", "bc"})));
  CHECK_FALSE(same_proof(p, proof_of(k1, {"abc"})));
  CHECK_FALSE(same_proof(p, {}));
  CHECK_FALSE(same_proof({}, {}));
  // Golden value from Python's hmac module over the framed message (length 28 as 4 bytes,
  // little-endian, then the text): hmac.new(b"Jefe", b"\x1c\0\0\0what do ya want for
  // nothing?", hashlib.sha256).hexdigest(). The key and text are RFC 4231's test case 2.
  const std::string jefe = "Jefe";
  const secret_key kj(jefe.begin(), jefe.end());
  CHECK(to_hex(proof_of(kj, {"what do ya want for nothing?"})) ==
        "c9867ba1a547b71d336a70a3c0c4b9bcee431755aa6b8e906e9afc20f3148c5e");
}

TEST_CASE("admission: a hello proves the secret only with every field as signed",
          "[actors][auth]") {
  const secret_key key(secret_bytes, 9);
  auto n = sample_nonces();
  node_hello h = sample_hello();
  h.proof = proof_of(key, hello_proof_parts(h, n));
  CHECK(hello_is_proven(key, h, n));
  CHECK_FALSE(hello_is_proven(secret_key(secret_bytes, 8), h, n));
  CHECK_FALSE(hello_is_proven(secret_key{}, h, n));
  // Changing any field, or either nonce, breaks the proof.
  std::vector<std::function<void(node_hello&)>> edits = {
      [](node_hello& x) { x.rank = 1; },          [](node_hello& x) { x.name = "gpu-1"; },
      [](node_hello& x) { x.gpu_type = "v100"; }, [](node_hello& x) { x.gpus = 8; },
      [](node_hello& x) { x.speed = 0.25; },      [](node_hello& x) { x.host = "evil"; },
      [](node_hello& x) { x.pid = 1; },           [](node_hello& x) { x.version = 99; }};
  for (std::size_t i = 0; i < edits.size(); ++i) {
    node_hello changed = h;
    edits[i](changed);
    INFO("edit " << i);
    CHECK_FALSE(hello_is_proven(key, changed, n));
  }
  nonce_pair other = n;
  other.server[0] ^= 1;
  CHECK_FALSE(hello_is_proven(key, h, other));
}

TEST_CASE("admission: a challenge answers a well-formed request with a verifiable proof",
          "[actors][auth]") {
  const secret_key key(secret_bytes, 3);
  nonce_pair issued;
  auto c = answer_request(key, auth_request{std::vector<std::uint8_t>(nonce_bytes, 5)}, issued);
  REQUIRE(c);
  CHECK(c->nonce.size() == nonce_bytes);
  CHECK(issued.client == std::vector<std::uint8_t>(nonce_bytes, 5));
  CHECK(issued.server == c->nonce);
  CHECK(same_proof(c->proof, proof_of(key, scheduler_proof_parts(issued))));
  nonce_pair again;
  auto c2 = answer_request(key, auth_request{std::vector<std::uint8_t>(nonce_bytes, 5)}, again);
  REQUIRE(c2);
  CHECK(c2->nonce != c->nonce);  // fresh every time: no replay of an old exchange
  for (std::size_t bad : {std::size_t{0}, nonce_bytes - 1, nonce_bytes + 1, std::size_t{4096}}) {
    nonce_pair unused;
    CHECK_FALSE(answer_request(key, auth_request{std::vector<std::uint8_t>(bad, 1)}, unused));
  }
}

TEST_CASE("admission: the challenge book is bounded and answers each challenge once",
          "[actors][auth][property]") {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 50; ++trial) {
    const std::size_t cap = 1 + rng() % 8;
    challenge_book<int> book(cap);
    std::map<int, std::uint8_t> latest;  // what the book should still hold, at most cap
    std::vector<int> order;
    for (int op = 0; op < 60; ++op) {
      const int who = static_cast<int>(rng() % 12);
      if (rng() % 3) {
        const auto mark = static_cast<std::uint8_t>(op);
        book.issue(who, nonce_pair{{mark}, {mark}});
        latest[who] = mark;
        order.erase(std::remove(order.begin(), order.end(), who), order.end());
        order.push_back(who);
        while (order.size() > cap) {
          latest.erase(order.front());
          order.erase(order.begin());
        }
      } else {
        auto got = book.take(who);
        auto it = latest.find(who);
        REQUIRE(got.has_value() == (it != latest.end()));
        if (got) CHECK(got->client == std::vector<std::uint8_t>{it->second});
        latest.erase(who);
        order.erase(std::remove(order.begin(), order.end(), who), order.end());
        CHECK_FALSE(book.take(who));  // answered once
      }
      CHECK(book.size() <= cap);
      CHECK(book.size() == latest.size());
    }
  }
}
