#include "cpu_backend.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/registry.h"
#include "core/half.h"
#include "gemm.h"
#include "parallel.h"

namespace tx::cpu {

namespace {

// 64-byte aligned host memory: a cache line, and the widest SIMD load. Blocks from 1 MiB are
// mapped and unmapped directly: glibc would serve them from its heap once its dynamic mmap
// threshold has risen, where a freed block can stay resident behind a live one, so a cache
// that gives blocks back (CachingAllocator's sweep) would not shrink the process.
class HostAllocator : public Allocator {
 public:
  static constexpr const char* kLessMemory =
      "; smaller batches (--max-tokens, --mini-batch) or a narrower beam (--beam-size) need less";
  static constexpr size_t kMapBytes = size_t(1) << 20;
  void* allocate(size_t bytes) override {
    if (bytes >= kMapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      TX_CHECK(p != MAP_FAILED, "cpu: out of host memory allocating ", bytes, " bytes",
               kLessMemory);
      return p;
    }
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    TX_CHECK(p, "cpu: out of host memory allocating ", bytes, " bytes", kLessMemory);
    return p;
  }
  void deallocate(void* p, size_t bytes) override {
    if (bytes >= kMapBytes)
      munmap(p, bytes);
    else
      std::free(p);
  }
  size_t discard(void* p, size_t bytes, size_t keep) override {
    // Whole pages inside [p + keep, p + bytes) only: the block's own, whether mapped here or
    // carved from glibc's heap (whose bookkeeping lies outside the block).
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t begin = (start + keep + page - 1) / page * page;
    const uintptr_t end = (start + bytes) / page * page;
    if (end <= begin || madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0)
      return bytes;
    return bytes - (end - begin);
  }
  Device device() const override { return Device{DeviceType::cpu, 0}; }
};

}  // namespace

CpuBackend::CpuBackend(const BackendOptions& options)
    : threads_(options.threads > 0 ? options.threads : omp_get_num_procs()),
      allocator_(std::make_shared<CachingAllocator>(std::make_unique<HostAllocator>(),
                                                    options.max_cached_bytes)),
      gemm_(std::make_unique<GemmCache>()) {
  TX_CHECK(options.device_index == 0, "--device cpu:", options.device_index,
           ": there is one cpu device; use --device cpu and --cpu-threads to size it");
  TX_CHECK(!options.tf32,
           "--tf32 is a mode of NVIDIA GPUs' tensor cores; remove it for --device "
           "cpu (fp32 GEMMs there are exact fp32)");
  // oneDNN's OpenMP runtime and our loops share this setting.
  omp_set_num_threads(threads_);
}

CpuBackend::~CpuBackend() = default;

void CpuBackend::on_every_thread(const std::function<void()>& fn) {
  // libgomp keeps its team's threads between regions, and oneDNN runs on the same team.
#pragma omp parallel num_threads(threads_)
  fn();
}

void CpuBackend::copy_from_host_impl(const void* src, const Tensor& dst) {
  std::memcpy(dst.raw(), src, dst.nbytes());
}

void CpuBackend::copy_to_host_impl(const Tensor& src, void* dst) {
  std::memcpy(dst, src.raw(), src.nbytes());
}

void CpuBackend::copy_impl(const Tensor& src, const Tensor& dst) {
  const auto* from = static_cast<const char*>(src.raw());
  auto* to = static_cast<char*>(dst.raw());
  const auto bytes = static_cast<int64_t>(src.nbytes());
  // Apart and large (a decoding step's keys and values into their caches): each thread copies
  // its share, else the other threads wait through a serial copy.
  if (bytes < kCopyGrainBytes || (from < to + bytes && to < from + bytes)) {
    std::memmove(to, from, static_cast<size_t>(bytes));
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t share = (bytes / threads + 63) / 64 * 64;
    const int64_t begin = std::min(bytes, t * share), end = std::min(bytes, begin + share);
    if (begin < end) std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
  }
}

void CpuBackend::fill_impl(const Tensor& x, float value) {
  const int64_t n = x.numel();
  switch (x.dtype()) {
    case DType::f32: {
      float* p = x.data<float>();
#pragma omp parallel for simd if (n >= kElementwiseGrain)
      for (int64_t i = 0; i < n; ++i) p[i] = value;
      break;
    }
    case DType::i32: {
      int32_t* p = x.data<int32_t>();
      const int32_t v = float_to_i32(value);
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::i8: {
      int8_t* p = x.data<int8_t>();
      const int8_t v = float_to_i8(value);
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      break;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t bits = x.dtype() == DType::f16 ? float_to_f16(value) : float_to_bf16(value);
      uint16_t* p = x.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = bits;
      break;
    }
  }
}

void CpuBackend::gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                           const Tensor& c, float alpha, float beta) {
  gemm_->run(a, trans_a, b, trans_b, c, alpha, beta);
}

}  // namespace tx::cpu

namespace tx {

void register_cpu_backend() {
  register_backend({"cpu",
                    [](const BackendOptions& o) -> std::unique_ptr<Backend> {
                      return std::make_unique<cpu::CpuBackend>(o);
                    },
                    nullptr});
}

}  // namespace tx
