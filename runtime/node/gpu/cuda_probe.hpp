#pragma once
/// @file cuda_probe.hpp
/// The CUDA runtime's view of this process's GPUs (cudaGetDeviceCount, then
/// cudaGetDeviceProperties for each: name and total memory). Built in its own library,
/// tessera_gpu_cuda: from cuda_probe.cpp, the only file of runtime/ besides the NCCL backend
/// that includes a CUDA header, when CMake finds the CUDA toolkit, else from
/// cuda_probe_none.cpp, whose probe finds nothing and says why.

#include "runtime/node/gpu/discovery.hpp"

namespace tessera::gpu {

/// True when this build has the CUDA runtime (the probe can find devices).
bool cuda_built();

/// The devices the CUDA runtime shows this process (CUDA_VISIBLE_DEVICES applies), in its
/// ordinal order; none, with the runtime's reason, when it has none or fails (no driver).
probe_result probe_cuda_devices();

}  // namespace tessera::gpu
