// The CUDA MLP's kernels (cuda_mlp_kernels.cuh): one thread per output value, fixed-order loops.
#include "runtime/node/train/cuda_mlp_kernels.cuh"

namespace tessera::train::cuda_detail {

__global__ void gather_rows(const float* x, const std::uint32_t* rows, int n, int dim, float* xb) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::size_t>(n) * dim) return;
  const std::size_t r = i / dim, d = i % dim;
  xb[i] = x[static_cast<std::size_t>(rows[r]) * dim + d];
}

__global__ void add_bias(float* a, const float* b, int n, int width, bool relu, float* h) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::size_t>(n) * width) return;
  const float v = __fadd_rn(a[i], b[i % width]);
  a[i] = v;
  if (relu) h[i] = v > 0.0f ? v : 0.0f;
}

__global__ void softmax_minus_label(float* z, const int* labels, const std::uint32_t* rows, int n,
                                    int c) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  float* zr = z + static_cast<std::size_t>(r) * c;
  float m = zr[0];
  for (int k = 1; k < c; ++k) m = fmaxf(m, zr[k]);
  float s = 0.0f;
  for (int k = 0; k < c; ++k) {
    zr[k] = expf(__fsub_rn(zr[k], m));
    s = __fadd_rn(s, zr[k]);
  }
  for (int k = 0; k < c; ++k) zr[k] = __fdiv_rn(zr[k], s);
  const int y = labels[rows[r]];
  zr[y] = __fsub_rn(zr[y], 1.0f);
}

__global__ void column_sums(const float* a, int n, int width, float* out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float acc = 0.0f;
  for (int r = 0; r < n; ++r) acc = __fadd_rn(acc, a[static_cast<std::size_t>(r) * width + j]);
  out[j] = acc;
}

__global__ void relu_mask(float* dh, const float* pre, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count && pre[i] <= 0.0f) dh[i] = 0.0f;
}

__global__ void scale(float* a, std::size_t count, float f) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) a[i] = __fmul_rn(a[i], f);
}

__global__ void add_into(float* a, const float* b, std::size_t count) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) a[i] = __fadd_rn(a[i], b[i]);
}

__global__ void momentum_update(float* p, float* v, const float* g, std::size_t count, float kf,
                                float lr, float mu) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  v[i] = __fadd_rn(__fmul_rn(mu, v[i]), __fdiv_rn(g[i], kf));
  p[i] = __fsub_rn(p[i], __fmul_rn(lr, v[i]));
}

}  // namespace tessera::train::cuda_detail
