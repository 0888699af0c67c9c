#pragma once
/// @file discovery.hpp
/// How a node process learns its GPUs at start, as plain C++: the setting (automatic, off, or
/// a fake device list for tests and demos), the probe passed in as a function (the CUDA one
/// is runtime/node/gpu/cuda_probe.hpp), and the check against the node's server entry.
///
/// A node that finds GPUs runs on them: they must agree with its server entry (else it is
/// refused), and its copies are not throttled by the speed factor. A node that finds none
/// (no CUDA in the build, no device, discovery off) runs as before: on its declared GPUs,
/// each step paced by the server's speed factor.

#include <functional>
#include <string>
#include <vector>

#include "runtime/node/gpu/devices.hpp"
#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"

namespace tessera::gpu {

/// Where a node's devices come from.
enum class discovery_mode {
  automatic,  ///< ask the probe (the CUDA runtime)
  off,        ///< none: the node runs on its declared GPUs, throttled
  fake,       ///< the listed devices, as if found (tests and demos without a GPU)
};

/// The discovery setting of a node process (the launcher reads it from
/// TESSERA_GPU_DISCOVERY; runtime code gets it passed down).
struct discovery {
  discovery_mode mode = discovery_mode::automatic;
  std::vector<device_info> fake;  ///< the devices of mode fake
  /// The node process's own CUDA_VISIBLE_DEVICES ("" = unset): its children's values are
  /// taken from it (visible_devices).
  std::string visible;
};

/// Parses a setting: "" or "auto", "off", or "fake:<devices>" where <devices> is a
/// comma-separated list of "[<count>*]<model name>", e.g.
/// "fake:2*NVIDIA H100 80GB HBM3" or "fake:Tesla V100-SXM2-16GB,Tesla K80" (count 1 to
/// 1024; fake devices have no memory size). Errors (invalid_input) start with `where`.
result<discovery> parse_discovery(const std::string& text, const std::string& where);

/// What a probe found: the devices, or why there are none.
struct probe_result {
  std::vector<device_info> devices;
  std::string why_none;  ///< e.g. "cudaGetDeviceCount: no CUDA-capable device is detected"
};

/// Finds this process's devices (runtime/node/gpu/cuda_probe.hpp's probe_cuda_devices, or a
/// test's).
using probe_fn = std::function<probe_result()>;

/// A node's GPUs once discovered and checked.
struct node_gpus {
  std::vector<device_info> devices;  ///< empty: none found (declared and throttled)
  std::string why_none;              ///< why none were found
  std::string visible;               ///< the node process's own CUDA_VISIBLE_DEVICES
  /// True when the node runs on found GPUs: not throttled, device indices are real.
  bool real() const { return !devices.empty(); }
};

/// Discovers a node's GPUs as `how` says (the probe is called in automatic mode only) and,
/// when any are found, checks them against `srv` (check_devices; `where` names the cluster
/// file). The error is the check's: the node must not start.
result<node_gpus> discover_node_gpus(const server& srv, const discovery& how, const probe_fn& probe,
                                     const std::string& where);

/// One line on what a node runs on: "4 x NVIDIA H100 80GB HBM3 (79.6 GiB, type h100) found,
/// steps not throttled" or "no GPU found (why); runs on its 4 declared v100 GPUs, throttled
/// by its speed factor 0.5".
std::string summary(const node_gpus& g, const server& srv);

}  // namespace tessera::gpu
