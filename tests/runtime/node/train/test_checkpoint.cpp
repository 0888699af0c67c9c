// Tests of checkpoint files (runtime/node/train/checkpoint.cpp): round trip, atomic replacement,
// and clear errors for truncated or corrupt files.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/node/train/checkpoint.hpp"
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

TEST_CASE("a checkpoint round-trips job, round and payload, the header reads alone", "[train]") {
  scratch_dir dir("ckpt_roundtrip");
  const auto path = dir.file("job7.ckpt");
  REQUIRE(write_checkpoint(path, {7, 12, 3}, payload));
  CHECK(std::filesystem::file_size(path) == checkpoint_header_size + payload.size());

  auto h = read_checkpoint_header(path);
  REQUIRE(h);
  CHECK(h->job == 7);
  CHECK(h->round == 12);
  CHECK(h->epoch == 3);
  CHECK(h->version == checkpoint_format_version);
  CHECK(h->payload_size == payload.size());

  auto c = read_checkpoint(path);
  REQUIRE(c);
  CHECK(c->payload == payload);
  CHECK(c->header.round == 12);

  // Replacing: a later round overwrites, and an empty payload is fine.
  REQUIRE(write_checkpoint(path, {7, 13, 3}, {}));
  auto c2 = read_checkpoint(path);
  REQUIRE(c2);
  CHECK(c2->header.round == 13);
  CHECK(c2->payload.empty());
  CHECK(dir.entries() == std::vector<std::string>{"job7.ckpt"});  // no temp file left
}

TEST_CASE("truncated checkpoints are reported with the file name", "[train]") {
  scratch_dir dir("ckpt_truncated");
  const auto path = dir.file("a.ckpt");
  REQUIRE(write_checkpoint(path, {1, 2, 0}, payload));
  const auto full = bytes_of(path);

  for (std::size_t keep :
       {std::size_t{0}, std::size_t{5}, std::size_t{20}, checkpoint_header_size, full.size() - 1}) {
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
  REQUIRE(write_checkpoint(path, {1, 2, 0}, payload));
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
  flip(32);  // the epoch
  CHECK(has(read_error(path), "header checksum mismatch"));
  flip(0);  // magic
  CHECK(has(read_error(path), "not a tessera checkpoint (bad magic)"));
  flip(8);  // version
  CHECK(has(read_error(path), "unsupported checkpoint format version 18"));
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
  auto st = write_checkpoint(target, {1, 1, 0}, payload);
  REQUIRE_FALSE(st);
  CHECK(st.err().kind == error_kind::io);
  CHECK(has(st.err().message, target + ": cannot rename"));
  CHECK(dir.entries() == std::vector<std::string>{"occupied"});

  auto missing_dir = write_checkpoint(dir.file("no/such/dir/a.ckpt"), {1, 1, 0}, payload);
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
  REQUIRE(save_trainable_checkpoint(path, {3, 5, 0}, *before));
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
  CHECK(mismatch.err().message.rfind(path + ": softmax_regression state: saved by a 'mlp'", 0) ==
        0);
  CHECK(other->save_state() == state);
}

TEST_CASE("a version-1 checkpoint (no epoch) is refused as an older format", "[train]") {
  scratch_dir dir("ckpt_v1");
  const auto path = dir.file("old.ckpt");
  // A version-1 header: magic, version 1, header size 48, job, round, size, CRCs.
  std::vector<std::uint8_t> b = {'T', 'S', 'R', 'A', 'C', 'K', 'P', 'T', 1, 0, 0, 0, 48, 0, 0, 0};
  b.resize(48, 0);
  write_bytes(path, b);
  CHECK(has(read_error(path),
            "unsupported checkpoint format version 1 (this build reads version 2)"));
}

TEST_CASE("a fence file holds an epoch, a writer older than it is refused", "[train][fence]") {
  scratch_dir dir("ckpt_fence");
  const auto fence = dir.file("job-1.fence");
  auto none = read_fence(fence);
  REQUIRE(none);
  CHECK(*none == 0);  // no fence yet: every epoch may write
  CHECK(check_fence(fence, 0));

  REQUIRE(write_fence(fence, 5));
  auto five = read_fence(fence);
  REQUIRE(five);
  CHECK(*five == 5);
  CHECK(check_fence(fence, 5));
  CHECK(check_fence(fence, 6));
  auto stale = check_fence(fence, 4);
  REQUIRE_FALSE(stale);
  CHECK(has(stale.err().message, fence + " holds epoch 5, newer than this writer's 4"));
  REQUIRE(write_fence(fence, 7));  // replaced atomically
  CHECK(*read_fence(fence) == 7);
  CHECK(dir.entries() == std::vector<std::string>{"job-1.fence"});

  write_bytes(fence, {'x', '\n'});
  auto garbled = read_fence(fence);
  REQUIRE_FALSE(garbled);
  CHECK(has(garbled.err().message, fence + ": not a fence file"));
  CHECK(check_fence(fence, 0));    // a damaged fence must not stall the job's writers
  REQUIRE(write_fence(fence, 9));  // the next fencing replaces it
  CHECK(*read_fence(fence) == 9);
}

TEST_CASE("a write refused before its rename leaves the newer file and no temporary",
          "[train][fence]") {
  scratch_dir dir("ckpt_refused");
  const auto path = dir.file("job-1.r4.ckpt");
  const auto fence = dir.file("job-1.fence");
  REQUIRE(write_checkpoint(path, {1, 4, 2}, payload));
  REQUIRE(write_fence(fence, 2));
  // A stale writer (epoch 1) of the same file: its temporary file is written, then refused.
  bool reached = false;
  write_options stale;
  stale.before_rename = [&] {
    reached = true;
    CHECK(dir.entries().size() == 3);  // the temporary file is there, complete
    return check_fence(fence, 1);
  };
  auto st = write_checkpoint(path, {1, 4, 1}, {9, 9, 9}, stale);
  REQUIRE_FALSE(st);
  CHECK(reached);
  CHECK(has(st.err().message, path + ": not published: fence " + fence));
  auto kept = read_checkpoint(path);
  REQUIRE(kept);
  CHECK(kept->payload == payload);
  CHECK(kept->header.epoch == 2);
  CHECK(dir.entries() == std::vector<std::string>{"job-1.fence", "job-1.r4.ckpt"});
}

TEST_CASE("an injected errno fails a write or a probe like a full directory", "[train][fence]") {
  scratch_dir dir("ckpt_full");
  write_options full;
  full.inject_errno = [] { return ENOSPC; };
  auto st = write_checkpoint(dir.file("a.ckpt"), {1, 1, 0}, payload, full);
  REQUIRE_FALSE(st);
  CHECK(st.err().kind == error_kind::io);
  CHECK(has(st.err().message, "No space left on device"));
  CHECK(dir.entries().empty());

  CHECK(probe_directory(dir.str()));
  CHECK(dir.entries().empty());  // the probe cleans up after itself
  auto probed = probe_directory(dir.str(), full);
  REQUIRE_FALSE(probed);
  CHECK(has(probed.err().message,
            dir.str() + ": cannot write a file in the directory: No space left on device"));
  CHECK(dir.entries().empty());
  auto missing = probe_directory(dir.file("absent"));
  REQUIRE_FALSE(missing);
  CHECK(has(missing.err().message, dir.file("absent") + ": cannot create a file in the directory"));
}
