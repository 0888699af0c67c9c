// Steps per second of the CUDA MLP (mlp_cuda, runtime/node/train/cuda_mlp.hpp) against the same
// model on the CPU (mlp), same seed and configuration, for a few widths. Built where CMake
// finds CUDA; on a machine without a GPU it says why and exits with 77 (skipped).
//
//   build/bench_cuda_trainable_bench [--hidden 256,1024,4096] [--dim 512] [--classes 16]
//       [--batch 256] [--k 1] [--seconds 3]
//
// Each model runs for about --seconds (at least 2 steps after one warm-up step). Printed per
// width, one JSON object: the GPU's name, steps/s on the CPU; on the GPU through train_step
// (the K shard gradients summed on the device, then applied), through the host path it
// replaced (compute_gradient copies each shard's gradient to the host, sum_shard_gradients,
// apply_gradient copies the sum back), and through the device interface
// (compute_gradient_device / apply_gradient_device, K = 1, as the NCCL backend drives it); and
// the speed-ups over the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_cli.hpp"
#include "runtime/node/comm/device_memory.hpp"
#include "runtime/node/train/cuda_mlp.hpp"
#include "runtime/node/train/models.hpp"

using namespace tessera;
using namespace tessera::train;

namespace {

struct options {
  std::vector<int> hidden = {256, 1024, 4096};
  int dim = 512;
  int classes = 16;
  int batch = 256;
  int k = 1;
  double seconds = 3.0;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--hidden")
      o.hidden = bench::parse_list<int>(bench::option_value(argc, argv, i));
    else if (a == "--dim")
      o.dim = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--classes")
      o.classes = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--batch")
      o.batch = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--k")
      o.k = std::atoi(bench::option_value(argc, argv, i).c_str());
    else if (a == "--seconds")
      o.seconds = std::atof(bench::option_value(argc, argv, i).c_str());
    else {
      std::fprintf(stderr,
                   "usage: %s [--hidden 256,1024,4096] [--dim 512] [--classes 16] [--batch 256] "
                   "[--k 1] [--seconds 3]\n",
                   argv[0]);
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  return o;
}

/// Steps per second of `step` run for about `seconds` after one warm-up call (at least 2
/// timed steps); exits 1 with the message on a failed step.
double rate(const std::function<status()>& step, double seconds) {
  auto must = [](const status& st) {
    if (st) return;
    std::fprintf(stderr, "step failed: %s\n", st.err().message.c_str());
    std::exit(1);
  };
  must(step());
  const auto t0 = std::chrono::steady_clock::now();
  int n = 0;
  double elapsed = 0;
  while (n < 2 || elapsed < seconds) {
    must(step());
    ++n;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return n / elapsed;
}

std::unique_ptr<trainable> must_make(result<std::unique_ptr<trainable>> r) {
  if (!r) {
    std::fprintf(stderr, "%s\n", r.err().message.c_str());
    std::exit(1);
  }
  return std::move(*r);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  std::string why;
  if (!cuda_mlp_available(&why)) {
    std::printf("SKIPPED cuda_trainable_bench: %s\n", why.c_str());
    return 77;
  }
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof prop);
  cudaGetDeviceProperties(&prop, 0);
  for (int h : o.hidden) {
    const trainable_config config = {{"hidden", h},
                                     {"dim", o.dim},
                                     {"classes", o.classes},
                                     {"batch_size", o.batch},
                                     {"train_size", 8192},
                                     {"held_out_size", 16},
                                     {"lr", 0.01}};
    auto cpu = must_make(make_mlp(1, config));
    auto gpu = must_make(make_cuda_mlp(1, config));
    auto dev = must_make(make_cuda_mlp(1, config));
    auto* d = dynamic_cast<device_trainable*>(dev.get());
    auto grad = comm::device_buffer::make(dev->num_params(), d->device());
    if (!grad) {
      std::fprintf(stderr, "%s\n", grad.err().message.c_str());
      return 1;
    }
    float* g = (*grad)->data();
    const std::size_t np = dev->num_params();
    const double cpu_rate = rate([&] { return cpu->train_step(o.k); }, o.seconds);
    const double gpu_rate = rate([&] { return gpu->train_step(o.k); }, o.seconds);
    std::vector<std::vector<float>> shards(static_cast<std::size_t>(std::max(1, o.k)));
    std::vector<float> sum;
    const double host_path_rate = rate(
        [&]() -> status {
          for (int i = 0; i < o.k; ++i)
            if (auto st =
                    gpu->compute_gradient(i, o.k, gpu->step(), shards[static_cast<std::size_t>(i)]);
                !st)
              return st;
          if (auto st = sum_shard_gradients(shards, sum); !st) return st;
          return gpu->apply_gradient(sum, o.k);
        },
        o.seconds);
    const double dev_rate = rate(
        [&]() -> status {
          if (auto st = d->compute_gradient_device(0, 1, dev->step(), g, np); !st) return st;
          return d->apply_gradient_device(g, np, 1);
        },
        o.seconds);
    std::printf(
        "{\"device\": \"%s\", \"hidden\": %d, \"dim\": %d, \"classes\": %d, "
        "\"batch\": %d, \"k\": %d, \"params\": %zu, \"cpu_steps_per_s\": %.2f, "
        "\"gpu_steps_per_s\": %.2f, \"gpu_host_path_steps_per_s\": %.2f, "
        "\"gpu_device_path_steps_per_s\": %.2f, \"speedup\": %.1f, "
        "\"speedup_host_path\": %.1f, \"speedup_device_path\": %.1f}\n",
        prop.name, h, o.dim, o.classes, o.batch, o.k, np, cpu_rate, gpu_rate, host_path_rate,
        dev_rate, gpu_rate / cpu_rate, host_path_rate / cpu_rate, dev_rate / cpu_rate);
    std::fflush(stdout);
  }
  return 0;
}
