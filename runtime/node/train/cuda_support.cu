// What the CUDA MLP runs on besides its kernels (cuda_support.cuh): CUDA and cuBLAS errors,
// and cuBLAS loaded on first use. cuBLAS (with cuBLASLt, ~600 MB of shared objects) is opened
// with dlopen when the first CUDA MLP is made, not linked: every tessera process links this
// library, and mapping cuBLAS at start-up cost each of them ~200 MB of resident memory and
// ~0.1 s (docs/benchmarks/gpus.md, "What linking CUDA costs every process"). The
// pointers keep the header's types.
#include "runtime/node/train/cuda_support.cuh"

#include <dlfcn.h>

#include "runtime/node/train/cuda_mlp.hpp"

namespace tessera::train {

namespace cuda_detail {

namespace {

std::string cuda_text(cudaError_t e) { return cudaGetErrorString(e); }

/// The library's soname for the cuBLAS this was compiled against, and the toolkit's library
/// directory as a second place to look (CMake passes it).
const std::string cublas_soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

/// Resolves one symbol into `slot`; false (with dlerror's text in `why`) when it is missing.
template <class F>
bool resolve(void* lib, const char* name, F& slot, std::string& why) {
  slot = reinterpret_cast<F>(dlsym(lib, name));
  if (slot) return true;
  const char* e = dlerror();
  why = std::string(name) + ": " + (e ? e : "not found");
  return false;
}

/// Opens cuBLAS and resolves the entry points; on failure `why` says what went wrong.
bool open_cublas(cublas_api& api, std::string& why) {
  void* lib = dlopen(cublas_soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef TESSERA_CUDA_LIBRARY_DIR
  if (!lib)
    lib = dlopen((std::string(TESSERA_CUDA_LIBRARY_DIR) + "/" + cublas_soname).c_str(),
                 RTLD_NOW | RTLD_LOCAL);
#endif
  if (!lib) {
    const char* e = dlerror();
    why = "cannot load " + cublas_soname + ": " + (e ? e : "dlopen failed");
    return false;
  }
  return resolve(lib, "cublasGetStatusString", api.status_string, why) &&
         resolve(lib, "cublasCreate_v2", api.create, why) &&
         resolve(lib, "cublasDestroy_v2", api.destroy, why) &&
         resolve(lib, "cublasSetStream_v2", api.set_stream, why) &&
         resolve(lib, "cublasSetAtomicsMode", api.set_atomics_mode, why) &&
         resolve(lib, "cublasSetMathMode", api.set_math_mode, why) &&
         resolve(lib, "cublasSetWorkspace_v2", api.set_workspace, why) &&
         resolve(lib, "cublasSgemm_v2", api.sgemm, why);
}

}  // namespace

error gpu_error(const std::string& what, const std::string& why) {
  return error{error_kind::solver_failed, cuda_mlp_kind + ": " + what + ": " + why};
}

status check_cuda(const char* what, cudaError_t e) {
  if (e == cudaSuccess) return {};
  return gpu_error(what, cuda_text(e));
}

const cublas_api* cublas(std::string* why) {
  static cublas_api api;
  static std::string failure;
  static const bool ok = open_cublas(api, failure);
  if (!ok && why) *why = failure;
  return ok ? &api : nullptr;
}

status check_cublas(const char* what, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return gpu_error(what, std::string("cuBLAS status ") + cublas(nullptr)->status_string(s));
}

}  // namespace cuda_detail

status load_cublas() {
  std::string why;
  if (cuda_detail::cublas(&why)) return {};
  return cuda_detail::gpu_error("cuBLAS", why);
}

}  // namespace tessera::train
