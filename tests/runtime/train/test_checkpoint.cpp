// Tests of checkpoint files (runtime/train/checkpoint.cpp): round trip, atomic replacement,
// and clear errors for truncated or corrupt files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/train/checkpoint.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::train;
using tessera::test::has;
using tessera::test::make_trainable;
using tessera::test::same_bits;
using tessera::test::scratch_dir;

namespace {

std::vector<std::uint8_t> bytes_of(const std::string& path) {
  const auto text = tessera::test::file_contents(path);
  return {text.begin(), text.end()};
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// The error of reading `path`; fails the test when it reads fine.
std::string read_error(const std::string& path) {
  auto r = read_checkpoint(path);
  REQUIRE_FALSE(r);
  CHECK(r.err().kind == error_kind::invalid_input);
  CHECK(r.err().message.rfind(path + ": ", 0) == 0);  // names the file first
  return r.err().message;
}

const std::vector<std::uint8_t> payload = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 250, 0, 42};

}  // namespace

TEST_CASE("crc32 is the IEEE CRC-32 and can be continued", "[train]") {
  const std::string s = "123456789";
  CHECK(crc32(s.data(), s.size()) == 0xCBF43926U);
  CHECK(crc32(s.data() + 4, 5, crc32(s.data(), 4)) == 0xCBF43926U);
  CHECK(crc32(nullptr, 0) == 0U);
}

TEST_CASE("a checkpoint round-trips job, round and payload, the header reads alone", "[train]") {
  scratch_dir dir("ckpt_roundtrip");
  const auto path = dir.file("job7.ckpt");
  REQUIRE(write_checkpoint(path, 7, 12, payload));
  CHECK(std::filesystem::file_size(path) == checkpoint_header_size + payload.size());

  auto h = read_checkpoint_header(path);
  REQUIRE(h);
  CHECK(h->job == 7);
  CHECK(h->round == 12);
  CHECK(h->version == checkpoint_format_version);
  CHECK(h->payload_size == payload.size());

  auto c = read_checkpoint(path);
  REQUIRE(c);
  CHECK(c->payload == payload);
  CHECK(c->header.round == 12);

  // Replacing: a later round overwrites, and an empty payload is fine.
  REQUIRE(write_checkpoint(path, 7, 13, {}));
  auto c2 = read_checkpoint(path);
  REQUIRE(c2);
  CHECK(c2->header.round == 13);
  CHECK(c2->payload.empty());
  CHECK(dir.entries() == std::vector<std::string>{"job7.ckpt"});  // no temp file left
}

TEST_CASE("truncated checkpoints are reported with the file name", "[train]") {
  scratch_dir dir("ckpt_truncated");
  const auto path = dir.file("a.ckpt");
  REQUIRE(write_checkpoint(path, 1, 2, payload));
  const auto full = bytes_of(path);

  for (std::size_t keep : {std::size_t{0}, std::size_t{5}, std::size_t{20},
                           checkpoint_header_size, full.size() - 1}) {
    INFO("keeping " << keep << " bytes");
    write_bytes(path, {full.begin(), full.begin() + static_cast<std::ptrdiff_t>(keep)});
    CHECK(has(read_error(path), "truncated"));
    CHECK_FALSE(read_checkpoint_header(path));
  }
  auto longer = full;
  longer.push_back(0);
  write_bytes(path, longer);
  CHECK(has(read_error(path), "1 unexpected bytes after the payload"));
}

TEST_CASE("a flipped byte anywhere is caught", "[train]") {
  scratch_dir dir("ckpt_flipped");
  const auto path = dir.file("a.ckpt");
  REQUIRE(write_checkpoint(path, 1, 2, payload));
  const auto good = bytes_of(path);

  auto flip = [&](std::size_t at) {
    auto b = good;
    b[at] ^= 0x10;
    write_bytes(path, b);
  };
  flip(checkpoint_header_size + 3);  // payload
  CHECK(has(read_error(path), "payload checksum mismatch"));
  CHECK(read_checkpoint_header(path));  // the header alone is still sound

  flip(24);  // the round number
  CHECK(has(read_error(path), "header checksum mismatch"));
  flip(0);  // magic
  CHECK(has(read_error(path), "not a tessera checkpoint (bad magic)"));
  flip(8);  // version
  CHECK(has(read_error(path), "unsupported checkpoint format version 17"));
  for (std::size_t at = 0; at < good.size(); ++at) {
    flip(at);
    INFO("flipped byte " << at);
    CHECK_FALSE(read_checkpoint(path));
  }
}

TEST_CASE("failed writes report the path and leave no temporary file", "[train]") {
  scratch_dir dir("ckpt_fail");
  // The target is a non-empty directory: the final rename fails.
  const auto target = dir.file("occupied");
  std::filesystem::create_directories(std::filesystem::path(target) / "inside");
  auto st = write_checkpoint(target, 1, 1, payload);
  REQUIRE_FALSE(st);
  CHECK(st.err().kind == error_kind::io);
  CHECK(has(st.err().message, target + ": cannot rename"));
  CHECK(dir.entries() == std::vector<std::string>{"occupied"});

  auto missing_dir = write_checkpoint(dir.file("no/such/dir/a.ckpt"), 1, 1, payload);
  REQUIRE_FALSE(missing_dir);
  CHECK(has(missing_dir.err().message, "cannot create a temporary file"));

  auto missing = read_checkpoint(dir.file("absent.ckpt"));
  REQUIRE_FALSE(missing);
  CHECK(missing.err().kind == error_kind::io);
  CHECK(has(missing.err().message, dir.file("absent.ckpt")));
}

TEST_CASE("a trainable checkpointed at a round boundary resumes bitwise-identically", "[train]") {
  scratch_dir dir("ckpt_resume");
  const auto path = dir.file("job3.ckpt");
  auto whole = make_trainable("mlp", 17);
  for (int i = 0; i < 40; ++i) REQUIRE(whole->train_step(4));

  auto before = make_trainable("mlp", 17);
  for (int i = 0; i < 25; ++i) REQUIRE(before->train_step(4));
  REQUIRE(save_trainable_checkpoint(path, 3, 5, *before));
  before.reset();

  auto after = make_trainable("mlp", 17);
  auto h = load_trainable_checkpoint(path, *after);
  REQUIRE(h);
  CHECK(h->job == 3);
  CHECK(h->round == 5);
  CHECK(after->step() == 25);
  for (int i = 0; i < 15; ++i) REQUIRE(after->train_step(4));
  CHECK(same_bits(whole->params(), after->params()));

  // Loading a checkpoint of another kind fails, names the file and changes nothing.
  auto other = make_trainable("softmax_regression", 17);
  const auto state = other->save_state();
  auto mismatch = load_trainable_checkpoint(path, *other);
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.err().message.rfind(path + ": softmax_regression state: saved by a 'mlp'", 0) == 0);
  CHECK(other->save_state() == state);
}
