// libFuzzer target: checkpoint files (runtime/node/train/checkpoint.hpp) and the trainable state
// they carry. The first byte picks what the rest is:
//   even: a whole checkpoint file, read by read_checkpoint_header and read_checkpoint (which
//         must agree on the header);
//   odd:  a payload, as a peer's checkpoint would hold it: wrapped in a valid checkpoint file
//         (write_checkpoint) and loaded by load_trainable_checkpoint into each built-in
//         trainable, whose load_state parses it behind checksums the fuzzer cannot forge.
#include "fuzz/fuzz_support.hpp"
#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/cuda_mlp.hpp"

namespace {

namespace train = tessera::train;

/// One small trainable of each built-in kind (a few parameters, a few examples).
std::vector<std::unique_ptr<train::trainable>> make_trainables() {
  const train::trainable_config small = {
      {"dim", 2}, {"classes", 2}, {"train_size", 8}, {"held_out_size", 4}, {"batch_size", 2}};
  std::vector<std::unique_ptr<train::trainable>> out;
  const auto registry = train::builtin_trainables();
  for (const auto& kind : registry.kinds()) {
    if (kind == train::cuda_mlp_kind) continue;  // needs a GPU; its state is the mlp's
    train::trainable_config config = small;
    if (kind == "mlp") config["hidden"] = 2;
    auto t = registry.make(kind, 1, config);
    if (!t) tessera::fuzz::fail("cannot make a built-in trainable");
    out.push_back(std::move(*t));
  }
  return out;
}

/// Reads the file both ways; a checkpoint that reads must have the header read alone.
void read_file(const std::string& path) {
  auto header = train::read_checkpoint_header(path);
  auto whole = train::read_checkpoint(path);
  if (whole && !header) tessera::fuzz::fail("read_checkpoint accepts what the header read refuses");
  if (whole && (whole->header.job != header->job || whole->header.round != header->round ||
                whole->payload.size() != header->payload_size))
    tessera::fuzz::fail("read_checkpoint and read_checkpoint_header disagree");
}

/// Loads `payload` into each trainable through a checkpoint file.
void load_payload(const std::string& path, const std::vector<std::uint8_t>& payload) {
  static const auto trainables = make_trainables();
  if (!train::write_checkpoint(path, train::checkpoint_tag{7, 3, 11}, payload))
    tessera::fuzz::fail("cannot write checkpoint");
  for (const auto& t : trainables) {
    auto header = train::load_trainable_checkpoint(path, *t);
    if (header && (header->job != 7 || header->round != 3 || header->epoch != 11))
      tessera::fuzz::fail("a checkpoint reads back another job, round or epoch");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tessera::fuzz::scratch_file file(".ckpt");
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    read_file(file.write(data + 1, size - 1));
  else
    load_payload(file.path(), std::vector<std::uint8_t>(data + 1, data + size));
  return 0;
}
