#pragma once
/// @file cuda_mlp_kernels.cuh
/// The CUDA MLP's kernels (cuda_mlp.cu launches them) and their launch size: one thread per
/// output value and loops in a fixed order, so a result does not depend on scheduling; sums and
/// the update round step by step (__fadd_rn and friends). Internal to runtime/node/train's CUDA
/// sources: not part of the public API (a .cuh, so an install does not copy it).

#include <cstddef>
#include <cstdint>

namespace tessera::train::cuda_detail {

/// Threads per block of every launch.
constexpr unsigned block_threads = 256;

/// Blocks of block_threads that cover `n` values.
inline unsigned blocks_for(std::size_t n) {
  return static_cast<unsigned>((n + block_threads - 1) / block_threads);
}

/// xb[r][d] = x[rows[r]][d]: the shard's examples, row-major.
__global__ void gather_rows(const float* x, const std::uint32_t* rows, int n, int dim, float* xb);

/// a[r][j] += b[j] (n rows of `width`); with `relu`, also h[r][j] = max(a[r][j], 0).
__global__ void add_bias(float* a, const float* b, int n, int width, bool relu, float* h);

/// Row r of z (n x c): softmax (max-subtracted, normaliser summed in class order) minus the
/// one-hot label, in place: dLoss/dlogits.
__global__ void softmax_minus_label(float* z, const int* labels, const std::uint32_t* rows, int n,
                                    int c);

/// out[j] = sum over rows r (in row order) of a[r][j].
__global__ void column_sums(const float* a, int n, int width, float* out);

/// dh[i] = 0 where the ReLU was off (pre[i] <= 0).
__global__ void relu_mask(float* dh, const float* pre, std::size_t count);

/// a[i] *= f: the gradient's scale.
__global__ void scale(float* a, std::size_t count, float f);

/// a[i] += b[i]: one shard's gradient into the running shard-order sum (sum_shard_gradients'
/// float additions, element by element, so the sum has the host's bits).
__global__ void add_into(float* a, const float* b, std::size_t count);

/// v = mu * v + g / k; p = p - lr * v: the CPU mlp's update, rounded step by step (no FMA).
__global__ void momentum_update(float* p, float* v, const float* g, std::size_t count, float kf,
                                float lr, float mu);

}  // namespace tessera::train::cuda_detail
