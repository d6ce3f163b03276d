#include <cuda_runtime.h>

#include "backend/registry.h"
#include "core/half.h"
#include "cuda_backend.h"

namespace tx::cuda {

namespace {

void check(cudaError_t status, const char* what) {
  TX_CHECK(status == cudaSuccess, "cuda: ", what, " failed: ", cudaGetErrorString(status));
}

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

// Makes `index` the calling thread's current device for a scope, then restores the caller's:
// streams and memory belong to one device, and a backend may be used from any thread.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    cudaGetDevice(&previous_);
    if (previous_ != index)
      check(cudaSetDevice(index), "cudaSetDevice");
    else
      previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class DeviceAllocator : public Allocator {
 public:
  explicit DeviceAllocator(int index) : index_(index) {}
  void* allocate(size_t bytes) override {
    DeviceGuard guard(index_);
    void* p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it, or the next launch check would report this failure
      throw Error(str("cuda:", index_, ": out of device memory allocating ", bytes, " bytes (",
                      cudaGetErrorString(status), "); use smaller batches (--max-tokens)"));
    }
    return p;
  }
  void deallocate(void* p, size_t) override {
    DeviceGuard guard(index_);
    cudaFree(p);
  }
  Device device() const override { return Device{DeviceType::cuda, index_}; }

 private:
  int index_;
};

// Writes `bits` (a 2- or 4-byte pattern) into every element.
template <typename T>
__global__ void fill_kernel(T* p, int64_t n, T bits) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = bits;
}

template <typename T>
void launch_fill(void* p, int64_t n, T bits, cudaStream_t stream) {
  int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 65535));
  fill_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<T*>(p), n, bits);
  check(cudaGetLastError(), "fill kernel launch");
}

}  // namespace

std::string cuda_unavailable_reason() {
  int count = 0;
  // With no driver this returns an error rather than a zero count (BUILD-NOTES pitfall 9).
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device found";
  // Until the operators land (pending_ops.inc), a GPU is found but cannot run a model.
  return "the CUDA backend's operators are not implemented yet (it has memory, copies and fill)";
}

CudaBackend::CudaBackend(const BackendOptions& options) : index_(options.device_index) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TX_CHECK(index_ >= 0 && index_ < count, "--device cuda:", index_, ": this machine has ", count,
           " CUDA device(s); pick cuda:0..cuda:", count - 1);
  DeviceGuard guard(index_);
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
  allocator_ = std::make_shared<CachingAllocator>(std::make_unique<DeviceAllocator>(index_));
}

CudaBackend::~CudaBackend() {
  if (stream_) {
    DeviceGuard guard(index_);
    cudaStreamSynchronize(as_stream(stream_));
    cudaStreamDestroy(as_stream(stream_));
  }
}

void CudaBackend::synchronize() {
  DeviceGuard guard(index_);
  check(cudaStreamSynchronize(as_stream(stream_)), "synchronize");
}

void CudaBackend::copy_from_host_impl(const void* src, const Tensor& dst) {
  DeviceGuard guard(index_);
  check(cudaMemcpyAsync(dst.raw(), src, dst.nbytes(), cudaMemcpyHostToDevice, as_stream(stream_)),
        "copy to device");
  // The host buffer may be freed as soon as we return.
  synchronize();
}

void CudaBackend::copy_to_host_impl(const Tensor& src, void* dst) {
  DeviceGuard guard(index_);
  check(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, as_stream(stream_)),
        "copy to host");
  synchronize();
}

void CudaBackend::copy_impl(const Tensor& src, const Tensor& dst) {
  DeviceGuard guard(index_);
  check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                        as_stream(stream_)),
        "device copy");
}

void CudaBackend::fill_impl(const Tensor& x, float value) {
  DeviceGuard guard(index_);
  switch (x.dtype()) {
    case DType::f32:
      launch_fill<float>(x.raw(), x.numel(), value, as_stream(stream_));
      break;
    case DType::i32:
      launch_fill<int32_t>(x.raw(), x.numel(), float_to_i32(value), as_stream(stream_));
      break;
    case DType::f16:
      launch_fill<uint16_t>(x.raw(), x.numel(), float_to_f16(value), as_stream(stream_));
      break;
    case DType::bf16:
      launch_fill<uint16_t>(x.raw(), x.numel(), float_to_bf16(value), as_stream(stream_));
      break;
  }
}

// Operators still to come: each names itself, so a caller learns exactly what is missing.
#define TX_CUDA_PENDING(signature)                                                              \
  void CudaBackend::signature {                                                                 \
    throw Error(std::string("cuda backend: ") + #signature +                                    \
                " is not implemented yet; run with --device cpu until the CUDA backend lands"); \
  }
#include "pending_ops.inc"
#undef TX_CUDA_PENDING

}  // namespace tx::cuda

namespace tx {

void register_cuda_backend() {
  register_backend({"cuda",
                    [](const BackendOptions& o) -> std::unique_ptr<Backend> {
                      return std::make_unique<cuda::CudaBackend>(o);
                    },
                    cuda::cuda_unavailable_reason});
}

}  // namespace tx
