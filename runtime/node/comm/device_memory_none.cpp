// device_memory.hpp in a build without the CUDA toolkit: nothing can touch device memory, and
// every operation says so.
#include "runtime/node/comm/device_memory.hpp"

namespace tessera::comm {

namespace {

const char* const no_cuda = "built without CUDA (CMake did not find the CUDA toolkit)";

error no_cuda_error(const char* what) {
  return error{error_kind::solver_failed, std::string(what) + ": " + no_cuda};
}

}  // namespace

bool built_with_cuda() { return false; }

bool cuda_device_present(std::string* why) {
  if (why) *why = no_cuda;
  return false;
}

int cuda_device_count() { return 0; }

result<std::shared_ptr<pinned_buffer>> pinned_buffer::make(std::size_t) {
  return no_cuda_error("pinned host memory");
}

pinned_buffer::~pinned_buffer() = default;

result<std::unique_ptr<device_buffer>> device_buffer::make(std::size_t, int) {
  return no_cuda_error("device memory");
}

device_buffer::~device_buffer() = default;

status copy_to_host(const float*, std::size_t, int, float*) {
  return no_cuda_error("copy to host");
}

status copy_to_device(const float*, std::size_t, int, float*) {
  return no_cuda_error("copy to device");
}

status copy_between_devices(const float*, std::size_t, int, float*) {
  return no_cuda_error("copy between devices");
}

status synchronize_device(int) { return no_cuda_error("synchronize device"); }

status fill_nan_on_device(float*, std::size_t, int) { return no_cuda_error("fill on device"); }

status reduce_gathered_on_device(const float*, std::size_t, std::size_t, reduce_op, float*, void*) {
  return no_cuda_error("reduce on device");
}

status divide_on_device(float*, std::size_t, float, void*) {
  return no_cuda_error("divide on device");
}

}  // namespace tessera::comm
