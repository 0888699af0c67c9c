// The CUDA implementation of device_memory.hpp (built when CMake finds the CUDA toolkit).
#include "runtime/node/comm/device_memory.hpp"

#include <cuda_runtime.h>

#include <limits>
#include <string>

namespace tessera::comm {

namespace {

/// Threads per block of the elementwise kernels.
constexpr unsigned block_threads = 256;

error cuda_error(const char* what, cudaError_t e) {
  return error{error_kind::solver_failed,
               std::string("cuda: ") + what + ": " + cudaGetErrorString(e)};
}

/// Blocks covering `count` elements at block_threads each.
unsigned blocks_for(std::size_t count) {
  return static_cast<unsigned>((count + block_threads - 1) / block_threads);
}

/// One thread per element: the sum over the parts in part order (no reassociation: the same
/// sequence of IEEE additions as reference_reduce), then an IEEE division for the mean.
__global__ void reduce_gathered_kernel(const float* gathered, std::size_t n, std::size_t count,
                                       bool mean, float* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float acc = gathered[i];
  for (std::size_t k = 1; k < n; ++k) acc = __fadd_rn(acc, gathered[k * count + i]);
  out[i] = mean ? __fdiv_rn(acc, static_cast<float>(n)) : acc;
}

__global__ void divide_kernel(float* data, std::size_t count, float divisor) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) data[i] = __fdiv_rn(data[i], divisor);
}

__global__ void fill_kernel(float* data, std::size_t count, float value) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) data[i] = value;
}

/// The launch's error, else the stream's (when `wait`).
status launched(const char* what, cudaStream_t stream, bool wait) {
  if (auto e = cudaGetLastError(); e != cudaSuccess) return cuda_error(what, e);
  if (wait)
    if (auto e = cudaStreamSynchronize(stream); e != cudaSuccess) return cuda_error(what, e);
  return {};
}

}  // namespace

bool built_with_cuda() { return true; }

bool cuda_device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    if (why) *why = "cudaGetDeviceCount: no CUDA device";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

result<std::shared_ptr<pinned_buffer>> pinned_buffer::make(std::size_t count) {
  void* p = nullptr;
  if (count > 0)
    if (auto e = cudaMallocHost(&p, count * sizeof(float)); e != cudaSuccess)
      return cuda_error("cudaMallocHost", e);
  return std::shared_ptr<pinned_buffer>(new pinned_buffer(static_cast<float*>(p), count));
}

pinned_buffer::~pinned_buffer() {
  if (data_) cudaFreeHost(data_);
}

result<std::unique_ptr<device_buffer>> device_buffer::make(std::size_t count, int device) {
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  void* p = nullptr;
  if (count > 0)
    if (auto e = cudaMalloc(&p, count * sizeof(float)); e != cudaSuccess)
      return cuda_error("cudaMalloc", e);
  return std::unique_ptr<device_buffer>(new device_buffer(static_cast<float*>(p), count, device));
}

device_buffer::~device_buffer() {
  if (data_) {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
}

namespace {

/// cudaMemcpy of `count` floats on GPU `device` in direction `kind`, waiting for it.
status copy_floats(const float* src, std::size_t count, int device, float* dst, cudaMemcpyKind kind,
                   const char* what) {
  if (count == 0) return {};
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  if (auto e = cudaMemcpy(dst, src, count * sizeof(float), kind); e != cudaSuccess)
    return cuda_error(what, e);
  return {};
}

}  // namespace

status copy_to_host(const float* src, std::size_t count, int device, float* dst) {
  return copy_floats(src, count, device, dst, cudaMemcpyDeviceToHost, "cudaMemcpy device to host");
}

status copy_to_device(const float* src, std::size_t count, int device, float* dst) {
  return copy_floats(src, count, device, dst, cudaMemcpyHostToDevice, "cudaMemcpy host to device");
}

status copy_between_devices(const float* src, std::size_t count, int device, float* dst) {
  return copy_floats(src, count, device, dst, cudaMemcpyDeviceToDevice,
                     "cudaMemcpy device to device");
}

status synchronize_device(int device) {
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  if (auto e = cudaDeviceSynchronize(); e != cudaSuccess)
    return cuda_error("cudaDeviceSynchronize", e);
  return {};
}

status fill_nan_on_device(float* data, std::size_t count, int device) {
  if (count == 0) return {};
  if (auto e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  fill_kernel<<<blocks_for(count), block_threads>>>(data, count,
                                                    std::numeric_limits<float>::quiet_NaN());
  return launched("fill", nullptr, true);
}

status reduce_gathered_on_device(const float* gathered, std::size_t n, std::size_t count,
                                 reduce_op op, float* out, void* stream) {
  if (count == 0 || n == 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
  reduce_gathered_kernel<<<blocks_for(count), block_threads, 0, s>>>(gathered, n, count,
                                                                     op == reduce_op::mean, out);
  return launched("reduce_gathered", s, false);
}

status divide_on_device(float* data, std::size_t count, float divisor, void* stream) {
  if (count == 0) return {};
  auto s = static_cast<cudaStream_t>(stream);
  divide_kernel<<<blocks_for(count), block_threads, 0, s>>>(data, count, divisor);
  return launched("divide", s, false);
}

}  // namespace tessera::comm
