// Doubles on the wire (actors/wire.hpp) and the protocol inputs the fuzz target fuzz_messages
// found (tests/data/fuzz/messages/). CAF 0.17's own packing of a double never returns for an
// infinity and garbles NaN and subnormals; the protocol sends bit patterns instead. Encoding
// runs on a watchdog thread here, so a regression fails the test instead of hanging it.
#include <catch2/catch.hpp>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <optional>
#include <limits>
#include <thread>

#include <sys/resource.h>

#include "actor_support.hpp"

using namespace tessera::actors;
using tessera::actors::test::test_config;

namespace {

using bytes = std::vector<char>;

/// Encodes `*x` (a caf::message or a type-erased value) on a thread of its own; nullopt when
/// that takes over 10 s (the thread is left behind: it is stuck in a loop that touches nothing
/// else, and ends with the process).
template <class T>
std::optional<bytes> encode_bounded(caf::actor_system& sys, std::shared_ptr<T> x) {
  auto done = std::make_shared<std::promise<bytes>>();
  auto result = done->get_future();
  std::thread([&sys, x, done] {
    bytes buf;
    caf::binary_serializer out{sys, buf};
    if (out(*x)) buf.clear();
    done->set_value(std::move(buf));
  }).detach();
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return std::nullopt;
  return result.get();
}

/// Encodes `x` in a caf::message and decodes it back; fails the test when encoding hangs.
template <class T>
T through_wire(caf::actor_system& sys, const T& x) {
  auto encoded = encode_bounded(sys, std::make_shared<caf::message>(caf::make_message(x)));
  REQUIRE(encoded);
  REQUIRE_FALSE(encoded->empty());
  caf::message back;
  caf::binary_deserializer in{sys, *encoded};
  REQUIRE_FALSE(in(back));
  REQUIRE(back.match_elements<T>());
  return back.get_as<T>(0);
}

/// The values CAF 0.17's packing mishandles, and two it handles, for contrast.
std::vector<double> awkward_doubles() {
  using lim = std::numeric_limits<double>;
  return {lim::infinity(),
          -lim::infinity(),
          lim::quiet_NaN(),
          lim::denorm_min(),
          -lim::denorm_min(),
          lim::max(),
          -0.0,
          1.5};
}

}  // namespace

TEST_CASE("doubles cross the wire bit for bit, infinities and NaN included",
          "[actors][protocol][fuzz]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  for (double v : awkward_doubles()) {
    INFO("value " << v);
    progress_report r;
    r.loss = v;  // a diverged training run reports an infinite or NaN loss
    CHECK(tessera::test::same_bits(std::vector<double>{through_wire(sys, r).loss}, {v}));

    job_summary s;
    s.throughput = {v, 2.0};
    CHECK(tessera::test::same_bits(through_wire(sys, s).throughput, s.throughput));

    start_copy c;
    c.config = {{"lr", v}};
    const auto back = through_wire(sys, c);
    REQUIRE(back.config.count("lr") == 1);
    CHECK(tessera::test::same_bits(std::vector<double>{back.config.at("lr")}, {v}));
  }
}

TEST_CASE("fuzz findings: every saved protocol input decodes, re-encodes and reads back",
          "[actors][protocol][fuzz]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  // Files are named <kind>-<message>-<hash>: the fuzz input's first byte picked the message
  // type by its index, which moves as messages are added, so the file name says which it was.
  const std::filesystem::path dir = TESSERA_TEST_DATA_DIR "/fuzz/messages";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    INFO(name);
    const auto first = name.find('-'), last = name.rfind('-');
    REQUIRE(first != last);
    const std::string type = "tessera::" + name.substr(first + 1, last - first - 1);
    const std::string input = tessera::test::file_contents(entry.path().string());
    REQUIRE(input.size() > 1);
    auto value = sys.types().make_value(type);
    REQUIRE(value != nullptr);
    caf::binary_deserializer in{sys, input.data() + 1, input.size() - 1};
    if (!in(*value)) {
      // It decoded: it must encode (this hung on the infinity the bytes held before the fix)
      // and read back to a value that encodes to the same bytes.
      const std::shared_ptr<caf::type_erased_value> decoded = std::move(value);
      const auto once = encode_bounded(sys, decoded);
      REQUIRE(once);
      REQUIRE_FALSE(once->empty());
      std::shared_ptr<caf::type_erased_value> back = sys.types().make_value(type);
      caf::binary_deserializer again{sys, *once};
      REQUIRE_FALSE(again(*back));
      CHECK(encode_bounded(sys, back) == once);
    }
    ++files;
  }
  CHECK(files > 0);
}

TEST_CASE("fuzz findings: a byte vector announcing 4 GiB is refused without allocating it",
          "[actors][protocol][fuzz]") {
  // fuzz_messages: 9 bytes announcing a 0xffffffff-byte nonce made CAF 0.17 resize the vector
  // before checking that the bytes were there (4 GiB touched). Byte vectors now go as strings,
  // whose length CAF checks against the input first.
  test_config cfg;
  caf::actor_system sys{cfg};
  const std::string input = tessera::test::file_contents(
      TESSERA_TEST_DATA_DIR "/fuzz/messages/oom-auth_request-2d1b7f5c");
  REQUIRE(input.size() > 1);
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auth_request r;
  caf::binary_deserializer in{sys, input.data() + 1, input.size() - 1};
  CHECK(in(r));  // refused: the bytes are not there
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  CHECK(after.ru_maxrss - before.ru_maxrss < 100 * 1024);  // KB: far below 4 GiB
  // The wire form is unchanged: a nonce still round-trips byte for byte.
  auth_request good{std::vector<std::uint8_t>{0, 1, 2, 255}};
  bytes buf;
  caf::binary_serializer out{sys, buf};
  REQUIRE_FALSE(out(good));
  auth_request back;
  caf::binary_deserializer again{sys, buf};
  REQUIRE_FALSE(again(back));
  CHECK(back.nonce == good.nonce);
}
