#pragma once
/// @file device_memory.hpp
/// The CUDA operations the aggregator backends need on device buffers, behind a plain C++
/// interface (no CUDA header here, so plain runtime/ files and tests may include it). Two
/// implementations: device_memory_cuda.cu, built when CMake finds the CUDA toolkit, and
/// device_memory_none.cpp, whose every operation fails with "built without CUDA".
///
/// Streams are passed as `void*` (a cudaStream_t; null is the legacy default stream).

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/node/comm/aggregator.hpp"
#include "runtime/core/result.hpp"

namespace tessera::comm {

/// True when this build has the CUDA implementation.
bool built_with_cuda();

/// Whether a usable CUDA device exists; when not, `why` (if given) says why: "built without
/// CUDA", or what the CUDA runtime reported (e.g. "cudaGetDeviceCount: no CUDA-capable device
/// is detected").
bool cuda_device_present(std::string* why);

/// CUDA devices visible to this process (0 without CUDA or without a device).
int cuda_device_count();

/// Host memory for staging device buffers: page-locked (cudaMallocHost), so copies to and from
/// the device run at full bus speed and need no bounce buffer in the driver.
class pinned_buffer {
 public:
  /// `count` floats of pinned memory. Errors (solver_failed) carry CUDA's reason.
  static result<std::shared_ptr<pinned_buffer>> make(std::size_t count);
  ~pinned_buffer();
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  /// The first element.
  float* data() { return data_; }
  /// Elements.
  std::size_t size() const { return count_; }

 private:
  pinned_buffer(float* data, std::size_t count) : data_(data), count_(count) {}
  float* data_;
  std::size_t count_;
};

/// Device memory (cudaMalloc) on one GPU, freed on destruction.
class device_buffer {
 public:
  /// `count` floats on GPU `device`. Errors (solver_failed) carry CUDA's reason.
  static result<std::unique_ptr<device_buffer>> make(std::size_t count, int device);
  ~device_buffer();
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  /// The first element (a device address).
  float* data() { return data_; }
  /// Elements.
  std::size_t size() const { return count_; }
  /// A view of the whole buffer for the aggregator.
  buffer_view view() { return {data_, count_, memory_kind::device, device_, nullptr}; }

 private:
  device_buffer(float* data, std::size_t count, int device)
      : data_(data), count_(count), device_(device) {}
  float* data_;
  std::size_t count_;
  int device_;
};

/// Copies `count` floats from device address `src` on GPU `device` to host `dst` and waits.
status copy_to_host(const float* src, std::size_t count, int device, float* dst);
/// Copies `count` floats from host `src` to device address `dst` on GPU `device` and waits.
status copy_to_device(const float* src, std::size_t count, int device, float* dst);

/// Copies `count` floats between device addresses on GPU `device` and waits.
status copy_between_devices(const float* src, std::size_t count, int device, float* dst);

/// Waits for all work queued on GPU `device`; its error, if any.
status synchronize_device(int device);

/// Sets `count` device floats at `data` to quiet NaN (what a failed collective leaves), and
/// waits.
status fill_nan_on_device(float* data, std::size_t count, int device);

/// The device twin of reduce_gathered (aggregator.hpp): out[i] = ((g[i] + g[count + i]) + ...)
/// over `n` parts, then / n for mean, one thread per element summing in part order, so the
/// result equals the host definition bit for bit. Enqueued on `stream`; does not wait.
status reduce_gathered_on_device(const float* gathered, std::size_t n, std::size_t count,
                                 reduce_op op, float* out, void* stream);

/// data[i] /= divisor on the device (the mean after a native sum). Enqueued on `stream`.
status divide_on_device(float* data, std::size_t count, float divisor, void* stream);

}  // namespace tessera::comm
