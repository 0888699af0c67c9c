// Linear least squares on synthetic data, trained by SGD: a C++ program run as an elastic
// tessera job through the header-only lease client. Deterministic: step s's batch is a pure
// function of s (and of the copy, for forked copies), so a run preempted and resumed from its
// checkpoint ends bitwise equal to one that never stopped. Runs on its own too (no
// TESSERA_LEASE): `example_cpp_program --steps 2000 --checkpoint-dir /tmp/ckpt`.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "tessera_client.hpp"

namespace {

constexpr int dim = 16;

struct options {
  std::int64_t steps = 2000;  // the job's total_steps
  float lr = 0.05f;
  int batch = 32;
  std::string checkpoint_dir = "checkpoints";  // when TESSERA_CHECKPOINT_DIR is not set
};

/// splitmix64: a counter-based generator, so any sample is a pure function of its index.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
float uniform(std::uint64_t key) {  // in [-1, 1)
  return static_cast<float>(mix(key) >> 40) / float(1 << 23) - 1.0f;
}
float true_weight(int i) { return uniform(1000000007ull + std::uint64_t(i)); }

/// One SGD step on the batch of global step `step` for copy `copy` of `copies`; returns the
/// batch's mean squared error / 2.
float sgd_step(std::vector<float>& w, std::int64_t step, int copy, int copies, const options& o) {
  std::vector<float> grad(dim, 0.0f);
  float loss = 0;
  std::uint64_t first = std::uint64_t(step * copies + copy) * std::uint64_t(o.batch);
  for (int b = 0; b < o.batch; ++b) {
    std::uint64_t sample = (first + std::uint64_t(b)) * (dim + 1);
    float x[dim], y = 0.01f * uniform(sample + dim), pred = 0;  // y = w* . x + noise
    for (int i = 0; i < dim; ++i) {
      x[i] = uniform(sample + std::uint64_t(i));
      y += true_weight(i) * x[i];
      pred += w[std::size_t(i)] * x[i];
    }
    float err = pred - y;
    loss += err * err / 2;
    for (int i = 0; i < dim; ++i) grad[std::size_t(i)] += err * x[i];
  }
  for (int i = 0; i < dim; ++i) w[std::size_t(i)] -= o.lr * grad[std::size_t(i)] / float(o.batch);
  return loss / float(o.batch);
}

/// Checkpoint file: "TSLSQ01\0", the step (int64), the dim weights (float32), host order.
constexpr char magic[8] = "TSLSQ01";

bool load(const std::string& path, std::vector<float>& w, std::int64_t& step) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char m[8];
  bool ok = std::fread(m, 1, 8, f) == 8 && std::memcmp(m, magic, 8) == 0 &&
            std::fread(&step, sizeof step, 1, f) == 1 &&
            std::fread(w.data(), sizeof(float), w.size(), f) == w.size();
  std::fclose(f);
  if (!ok) {
    std::cerr << path << ": not a checkpoint of this program\n";
    std::exit(2);
  }
  return true;
}

/// Writes a temporary file next to `path`, then renames it over `path` (atomic).
void save(const std::string& path, const std::vector<float>& w, std::int64_t step) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  bool ok = f && std::fwrite(magic, 1, 8, f) == 8 && std::fwrite(&step, sizeof step, 1, f) == 1 &&
            std::fwrite(w.data(), sizeof(float), w.size(), f) == w.size() && std::fflush(f) == 0 &&
            ::fsync(::fileno(f)) == 0;
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::cerr << "cannot write the checkpoint " << path << ": " << std::strerror(errno) << "\n";
    std::exit(1);
  }
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--steps")
      o.steps = std::atoll(value.c_str());
    else if (key == "--lr")
      o.lr = std::strtof(value.c_str(), nullptr);
    else if (key == "--checkpoint-dir")
      o.checkpoint_dir = value;
    else {
      std::cerr << "usage: " << argv[0] << " [--steps N] [--lr X] [--checkpoint-dir DIR]\n";
      std::exit(2);
    }
  }
  return o;
}

int train(const options& o) {
  const char* env_dir = std::getenv("TESSERA_CHECKPOINT_DIR");
  std::string dir = env_dir && *env_dir ? env_dir : o.checkpoint_dir;
  std::filesystem::create_directories(dir);
  std::string ckpt = dir + "/params.bin";
  std::vector<float> w(dim, 0.0f);
  std::int64_t start = 0;
  load(ckpt, w, start);

  // Warm (renew): the process lives on across rounds while the job stays on this node; it
  // averages (forked) and checkpoints at the lease ends the node flags (the job's
  // checkpoint_every), inside the loop, and after it when told exit unsaved.
  tessera_client::lease lease(start, {}, true);  // hello; the program's own step
  float loss = 0;
  std::int64_t at = start;
  auto lease_end = [&] {
    at = lease.position();
    if (lease.copies() > 1) {  // forked: every copy goes on from the copies' mean
      std::vector<std::vector<float>> buffers{w};
      at = lease.average(buffers).step;
      w = buffers[0];
    }
    if (lease.writer()) save(ckpt, w, at);
  };
  while (lease.position() < o.steps && lease.next()) {
    loss = sgd_step(w, lease.position() - 1, lease.copy(), lease.copies(), o);
    lease.report(loss);
    if (lease.should_checkpoint()) lease_end();
  }
  if (!lease.should_checkpoint()) lease_end();  // the loop ended on a step not flagged
  if (at < o.steps) return 0;                   // the lease ended first: resume in a later lease
  double err = 0;
  for (int i = 0; i < dim; ++i) err += std::pow(double(w[std::size_t(i)] - true_weight(i)), 2);
  std::printf("{\"step\": %lld, \"loss\": %.9g, \"weight_error\": %.9g}\n",
              static_cast<long long>(at), double(loss), std::sqrt(err));
  std::fflush(stdout);
  lease.complete(double(loss));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return train(parse(argc, argv));
  } catch (const tessera_client::lease_error& e) {
    std::cerr << "lease: " << e.what() << "\n";  // the node restarts the job from its checkpoint
    return 1;
  }
}
