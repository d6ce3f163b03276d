// CudaBackend: the operator table on one NVIDIA GPU (cuBLAS GEMMs, CUDA kernels).
//
// This first cut owns device memory, copies and fill; the operators arrive with the CUDA
// backend issue and, until then, raise a clear error instead of computing anything.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace tx::cuda {

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda:" + std::to_string(index_); }
  Device device() const override { return Device{DeviceType::cuda, index_}; }
  std::shared_ptr<Allocator> allocator() const override { return allocator_; }
  void synchronize() override;

 protected:
  void copy_from_host_impl(const void* src, const Tensor& dst) override;
  void copy_to_host_impl(const Tensor& src, void* dst) override;
  void copy_impl(const Tensor& src, const Tensor& dst) override;
  void fill_impl(const Tensor& x, float value) override;

#define TX_CUDA_PENDING(signature) void signature override;
#include "pending_ops.inc"
#undef TX_CUDA_PENDING

 private:
  int index_;
  std::shared_ptr<Allocator> allocator_;
  void* stream_ = nullptr;  // cudaStream_t, kept opaque so this header needs no CUDA headers
};

// Why no CUDA device can be used here ("" when one can).
std::string cuda_unavailable_reason();

}  // namespace tx::cuda
