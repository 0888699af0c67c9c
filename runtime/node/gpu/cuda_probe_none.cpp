#include "runtime/node/gpu/cuda_probe.hpp"

// The probe of a build without the CUDA toolkit: it finds no device.

namespace tessera::gpu {

bool cuda_built() { return false; }

probe_result probe_cuda_devices() {
  probe_result r;
  r.why_none = "no CUDA support built (CMake did not find the CUDA toolkit)";
  return r;
}

}  // namespace tessera::gpu
