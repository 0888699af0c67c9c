// The CUDA MLP (runtime/node/train/cuda_mlp.hpp): its configuration, registry entry and host twin
// without a GPU; its training, determinism and checkpoint exchange with the CPU mlp on a GPU
// (tag [gpu]; each skips here with CUDA's reason).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/train/checkpoint.hpp"
#include "runtime/node/train/cuda_mlp.hpp"
#include "runtime/node/train/models.hpp"
#include "tests/support.hpp"

using namespace tessera;
using namespace tessera::train;

namespace {

/// A small problem where the MLP learns within a few dozen steps.
const trainable_config small = {
    {"dim", 6},         {"classes", 3}, {"hidden", 16},           {"train_size", 300},
    {"batch_size", 24}, {"lr", 0.1},    {"clusters_per_class", 2}};

/// True (after saying why, and checking that making one fails cleanly) without a GPU.
bool skip_without_gpu(const char* what) {
  std::string why;
  if (cuda_mlp_available(&why)) return false;
  WARN("SKIPPED " << what << ": " << why);
  auto m = make_cuda_mlp(1, small);
  CHECK_FALSE(m);
  return true;
}

std::unique_ptr<trainable> made(result<std::unique_ptr<trainable>> r) {
  if (!r) FAIL(r.err().message);
  return std::move(*r);
}

/// Runs `steps` steps at scale `k`.
void run_steps(trainable& t, int steps, int k) {
  for (int i = 0; i < steps; ++i) REQUIRE(t.train_step(k));
}

}  // namespace

TEST_CASE("split_device_key: the GPU index comes off the configuration, the rest is the mlp's",
          "[train][cuda]") {
  auto none = split_device_key(small, 2);
  REQUIRE(none);
  CHECK(none->second == 2);
  CHECK(none->first == small);
  auto with = small;
  with[cuda_device_key] = 3;
  auto split = split_device_key(with, 0);
  REQUIRE(split);
  CHECK(split->second == 3);
  CHECK(split->first == small);
  for (double bad : {-1.0, 1.5, 1024.0, std::nan("")}) {
    auto r = split_device_key({{cuda_device_key, bad}}, 0);
    REQUIRE_FALSE(r);
    CHECK(r.err().kind == error_kind::invalid_input);
    CHECK(r.err().message.find("device") != std::string::npos);
  }
}

TEST_CASE(
    "mlp_cuda's state does not depend on its device: the twin of any device saves the "
    "mlp's bytes",
    "[train][cuda]") {
  auto with = small;
  with[cuda_device_key] = 5;
  auto split = split_device_key(with, 0);
  REQUIRE(split);
  auto twin = made(make_mlp(9, split->first));
  auto cpu = made(make_mlp(9, small));
  CHECK(twin->save_state() == cpu->save_state());
  CHECK(cpu->load_state(twin->save_state()));
}

TEST_CASE(
    "mlp_cuda in the registry: checked like the mlp where CUDA is built, a clear error "
    "where it is not or no GPU is present",
    "[train][cuda]") {
  const auto reg = builtin_trainables();
  REQUIRE(reg.contains(cuda_mlp_kind));
  CHECK(reg.description(cuda_mlp_kind).find("CUDA") != std::string::npos);
  auto good = small;
  good[cuda_device_key] = 1;
  auto checked = reg.check(cuda_mlp_kind, 1, good);
  auto bad_hidden = reg.check(cuda_mlp_kind, 1, {{"hidden", 0}});
  REQUIRE_FALSE(bad_hidden.ok());
  CHECK(bad_hidden.err().kind == error_kind::invalid_input);
  if (comm::built_with_cuda()) {
    CHECK(checked.ok());
    CHECK(bad_hidden.err().message.find("hidden") != std::string::npos);
  } else {
    REQUIRE_FALSE(checked.ok());
    CHECK(checked.err().message.find("built without CUDA") != std::string::npos);
  }
  std::string why;
  if (cuda_mlp_available(&why)) {
    WARN("the no-GPU error check does not apply: a CUDA GPU is present");
    CHECK(why.empty());
    return;
  }
  CHECK(why.find("mlp_cuda needs a CUDA GPU") != std::string::npos);
  auto m = reg.make(cuda_mlp_kind, 1, small);
  REQUIRE_FALSE(m);
  CHECK(m.err().message.find("mlp_cuda") != std::string::npos);
  CHECK(m.err().message.find(comm::built_with_cuda() ? "GPU" : "CUDA") != std::string::npos);
}

TEST_CASE("shard_rows: the K shards partition the batch the whole-batch draw gives", "[train]") {
  auto m = made(make_mlp(4, small));
  auto whole = shard_rows(*m, 0, 1, 7);
  REQUIRE(whole);
  CHECK(whole->size() == 24);
  for (int k : {2, 5, 24, 30}) {
    std::vector<std::uint32_t> joined;
    for (int i = 0; i < k; ++i) {
      auto part = shard_rows(*m, i, k, 7);
      REQUIRE(part);
      joined.insert(joined.end(), part->begin(), part->end());
    }
    CHECK(joined == *whole);
  }
  for (std::uint32_t r : *whole) CHECK(r < 300u);
  CHECK(*shard_rows(*m, 0, 1, 8) != *whole);
  auto bad = shard_rows(*m, 3, 3, 0);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("outside [0, 3)") != std::string::npos);
  auto shape = mlp_shape_of(*m);
  REQUIRE(shape);
  CHECK(shape->hidden == 16);
  CHECK(shape->dim == 6);
  CHECK(shape->classes == 3);
  auto soft = made(make_softmax_regression(4, {}));
  CHECK_FALSE(mlp_shape_of(*soft));
  CHECK(shard_rows(*soft, 0, 2, 0));
}

// ---- on a GPU ---------------------------------------------------------------------------

TEST_CASE(
    "mlp_cuda on a GPU: steps are bitwise equal to themselves across a checkpoint and "
    "resume",
    "[train][cuda][gpu]") {
  if (skip_without_gpu("the checkpoint-and-resume check")) return;
  test::scratch_dir dir("cuda_resume");
  const std::string path = dir.file("cuda.ckpt");
  auto a = made(make_cuda_mlp(11, small));
  CHECK(a->kind() == "mlp");
  run_steps(*a, 5, 4);
  REQUIRE(save_trainable_checkpoint(path, {1, 5, 1}, *a));
  run_steps(*a, 6, 4);
  auto b = made(make_cuda_mlp(11, small));
  REQUIRE(load_trainable_checkpoint(path, *b));
  CHECK(b->step() == 5);
  run_steps(*b, 6, 4);
  CHECK(test::same_bits(a->params(), b->params()));
  CHECK(test::same_bits(*a->optimizer_state(), *b->optimizer_state()));
  auto c = a->clone();
  REQUIRE(c);
  run_steps(*a, 2, 3);
  run_steps(*c, 2, 3);
  CHECK(test::same_bits(a->params(), c->params()));
}

TEST_CASE("mlp_cuda on a GPU: the loss goes down", "[train][cuda][gpu]") {
  if (skip_without_gpu("the training check")) return;
  auto m = made(make_cuda_mlp(12, small));
  const double before = m->loss();
  run_steps(*m, 60, 2);
  const double after = m->loss();
  INFO("loss " << before << " -> " << after);
  CHECK(after < 0.7 * before);
  CHECK(m->held_out_accuracy() > 0.5);
}

TEST_CASE(
    "mlp_cuda on a GPU: shard gradients are deterministic, close to the CPU's, and one "
    "update gives the CPU's bits",
    "[train][cuda][gpu]") {
  if (skip_without_gpu("the gradient checks")) return;
  auto gpu = made(make_cuda_mlp(13, small));
  auto cpu = made(make_mlp(13, small));
  CHECK(test::same_bits(gpu->params(), cpu->params()));
  std::vector<std::vector<float>> shards(3), again(3), on_cpu(3);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(gpu->compute_gradient(i, 3, 4, shards[static_cast<std::size_t>(i)]));
    REQUIRE(gpu->compute_gradient(i, 3, 4, again[static_cast<std::size_t>(i)]));
    REQUIRE(cpu->compute_gradient(i, 3, 4, on_cpu[static_cast<std::size_t>(i)]));
    CHECK(test::same_bits(shards[static_cast<std::size_t>(i)], again[static_cast<std::size_t>(i)]));
  }
  std::vector<float> sum, sum_again, sum_cpu;
  REQUIRE(sum_shard_gradients(shards, sum));
  REQUIRE(sum_shard_gradients(again, sum_again));
  REQUIRE(sum_shard_gradients(on_cpu, sum_cpu));
  CHECK(test::same_bits(sum, sum_again));
  double worst = 0;
  for (std::size_t i = 0; i < sum.size(); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(sum[i] - sum_cpu[i])));
  INFO("largest GPU-CPU gradient difference " << worst);
  CHECK(worst < 1e-4);
  auto* dev = dynamic_cast<device_trainable*>(gpu.get());
  REQUIRE(dev);
  auto buf = comm::device_buffer::make(sum.size(), dev->device());
  REQUIRE(buf);
  REQUIRE(dev->compute_gradient_device(1, 3, 4, (*buf)->data(), sum.size()));
  std::vector<float> via_device(sum.size());
  REQUIRE(comm::copy_to_host((*buf)->data(), sum.size(), dev->device(), via_device.data()));
  CHECK(test::same_bits(via_device, shards[1]));
  REQUIRE(gpu->apply_gradient(sum_cpu, 3));
  REQUIRE(cpu->apply_gradient(sum_cpu, 3));
  CHECK(test::same_bits(gpu->params(), cpu->params()));
  CHECK(test::same_bits(*gpu->optimizer_state(), *cpu->optimizer_state()));
}

TEST_CASE("mlp_cuda on a GPU: a step summed on the device has the host path's bits",
          "[train][cuda][gpu]") {
  if (skip_without_gpu("the device-step check")) return;
  for (int k : {1, 2, 3}) {
    INFO("K = " << k);
    auto dev = made(make_cuda_mlp(14, small));
    auto host = made(make_cuda_mlp(14, small));
    for (int step = 0; step < 6; ++step) {
      // The device step on a forked copy's kind of batch (data step != step counter).
      const std::int64_t data_step = 3 * step + 1;
      REQUIRE(dev->train_step_on(k, data_step));
      std::vector<std::vector<float>> shards(static_cast<std::size_t>(k));
      for (int i = 0; i < k; ++i)
        REQUIRE(host->compute_gradient(i, k, data_step, shards[static_cast<std::size_t>(i)]));
      std::vector<float> sum;
      REQUIRE(sum_shard_gradients(shards, sum));
      REQUIRE(host->apply_gradient(sum, k));
    }
    CHECK(dev->step() == 6);
    CHECK(test::same_bits(dev->params(), host->params()));
    CHECK(test::same_bits(*dev->optimizer_state(), *host->optimizer_state()));
  }
  auto m = made(make_cuda_mlp(14, small));
  auto bad = m->train_step_on(0, 0);
  REQUIRE_FALSE(bad);
  CHECK(bad.err().kind == error_kind::invalid_input);
  CHECK(m->step() == 0);
}

TEST_CASE("mlp_cuda on a GPU: a checkpoint moves to a CPU mlp and back", "[train][cuda][gpu]") {
  if (skip_without_gpu("the CPU-GPU checkpoint exchange")) return;
  test::scratch_dir dir("cuda_exchange");
  const std::string path = dir.file("exchange.ckpt");
  auto gpu = made(make_cuda_mlp(14, small));
  run_steps(*gpu, 4, 2);
  REQUIRE(save_trainable_checkpoint(path, {2, 4, 1}, *gpu));
  auto cpu = made(make_mlp(14, small));
  REQUIRE(load_trainable_checkpoint(path, *cpu));
  CHECK(cpu->save_state() == gpu->save_state());
  run_steps(*cpu, 3, 2);
  REQUIRE(save_trainable_checkpoint(path, {2, 7, 1}, *cpu));
  auto back = made(make_cuda_mlp(14, small));
  REQUIRE(load_trainable_checkpoint(path, *back));
  CHECK(back->step() == 7);
  CHECK(back->save_state() == cpu->save_state());
  run_steps(*back, 2, 2);  // and it trains on from there
  CHECK(back->step() == 9);
  auto other = small;
  other["hidden"] = 8;
  auto mismatched = made(make_cuda_mlp(14, other));
  CHECK_FALSE(load_trainable_checkpoint(path, *mismatched));
}

namespace {

/// The output of a shell command.
std::string command_output(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace

TEST_CASE("cuBLAS is opened on first use, not linked into every process", "[train]") {
  // The test binary links everything the tessera CLI links: cuBLAS must not be among its
  // load-time dependencies (it costs every process ~200 MB of RSS when it is).
  const std::string deps = command_output("ldd /proc/" + std::to_string(getpid()) + "/exe");
  REQUIRE(deps.find("libc.so") != std::string::npos);  // ldd worked
  CHECK(deps.find("libcublas") == std::string::npos);
  const auto loaded = load_cublas();
  if (!comm::built_with_cuda()) {
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.err().message.find("built without CUDA") != std::string::npos);
    return;
  }
  // The toolkit this was built with is on this machine, so the library loads without a GPU,
  // and afterwards it is mapped.
  REQUIRE(loaded.ok());
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  CHECK(all.str().find("libcublas") != std::string::npos);
}
