#include "runtime/node/gpu/cuda_probe.hpp"

#include <cuda_runtime.h>

namespace tessera::gpu {

bool cuda_built() { return true; }

probe_result probe_cuda_devices() {
  probe_result r;
  int n = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) {
    r.why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return r;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (const cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) {
      // A device the runtime counts but cannot describe: report none rather than a list
      // with a hole, which the server check would misread.
      r.devices.clear();
      r.why_none = "cudaGetDeviceProperties(" + std::to_string(i) + "): " + cudaGetErrorString(e);
      return r;
    }
    r.devices.push_back(device_info{i, p.name, static_cast<std::uint64_t>(p.totalGlobalMem)});
  }
  if (n == 0) r.why_none = "the CUDA runtime counts no device";
  return r;
}

}  // namespace tessera::gpu
