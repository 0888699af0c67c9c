#pragma once
/// @file cuda_support.cuh
/// What the CUDA MLP (cuda_mlp.cu) runs on besides its kernels: errors from CUDA and cuBLAS
/// calls, cuBLAS opened with dlopen on first use (cuda_support.cu says why), and cudaMalloc'd
/// arrays. Internal to runtime/node/train's CUDA sources: not part of the public API (a .cuh,
/// so an install does not copy it).

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "runtime/core/result.hpp"

namespace tessera::train::cuda_detail {

/// An error for a failed CUDA or cuBLAS call.
error gpu_error(const std::string& what, const std::string& why);

/// An error naming `what` and CUDA's reason unless `e` is cudaSuccess.
status check_cuda(const char* what, cudaError_t e);

/// The cuBLAS entry points the MLP calls. cublas_v2.h maps cublasCreate and friends to their
/// "_v2" symbols with macros, hence the symbol names in cuda_support.cu.
struct cublas_api {
  decltype(&cublasGetStatusString) status_string = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetAtomicsMode) set_atomics_mode = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
};

/// The loaded API, opened once per process (the library stays loaded: handles made from it
/// may live until exit); null, with `why` set when given, when it could not be loaded.
const cublas_api* cublas(std::string* why);

/// An error naming `what` and cuBLAS's status unless `s` is CUBLAS_STATUS_SUCCESS (only once
/// cublas() has loaded the library).
status check_cublas(const char* what, cublasStatus_t s);

/// A cudaMalloc'd array of T on the current device, freed on destruction.
template <class T>
class device_array {
 public:
  device_array() = default;
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() {
    if (p_) cudaFree(p_);
  }
  status resize(std::size_t n) {
    if (n <= n_) return {};
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
    if (auto st =
            check_cuda("cudaMalloc", cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
        !st)
      return st;
    n_ = n;
    return {};
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// The training set on one device, shared by the clones of a model.
struct device_dataset {
  device_array<float> x;
  device_array<int> y;
};

}  // namespace tessera::train::cuda_detail
