// Writes the binary seed inputs of the checkpoint, journal, messages and basp targets
// (fuzz/corpus/), made by the real encoders so the fuzzer starts from inputs that decode:
//   fuzz_make_seeds OUT_DIR   -> OUT_DIR/{checkpoint,journal,messages,basp}/seed-*
// Run by hand after a format changes (fuzz/README.md); the seeds are kept in the repository.
#include <caf/io/basp/all.hpp>

#include <filesystem>
#include <fstream>

#include "fuzz/fuzz_support.hpp"
#include "fuzz/protocol_system.hpp"
#include "runtime/service/journal.hpp"
#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/cuda_mlp.hpp"

namespace {

namespace fs = std::filesystem;
namespace basp = caf::io::basp;
using bytes = std::vector<char>;

/// Writes `prefix` (a mode byte, or nothing) then `body` to `path`.
void put(const fs::path& path, const std::string& prefix, const void* body, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  out << prefix;
  out.write(static_cast<const char*>(body), static_cast<std::streamsize>(n));
  if (!out) tessera::fuzz::fail("cannot write a seed");
}

/// Checkpoint seeds: whole files (mode byte 0) and trainable states (mode byte 1).
void checkpoint_seeds(const fs::path& dir) {
  namespace train = tessera::train;
  const train::trainable_config small = {
      {"dim", 2}, {"classes", 2}, {"train_size", 8}, {"held_out_size", 4}, {"batch_size", 2}};
  const auto registry = train::builtin_trainables();
  const std::string file = (dir / "tmp.ckpt").string();
  for (const auto& kind : registry.kinds()) {
    if (kind == train::cuda_mlp_kind) continue;  // needs a GPU; its state is the mlp's
    auto config = small;
    if (kind == "mlp") config["hidden"] = 2;
    auto t = registry.make(kind, 1, config);
    if (!t) tessera::fuzz::fail("cannot make a built-in trainable");
    const auto state = (*t)->save_state();
    put(dir / ("seed-state-" + kind), "\x01", state.data(), state.size());
    if (!train::write_checkpoint(file, train::checkpoint_tag{7, 3, 11}, state))
      tessera::fuzz::fail("cannot write checkpoint");
    std::ifstream in(file, std::ios::binary);
    const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    put(dir / ("seed-file-" + kind), std::string(1, '\0'), whole.data(), whole.size());
  }
  if (!train::write_checkpoint(file, train::checkpoint_tag{0, 0, 0}, {}))
    tessera::fuzz::fail("cannot write checkpoint");
  std::ifstream in(file, std::ios::binary);
  const std::string empty((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  put(dir / "seed-file-empty-payload", std::string(1, '\0'), empty.data(), empty.size());
  fs::remove(file);
}

/// Journal seeds: valid journals (empty, a few jobs, a large record), a torn one and one with
/// a corrupt record in the middle.
void journal_seeds(const fs::path& dir) {
  const std::string header = tessera::journal_file_header();
  std::string jobs = header;
  std::size_t last = 0, middle = 0;
  for (int id = 1; id <= 3; ++id) {
    if (id == 2) middle = jobs.size();
    last = jobs.size();
    jobs += tessera::encode_journal_record("{\"id\":" + std::to_string(id) +
                                           ",\"kind\":\"mlp\",\"total_steps\":400}");
  }
  const std::string large = header + tessera::encode_journal_record(std::string(2000, 'x'));
  const std::string torn = jobs.substr(0, last + 20);
  std::string corrupt = jobs;
  corrupt[middle + tessera::journal_record_header_size + 3] ^= 0x01;
  for (const auto& [name, bytes] : {std::pair<const char*, const std::string&>{"empty", header},
                                    {"jobs", jobs},
                                    {"large", large},
                                    {"torn", torn},
                                    {"corrupt-middle", corrupt}})
    put(dir / (std::string("seed-") + name), "", bytes.data(), bytes.size());
}

/// Encodes `x` with CAF's binary serializer.
template <class T>
bytes encode(caf::actor_system& sys, const T& x) {
  bytes out;
  caf::binary_serializer sink{sys, out};
  if (sink(const_cast<T&>(x))) tessera::fuzz::fail("cannot encode a seed");
  return out;
}

/// Message seeds: a default value of each registered type (mode byte = its index), and whole
/// caf::messages (mode byte = the count).
void message_seeds(caf::actor_system& sys, const fs::path& dir) {
  const auto names = tessera::fuzz::protocol_type_names(sys.config());
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto value = sys.config().value_factories_by_name.at(names[i])();
    const bytes b = encode(sys, *value);
    const std::string pick(1, static_cast<char>(i));
    put(dir / ("seed-" + std::to_string(i)), pick, b.data(), b.size());
  }
  const std::string whole(1, static_cast<char>(names.size()));
  tessera::actors::heartbeat beat{42};
  const bytes hb = encode(sys, caf::make_message(beat));
  put(dir / "seed-message-heartbeat", whole, hb.data(), hb.size());
  tessera::actors::round_orders orders;
  orders.copies.resize(1);
  orders.copies[0].config = {{"lr", 0.1}};
  orders.copies[0].fork_ranks = {0, 1};
  const bytes ro = encode(sys, caf::make_message(orders, std::int32_t{2}));
  put(dir / "seed-message-orders", whole, ro.data(), ro.size());
}

/// One BASP frame: the header with its payload length, then the payload. The actor ids are
/// the ones each operation carries (none for handshakes and heartbeats, the watched actor for
/// monitor and down messages, sender and receiver for messages).
bytes frame(caf::actor_system& sys, basp::message_type op, const bytes& payload) {
  using mt = basp::message_type;
  basp::header hdr{op, 0, static_cast<std::uint32_t>(payload.size()), 0, 0, 0};
  if (op == mt::server_handshake) hdr.operation_data = basp::version;
  if (op == mt::direct_message || op == mt::routed_message) hdr.source_actor = 1;
  if (op == mt::direct_message || op == mt::routed_message || op == mt::monitor_message)
    hdr.dest_actor = 2;
  if (op == mt::down_message) hdr.source_actor = 2;
  if (!basp::valid(hdr)) tessera::fuzz::fail("a seed frame's header is not valid");
  bytes out = encode(sys, hdr);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

/// BASP seeds: a frame of each operation.
void basp_seeds(caf::actor_system& sys, const fs::path& dir) {
  const caf::node_id me = sys.node();
  const std::vector<caf::strong_actor_ptr> no_stages;
  const std::vector<std::string> app_ids = {"generic-caf-app"};
  const std::set<std::string> iface;
  auto payload = [&](auto&&... xs) {
    bytes out;
    caf::binary_serializer sink{sys, out};
    if (sink(const_cast<std::decay_t<decltype(xs)>&>(xs)...)) tessera::fuzz::fail("encode");
    return out;
  };
  const auto msg = caf::make_message(tessera::actors::heartbeat{2});
  const caf::actor_id aid = 5;
  const caf::error reason = caf::sec::runtime_error;
  const std::pair<const char*, bytes> frames[] = {
      {"server-handshake",
       frame(sys, basp::message_type::server_handshake, payload(me, app_ids, aid, iface))},
      {"client-handshake", frame(sys, basp::message_type::client_handshake, payload(me))},
      {"direct", frame(sys, basp::message_type::direct_message, payload(no_stages, msg))},
      {"routed", frame(sys, basp::message_type::routed_message, payload(me, me, no_stages, msg))},
      {"monitor", frame(sys, basp::message_type::monitor_message, payload(me, me))},
      {"down", frame(sys, basp::message_type::down_message, payload(me, me, reason))},
      {"heartbeat", frame(sys, basp::message_type::heartbeat, {})}};
  for (const auto& [name, b] : frames)
    put(dir / (std::string("seed-") + name), "", b.data(), b.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  for (const char* d : {"checkpoint", "journal", "messages", "basp"})
    fs::create_directories(out / d);
  checkpoint_seeds(out / "checkpoint");
  journal_seeds(out / "journal");
  auto& sys = tessera::fuzz::protocol_system();
  message_seeds(sys, out / "messages");
  basp_seeds(sys, out / "basp");
  return 0;
}
