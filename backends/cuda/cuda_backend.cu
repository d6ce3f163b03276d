// CudaBackend core: device selection, the stream and cuBLAS handle, memory, copies, fill, the
// index-error record, and registration.
#include <cublas_v2.h>

#include <cstring>

#include "backend/registry.h"
#include "core/half.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

// Makes `index` the calling thread's current device for a scope, then restores the caller's:
// streams and memory belong to one device, and a backend may be used from any thread.
class DeviceGuard {
 public:
  // `checked` false: on the free path, which runs in destructors, where a throw would end the
  // program instead of reporting the error that is unwinding it.
  explicit DeviceGuard(int index, bool checked = true) {
    cudaGetDevice(&previous_);
    if (previous_ == index) {
      previous_ = -1;
    } else if (checked) {
      check(cudaSetDevice(index), "cudaSetDevice");
    } else if (cudaSetDevice(index) != cudaSuccess) {
      cudaGetLastError();
    }
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Raw device memory; CachingAllocator on top keeps freed blocks for reuse. Blocks are reused in
// stream order (one stream per backend), so a block freed while a kernel still reads it is only
// handed to kernels issued after that one.
class DeviceAllocator : public Allocator {
 public:
  explicit DeviceAllocator(int index) : index_(index) {}
  void* allocate(size_t bytes) override {
    DeviceGuard guard(index_);
    void* p = nullptr;
    cudaError_t status = cudaMalloc(&p, bytes);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear it, or the next launch check would report this failure
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      throw Error(str("cuda:", index_, ": out of GPU memory allocating ", bytes >> 20, " MiB (",
                      free_bytes >> 20, " of ", total_bytes >> 20,
                      " MiB free); use smaller batches (--max-tokens) or a smaller model"));
    }
    return p;
  }
  void deallocate(void* p, size_t) override {
    DeviceGuard guard(index_, /*checked=*/false);
    cudaFree(p);
  }
  Device device() const override { return Device{DeviceType::cuda, index_}; }

 private:
  int index_;
};

// Writes `bits` (a 2- or 4-byte pattern) into every element.
template <typename T>
__global__ void fill_kernel(T* p, int64_t n, T bits) {
  TX_GRID_STRIDE(i, n) p[i] = bits;
}

template <typename T>
void launch_fill(void* p, int64_t n, T bits, cudaStream_t stream) {
  TX_LAUNCH(fill_kernel<T>, blocks_for(n), kThreads, stream)(static_cast<T*>(p), n, bits);
  check_launch("fill kernel");
}

const char* index_op_name(int32_t op) {
  switch (op) {
    case kGatherRows:
      return "gather_rows";
    case kScatterAddRows:
      return "scatter_add_rows";
    case kCrossEntropy:
      return "cross_entropy";
    case kCrossEntropyBackward:
      return "cross_entropy_backward";
    case kAttendCached:
      return "attend_cached (rows)";
  }
  return "cuda operator";
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
  // The kernels are built for sm_80 and sm_90 (plus PTX for newer GPUs): older GPUs cannot run
  // them. Unavailable when no device can; the constructor checks the cuda:N asked for.
  std::string found;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    if (prop.major >= 8) return "";
    found += str(found.empty() ? "" : ", ", "cuda:", i, " ", prop.name, " (", prop.major, ".",
                 prop.minor, ")");
  }
  cudaGetLastError();
  return str(
      "no CUDA device of compute capability 8.0 or newer, which this build's kernels "
      "need (found: ",
      found, ")");
}

CudaBackend::CudaBackend(const BackendOptions& options) : index_(options.device_index) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TX_CHECK(index_ >= 0 && index_ < count, "--device cuda:", index_, ": this machine has ", count,
           " CUDA device(s); pick cuda:0..cuda:", count - 1);
  DeviceGuard guard(index_);
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, index_), "cudaGetDeviceProperties");
  TX_CHECK(prop.major >= 8, "--device cuda:", index_, ": ", prop.name, " has compute capability ",
           prop.major, ".", prop.minor, "; this build's kernels need 8.0 or newer");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
  cublasHandle_t handle;
  cublasStatus_t cs = cublasCreate(&handle);
  TX_CHECK(cs == CUBLAS_STATUS_SUCCESS, "cuda:", index_, ": cublasCreate failed (status ", int(cs),
           ")");
  cublas_ = handle;
  TX_CHECK(cublasSetStream(handle, s) == CUBLAS_STATUS_SUCCESS, "cuda: cublasSetStream failed");
  // Exact fp32 GEMMs unless --tf32: results stay comparable with the CPU backend.
  TX_CHECK(cublasSetMathMode(handle, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                  : CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS,
           "cuda: cublasSetMathMode failed");
  // The record lives in device memory (device atomics on it are plain global atomics); each
  // synchronize() copies it into pinned host memory in stream order before waiting.
  void* record = nullptr;
  check(cudaMalloc(&record, sizeof(IndexErrorRecord)), "cudaMalloc (index error record)");
  errors_device_ = static_cast<IndexErrorRecord*>(record);
  check(cudaMemsetAsync(record, 0, sizeof(IndexErrorRecord), s), "cudaMemset (index error record)");
  void* host_record = nullptr;
  check(cudaMallocHost(&host_record, sizeof(IndexErrorRecord)),
        "cudaMallocHost (index error record)");
  errors_host_ = static_cast<IndexErrorRecord*>(host_record);
  *errors_host_ = IndexErrorRecord{};
  void* scratch = nullptr;
  check(cudaMalloc(&scratch, kReduceBlocks * sizeof(double)), "cudaMalloc (reduction scratch)");
  reduce_scratch_ = static_cast<double*>(scratch);
  allocator_ = std::make_shared<CachingAllocator>(std::make_unique<DeviceAllocator>(index_));
}

CudaBackend::~CudaBackend() {
  // No throwing here: errors while tearing down are ignored.
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(index_);
  if (stream_) cudaStreamSynchronize(as_stream(stream_));
  if (cublas_) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
  if (reduce_scratch_) cudaFree(reduce_scratch_);
  for (StageSlot& slot : stage_) {
    if (slot.read) cudaEventDestroy(static_cast<cudaEvent_t>(slot.read));
    if (slot.host) cudaFreeHost(slot.host);
  }
  if (errors_device_) cudaFree(errors_device_);
  if (errors_host_) cudaFreeHost(errors_host_);
  if (stream_) cudaStreamDestroy(as_stream(stream_));
  if (previous >= 0 && previous != index_) cudaSetDevice(previous);
  cudaGetLastError();
}

void* CudaBackend::enter() const {
  int current = -1;
  cudaGetDevice(&current);
  if (current != index_) check(cudaSetDevice(index_), "cudaSetDevice");
  return stream_;
}

void CudaBackend::raise_index_error() {
  if (errors_host_->flag == 0) return;
  const IndexErrorRecord r = *errors_host_;
  *errors_host_ = IndexErrorRecord{};
  // Clear the device copy so the backend stays usable after the error is handled.
  check(cudaMemsetAsync(errors_device_, 0, sizeof(IndexErrorRecord), as_stream(stream_)),
        "cudaMemset (index error record)");
  check(cudaStreamSynchronize(as_stream(stream_)), "synchronize");
  if (r.op == kCrossEntropy || r.op == kCrossEntropyBackward)
    throw Error(str(index_op_name(r.op), ": target id ", r.value, " in row ", r.position,
                    " is outside the vocabulary [0, ", r.limit,
                    "); check the vocabulary matches the model"));
  throw Error(str(index_op_name(r.op), ": index ", r.value, " at position ", r.position,
                  " is outside [0, ", r.limit, ")"));
}

void CudaBackend::synchronize() {
  DeviceGuard guard(index_);
  // A 32-byte copy in stream order: the record as the kernels left it, then wait for both.
  check(cudaMemcpyAsync(errors_host_, errors_device_, sizeof(IndexErrorRecord),
                        cudaMemcpyDeviceToHost, as_stream(stream_)),
        "copy index error record");
  const cudaError_t status = cudaStreamSynchronize(as_stream(stream_));
  // Kernels run after their launch returned: a fault surfaces here, far from its kernel.
  TX_CHECK(status == cudaSuccess, "cuda:", index_,
           ": a kernel failed: ", cudaGetErrorString(status),
           "; run again with CUDA_LAUNCH_BLOCKING=1 to have the error name the kernel");
  raise_index_error();
}

CudaBackend::StageSlot& CudaBackend::next_stage_slot() {
  StageSlot& slot = stage_[next_stage_];
  next_stage_ = (next_stage_ + 1) % kStageSlots;
  if (!slot.host) {
    check(cudaMallocHost(&slot.host, kStageBytes), "cudaMallocHost (upload staging)");
    cudaEvent_t read;
    check(cudaEventCreateWithFlags(&read, cudaEventDisableTiming), "cudaEventCreate");
    slot.read = read;
  } else {
    check(cudaEventSynchronize(static_cast<cudaEvent_t>(slot.read)),
          "waiting for an upload staging buffer");
  }
  return slot;
}

void CudaBackend::copy_from_host_impl(const void* src, const Tensor& dst) {
  cudaStream_t s = as_stream(enter());
  const size_t bytes = dst.nbytes();
  if (bytes <= kStageBytes) {
    const StageSlot& slot = next_stage_slot();
    std::memcpy(slot.host, src, bytes);
    check(cudaMemcpyAsync(dst.raw(), slot.host, bytes, cudaMemcpyHostToDevice, s),
          "copy to device");
    check(cudaEventRecord(static_cast<cudaEvent_t>(slot.read), s), "cudaEventRecord");
    return;
  }
  check(cudaMemcpyAsync(dst.raw(), src, bytes, cudaMemcpyHostToDevice, s), "copy to device");
  // The host buffer may be freed as soon as we return.
  synchronize();
}

void CudaBackend::copy_to_host_impl(const Tensor& src, void* dst) {
  cudaStream_t s = as_stream(enter());
  check(cudaMemcpyAsync(dst, src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, s), "copy to host");
  synchronize();
}

void CudaBackend::copy_impl(const Tensor& src, const Tensor& dst) {
  cudaStream_t s = as_stream(enter());
  check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, s),
        "device copy");
}

void CudaBackend::fill_impl(const Tensor& x, float value) {
  cudaStream_t s = as_stream(enter());
  switch (x.dtype()) {
    case DType::f32:
      launch_fill<float>(x.raw(), x.numel(), value, s);
      break;
    case DType::i32:
      launch_fill<int32_t>(x.raw(), x.numel(), float_to_i32(value), s);
      break;
    case DType::f16:
      launch_fill<uint16_t>(x.raw(), x.numel(), float_to_f16(value), s);
      break;
    case DType::bf16:
      launch_fill<uint16_t>(x.raw(), x.numel(), float_to_bf16(value), s);
      break;
    case DType::i8:
      launch_fill<int8_t>(x.raw(), x.numel(), float_to_i8(value), s);
      break;
  }
}

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
