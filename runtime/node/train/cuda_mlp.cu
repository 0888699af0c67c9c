// The CUDA MLP (cuda_mlp.hpp): the model on the device, its forward and backward passes and
// its update. Matrices are row-major as in the CPU mlp ([W1 (H x D), b1, W2 (C x H), b2]);
// cuBLAS is column-major, so a row-major R x C matrix is passed as the column-major C x R
// matrix it also is. The kernels are cuda_mlp_kernels.cu's; errors, cuBLAS (loaded on first
// use) and device arrays are cuda_support.cu's.
#include "runtime/node/train/cuda_mlp.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/node/train/cuda_mlp_kernels.cuh"
#include "runtime/node/train/cuda_support.cuh"
#include "runtime/node/train/models.hpp"

namespace tessera::train {

namespace {

using cuda_detail::add_bias;
using cuda_detail::add_into;
using cuda_detail::block_threads;
using cuda_detail::blocks_for;
using cuda_detail::check_cublas;
using cuda_detail::check_cuda;
using cuda_detail::column_sums;
using cuda_detail::cublas;
using cuda_detail::cublas_api;
using cuda_detail::device_array;
using cuda_detail::device_dataset;
using cuda_detail::gather_rows;
using cuda_detail::gpu_error;
using cuda_detail::momentum_update;
using cuda_detail::relu_mask;
using cuda_detail::scale;
using cuda_detail::softmax_minus_label;

/// cuBLAS workspace per object: fixed, so the library never picks a pool buffer of its own.
constexpr std::size_t cublas_workspace_bytes = 4u << 20;

/// Shapes of one network: D inputs, H hidden, C classes.
struct dims {
  int d = 0, h = 0, c = 0;
  std::size_t w1() const { return static_cast<std::size_t>(h) * d; }
  std::size_t w2() const { return static_cast<std::size_t>(c) * h; }
  std::size_t params() const { return w1() + h + w2() + c; }
};

class cuda_mlp final : public device_trainable {
 public:
  /// Takes the host twin (a CPU mlp) and the device data; allocate() must succeed before use.
  cuda_mlp(std::unique_ptr<trainable> twin, mlp_shape shape, std::shared_ptr<device_dataset> data,
           int device)
      : twin_(std::move(twin)), shape_(std::move(shape)), data_(std::move(data)), device_(device) {
    net_ = {shape_.dim, shape_.hidden, shape_.classes};
  }

  ~cuda_mlp() override {
    cudaSetDevice(device_);
    if (handle_) cublas(nullptr)->destroy(handle_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  /// Makes the stream, the cuBLAS handle (deterministic settings) and the device arrays, and
  /// uploads the twin's state.
  status allocate() {
    if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device_)); !st) return st;
    if (auto st = check_cuda("cudaStreamCreate",
                             cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        !st)
      return st;
    std::string why;
    const cublas_api* api = cublas(&why);
    if (!api) return gpu_error("cuBLAS", why);
    if (auto st = check_cublas("cublasCreate", api->create(&handle_)); !st) return st;
    const std::size_t n = net_.params(), b = static_cast<std::size_t>(shape_.batch_size);
    for (auto st : {params_.resize(n), velocity_.resize(n), grad_.resize(n),
                    workspace_.resize(cublas_workspace_bytes / sizeof(float)),
                    xb_.resize(b * net_.d), hpre_.resize(b * net_.h), h_.resize(b * net_.h),
                    dh_.resize(b * net_.h), z_.resize(b * net_.c), rows_.resize(b)})
      if (!st) return st;
    // Reproducible GEMMs: no atomics (split-K reductions in a fixed order), IEEE float math
    // (no TF32 tensor cores), our own fixed workspace, and this object's one stream.
    for (auto st :
         {check_cublas("cublasSetStream", api->set_stream(handle_, stream_)),
          check_cublas("cublasSetAtomicsMode",
                       api->set_atomics_mode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED)),
          check_cublas("cublasSetMathMode", api->set_math_mode(handle_, CUBLAS_PEDANTIC_MATH)),
          check_cublas("cublasSetWorkspace",
                       api->set_workspace(handle_, workspace_.get(), cublas_workspace_bytes))})
      if (!st) return st;
    host_dirty_ = true;
    return push();
  }

  std::string kind() const override { return twin_->kind(); }
  int device() const override { return device_; }

  std::vector<float>& params() override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    host_dirty_ = true;  // the caller may write through the reference
    return twin_->params();
  }
  const std::vector<float>& params() const override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    return static_cast<const trainable&>(*twin_).params();
  }
  std::vector<float>* optimizer_state() override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    host_dirty_ = true;
    return twin_->optimizer_state();
  }
  std::int64_t step() const override { return twin_->step(); }
  void set_step(std::int64_t step) override { twin_->set_step(step); }

  status compute_gradient(int shard_index, int num_shards, std::int64_t step,
                          std::vector<float>& grad_out) const override {
    std::lock_guard<std::mutex> g(mu_);
    if (auto st = gradient_locked(shard_index, num_shards, step, grad_.get()); !st) return st;
    grad_out.resize(net_.params());
    return check_cuda("copy gradient to host",
                      cudaMemcpy(grad_out.data(), grad_.get(), net_.params() * sizeof(float),
                                 cudaMemcpyDeviceToHost));
  }

  status compute_gradient_device(int shard_index, int num_shards, std::int64_t step,
                                 float* grad_out, std::size_t count) const override {
    if (auto st = check_count("compute_gradient_device", count); !st) return st;
    std::lock_guard<std::mutex> g(mu_);
    return gradient_locked(shard_index, num_shards, step, grad_out);
  }

  status apply_gradient(const std::vector<float>& summed_grad, int k) override {
    if (auto st = check_apply(summed_grad.size(), k); !st) return st;
    std::lock_guard<std::mutex> g(mu_);
    if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device_)); !st) return st;
    if (auto st =
            check_cuda("copy gradient to device",
                       cudaMemcpy(grad_.get(), summed_grad.data(),
                                  summed_grad.size() * sizeof(float), cudaMemcpyHostToDevice));
        !st)
      return st;
    return update_locked(grad_.get(), k);
  }

  /// The whole step on the GPU: the K shard gradients summed in shard order on the device
  /// (add_into), then the update; no gradient crosses to the host. Bitwise equal to the default
  /// path (compute_gradient to the host, sum_shard_gradients, apply_gradient), whose host copies
  /// cost up to 18.6x its steps/s (docs/benchmarks/gpus.md, "On a real GPU (H100)").
  status step_on(int k, std::int64_t data_step) override {
    std::lock_guard<std::mutex> g(mu_);
    const std::size_t np = net_.params();
    float* sum = grad_.get();
    if (k > 1) {
      if (auto st = sum_.resize(np); !st) return st;
      sum = sum_.get();
    }
    if (auto st = gradient_locked(0, k, data_step, sum); !st) return st;
    for (int i = 1; i < k; ++i) {
      if (auto st = gradient_locked(i, k, data_step, grad_.get()); !st) return st;
      add_into<<<blocks_for(np), block_threads, 0, stream_>>>(sum, grad_.get(), np);
      if (auto st = check_cuda("sum kernel", cudaGetLastError()); !st) return st;
    }
    return update_locked(sum, k);
  }

  status apply_gradient_device(const float* summed_grad, std::size_t count, int k) override {
    if (auto st = check_apply(count, k); !st) return st;
    std::lock_guard<std::mutex> g(mu_);
    return update_locked(summed_grad, k);
  }

  double loss() const override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    return twin_->loss();
  }
  double held_out_accuracy() const override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    return twin_->held_out_accuracy();
  }

  std::vector<std::uint8_t> save_state() const override {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    return twin_->save_state();
  }

  status load_state(const std::vector<std::uint8_t>& state) override {
    std::lock_guard<std::mutex> g(mu_);
    // The twin checks everything and changes nothing on error. A pending device update is
    // overwritten by the loaded state, so it need not be pulled first.
    if (auto st = twin_->load_state(state); !st) return st;
    host_stale_ = false;
    host_dirty_ = true;
    return push();
  }

  std::unique_ptr<trainable> clone() const override;

 private:
  status check_count(const char* what, std::size_t count) const {
    if (count == net_.params()) return {};
    return error{error_kind::invalid_input, cuda_mlp_kind + ": " + what + ": " +
                                                std::to_string(count) + " values, the model has " +
                                                std::to_string(net_.params()) + " parameters"};
  }

  status check_apply(std::size_t count, int k) const {
    if (k < 1)
      return error{error_kind::invalid_input,
                   cuda_mlp_kind + ": apply_gradient: k must be >= 1, got " + std::to_string(k)};
    return check_count("apply_gradient", count);
  }

  /// Uploads the twin's parameters and velocity when they changed on the host.
  status push() const {
    if (!host_dirty_) return {};
    if (auto st = transfer(true); !st) return st;
    host_dirty_ = false;
    return {};
  }

  /// Downloads parameters and velocity into the twin when the device has newer ones.
  status pull() const {
    if (!host_stale_) return {};
    if (auto st = transfer(false); !st) return st;
    host_stale_ = false;
    return {};
  }

  /// Copies parameters and velocity between the twin and the device (`up`: to the device).
  status transfer(bool up) const {
    if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device_)); !st) return st;
    const std::size_t bytes = net_.params() * sizeof(float);
    const struct {
      float* host;
      float* dev;
    } pairs[] = {{twin_->params().data(), params_.get()},
                 {twin_->optimizer_state()->data(), velocity_.get()}};
    for (const auto& p : pairs) {
      const cudaError_t e = up ? cudaMemcpy(p.dev, p.host, bytes, cudaMemcpyHostToDevice)
                               : cudaMemcpy(p.host, p.dev, bytes, cudaMemcpyDeviceToHost);
      if (auto st = check_cuda(up ? "upload model state" : "download model state", e); !st)
        return st;
    }
    return {};
  }

  /// pull() for the accessors that cannot return an error: a failed download leaves NaN
  /// parameters (a lost device must not pass for a trained model).
  void pull_or_poison() const {
    if (pull()) return;
    auto& p = twin_->params();
    std::fill(p.begin(), p.end(), std::numeric_limits<float>::quiet_NaN());
    host_stale_ = false;
  }

  status gradient_locked(int shard_index, int num_shards, std::int64_t step, float* out) const;
  status update_locked(const float* summed, int k);
  /// C (m x n, column-major, ld m) = op(A) op(B) on the object's handle; see the file comment.
  status gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* a,
              int lda, const float* b, int ldb, float* c) const {
    const float one = 1.0f, zero = 0.0f;
    return check_cublas("cublasSgemm", cublas(nullptr)->sgemm(handle_, ta, tb, m, n, k, &one, a,
                                                              lda, b, ldb, &zero, c, m));
  }

  std::unique_ptr<trainable> twin_;  // host mirror: step, key, checkpoint format, loss
  mlp_shape shape_;
  dims net_;
  std::shared_ptr<device_dataset> data_;
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  mutable std::mutex mu_;            // one stream and one set of scratch arrays: calls take turns
  mutable bool host_dirty_ = false;  // the twin's arrays are newer than the device's
  mutable bool host_stale_ = false;  // the device's arrays are newer than the twin's
  device_array<float> params_, velocity_, workspace_;
  mutable device_array<float> grad_, xb_, hpre_, h_, dh_, z_;
  device_array<float> sum_;  // step_on's shard sum when K > 1 (made on first use)
  mutable device_array<std::uint32_t> rows_;
};

status cuda_mlp::gradient_locked(int shard_index, int num_shards, std::int64_t step,
                                 float* out) const {
  auto rows = shard_rows(*twin_, shard_index, num_shards, step);
  if (!rows) return rows.err();
  if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device_)); !st) return st;
  if (auto st = push(); !st) return st;
  const int n = static_cast<int>(rows->size()), d = net_.d, h = net_.h, c = net_.c;
  const std::size_t np = net_.params();
  if (auto st = check_cuda("clear gradient", cudaMemsetAsync(out, 0, np * sizeof(float), stream_));
      !st)
    return st;
  if (n > 0) {
    if (auto st = check_cuda("upload rows", cudaMemcpyAsync(rows_.get(), rows->data(),
                                                            rows->size() * sizeof(std::uint32_t),
                                                            cudaMemcpyHostToDevice, stream_));
        !st)
      return st;
    const float* w1 = params_.get();
    const float* b1 = w1 + net_.w1();
    const float* w2 = b1 + h;
    const float* b2 = w2 + net_.w2();
    float* gw1 = out;
    float* gb1 = gw1 + net_.w1();
    float* gw2 = gb1 + h;
    float* gb2 = gw2 + net_.w2();
    const std::size_t nh = static_cast<std::size_t>(n) * h, nc = static_cast<std::size_t>(n) * c;
    gather_rows<<<blocks_for(static_cast<std::size_t>(n) * d), block_threads, 0, stream_>>>(
        data_->x.get(), rows_.get(), n, d, xb_.get());
    // Forward: Hpre = Xb W1^T (+ b1), H = relu(Hpre); Z = H W2^T (+ b2).
    status st = gemm(CUBLAS_OP_T, CUBLAS_OP_N, h, n, d, w1, d, xb_.get(), d, hpre_.get());
    add_bias<<<blocks_for(nh), block_threads, 0, stream_>>>(hpre_.get(), b1, n, h, true, h_.get());
    if (st) st = gemm(CUBLAS_OP_T, CUBLAS_OP_N, c, n, h, w2, h, h_.get(), h, z_.get());
    add_bias<<<blocks_for(nc), block_threads, 0, stream_>>>(z_.get(), b2, n, c, false, nullptr);
    softmax_minus_label<<<blocks_for(static_cast<std::size_t>(n)), block_threads, 0, stream_>>>(
        z_.get(), data_->y.get(), rows_.get(), n, c);
    // Backward: gW2 = P^T H, gb2 = column sums of P; dH = (P W2) masked by the ReLU;
    // gW1 = dH^T Xb, gb1 = column sums of dH.
    if (st) st = gemm(CUBLAS_OP_N, CUBLAS_OP_T, h, c, n, h_.get(), h, z_.get(), c, gw2);
    column_sums<<<blocks_for(static_cast<std::size_t>(c)), block_threads, 0, stream_>>>(z_.get(), n,
                                                                                        c, gb2);
    if (st) st = gemm(CUBLAS_OP_N, CUBLAS_OP_N, h, n, c, w2, h, z_.get(), c, dh_.get());
    relu_mask<<<blocks_for(nh), block_threads, 0, stream_>>>(dh_.get(), hpre_.get(), nh);
    if (st) st = gemm(CUBLAS_OP_N, CUBLAS_OP_T, d, h, n, xb_.get(), d, dh_.get(), h, gw1);
    column_sums<<<blocks_for(static_cast<std::size_t>(h)), block_threads, 0, stream_>>>(dh_.get(),
                                                                                        n, h, gb1);
    if (!st) return st;
  }
  // Mean over the global batch, times K (as the CPU mlp scales its shard gradients).
  const auto f =
      static_cast<float>(static_cast<double>(num_shards) / static_cast<double>(shape_.batch_size));
  scale<<<blocks_for(np), block_threads, 0, stream_>>>(out, np, f);
  if (auto st = check_cuda("gradient kernels", cudaGetLastError()); !st) return st;
  return check_cuda("gradient", cudaStreamSynchronize(stream_));
}

status cuda_mlp::update_locked(const float* summed, int k) {
  if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device_)); !st) return st;
  if (auto st = push(); !st) return st;
  const std::size_t np = net_.params();
  momentum_update<<<blocks_for(np), block_threads, 0, stream_>>>(
      params_.get(), velocity_.get(), summed, np, static_cast<float>(k),
      static_cast<float>(shape_.lr), static_cast<float>(shape_.momentum));
  if (auto st = check_cuda("update kernel", cudaGetLastError()); !st) return st;
  if (auto st = check_cuda("update", cudaStreamSynchronize(stream_)); !st) return st;
  host_stale_ = true;
  twin_->set_step(twin_->step() + 1);
  return {};
}

/// A CUDA MLP over `twin` on `device`, sharing `data` when given, else uploading the twin's
/// training set.
result<std::unique_ptr<trainable>> make_on_device(std::unique_ptr<trainable> twin,
                                                  std::shared_ptr<device_dataset> data,
                                                  int device) {
  auto shape = mlp_shape_of(*twin);
  if (!shape) return shape.err();
  if (auto st = check_cuda("cudaSetDevice", cudaSetDevice(device)); !st) return st.err();
  if (!data) {
    const dataset& train = shape->data->train;
    data = std::make_shared<device_dataset>();
    for (auto st : {data->x.resize(train.x.size()), data->y.resize(train.y.size())})
      if (!st) return st.err();
    for (auto st : {check_cuda("upload training set",
                               cudaMemcpy(data->x.get(), train.x.data(),
                                          train.x.size() * sizeof(float), cudaMemcpyHostToDevice)),
                    check_cuda("upload labels",
                               cudaMemcpy(data->y.get(), train.y.data(),
                                          train.y.size() * sizeof(int), cudaMemcpyHostToDevice))})
      if (!st) return st.err();
  }
  auto m = std::make_unique<cuda_mlp>(std::move(twin), std::move(*shape), std::move(data), device);
  if (auto st = m->allocate(); !st) return st.err();
  return std::unique_ptr<trainable>(std::move(m));
}

std::unique_ptr<trainable> cuda_mlp::clone() const {
  std::unique_ptr<trainable> twin;
  {
    std::lock_guard<std::mutex> g(mu_);
    pull_or_poison();
    twin = twin_->clone();
  }
  auto made = make_on_device(std::move(twin), data_, device_);
  return made ? std::move(*made) : nullptr;  // trainable::clone has no error channel
}

}  // namespace

result<std::unique_ptr<trainable>> make_cuda_mlp(std::uint64_t seed, const trainable_config& config,
                                                 cuda_mlp_options options) {
  if (auto st = check_cuda_mlp_config(config); !st) return st.err();
  auto split = split_device_key(config, options.device);
  if (!split) return split.err();
  std::string why;
  if (!cuda_mlp_available(&why)) return error{error_kind::solver_failed, why};
  int devices = 0;
  if (auto st = check_cuda("cudaGetDeviceCount", cudaGetDeviceCount(&devices)); !st)
    return st.err();
  if (split->second >= devices)
    return input_error(cuda_mlp_kind + " config", 0, cuda_device_key,
                       "device " + std::to_string(split->second) + " does not exist (" +
                           std::to_string(devices) + " CUDA devices)");
  auto twin = make_mlp(seed, split->first);
  if (!twin) return twin.err();
  return make_on_device(std::move(*twin), nullptr, split->second);
}

}  // namespace tessera::train
