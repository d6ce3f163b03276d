// CudaBackend: the operator table on one NVIDIA GPU: cuBLAS for the GEMMs, CUDA kernels for the
// rest (one file per family, like backends/cpu), everything issued on one stream per backend.
//
// Index errors (gather_rows, scatter_add_rows, cross_entropy) are detected by the kernels, which
// record the first bad id in a small device record; synchronize() (and so every copy to and from
// the host) copies it back and raises it as tx::Error. This header needs no CUDA headers: handles
// are kept opaque.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace tx::cuda {

// What a kernel writes when it meets an out-of-range index (first one wins).
struct IndexErrorRecord {
  int32_t flag;      // 0 = none
  int32_t op;        // IndexOp
  int64_t value;     // the offending id
  int64_t position;  // its position in the index / target tensor
  int64_t limit;     // the valid range is [0, limit)
};

enum IndexOp : int32_t {
  kGatherRows = 1,
  kScatterAddRows = 2,
  kCrossEntropy = 3,
  kCrossEntropyBackward = 4,
  kAttendCached = 5
};

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda:" + std::to_string(index_); }
  Device device() const override { return Device{DeviceType::cuda, index_}; }
  std::shared_ptr<Allocator> allocator() const override { return allocator_; }
  void synchronize() override;
  // cuBLAS runs bf16 and f16 operands on the tensor cores (sm_80 and later, which tx builds
  // for).
  std::string half_gemm_missing(DType) const override { return ""; }

 protected:
  void copy_from_host_impl(const void* src, const Tensor& dst) override;
  void copy_to_host_impl(const Tensor& src, void* dst) override;
  void copy_impl(const Tensor& src, const Tensor& dst) override;
  void fill_impl(const Tensor& x, float value) override;
  void gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta) override;
  void gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                      float alpha, float beta) override;
  void pack_weight_impl(PackedWeight& p) override;
  void gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c, const Tensor& bias,
                        Activation act) override;
  void add_bias_impl(const Tensor& x, const Tensor& bias, const Tensor& y) override;
  void add_impl(const Tensor& a, const Tensor& b, const Tensor& y) override;
  void axpy_impl(float alpha, const Tensor& x, const Tensor& y) override;
  void scale_impl(const Tensor& x, float alpha, const Tensor& y) override;
  void relu_impl(const Tensor& x, const Tensor& y) override;
  void relu_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx,
                          bool accumulate) override;
  void swish_impl(const Tensor& x, const Tensor& y) override;
  void swish_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& dx,
                           bool accumulate) override;
  void dropout_impl(const Tensor& x, float p, uint64_t seed, uint64_t offset,
                    const Tensor& y) override;
  void dropout_backward_impl(const Tensor& dy, float p, uint64_t seed, uint64_t offset,
                             const Tensor& dx, bool accumulate) override;
  void add_positions_impl(const Tensor& x, int64_t start, const Tensor& y,
                          math::PositionLayout layout) override;
  void cast_impl(const Tensor& x, const Tensor& y) override;
  void softmax_impl(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
                    const Tensor& y) override;
  void softmax_backward_impl(const Tensor& y, const Tensor& dy, float scale, const Tensor& dx,
                             bool accumulate) override;
  void split_heads_impl(const Tensor& x, int heads, const Tensor& y, bool accumulate) override;
  void merge_heads_impl(const Tensor& x, const Tensor& y, bool accumulate) override;
  void attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                          const Tensor& rows, int64_t length, float scale,
                          const Tensor& out) override;
  void attend_memory_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                          const Tensor& lengths, float scale, const Tensor& out) override;
  void log_softmax_impl(const Tensor& x, const Tensor& y) override;
  void log_softmax_backward_impl(const Tensor& y, const Tensor& dy, const Tensor& dx) override;
  void layer_norm_impl(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                       const Tensor& y, const Tensor& mean, const Tensor& rstd) override;
  void layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                const Tensor& dgamma, const Tensor& dbeta,
                                bool accumulate) override;
  void cross_entropy_impl(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_index, const Tensor& losses, const Tensor& nll) override;
  void cross_entropy_backward_impl(const Tensor& logits, const Tensor& targets, float smoothing,
                                   int32_t ignore_index, const Tensor& dlosses,
                                   const Tensor& dlogits, bool accumulate) override;
  void symmetric_kl_impl(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                         const Tensor& losses) override;
  void symmetric_kl_backward_impl(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                  const Tensor& dlosses, const Tensor& dlogits) override;
  void gather_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                        float scale) override;
  void scatter_add_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                             float scale) override;
  void top_k_impl(const Tensor& x, int k, const Tensor& values, const Tensor& indices) override;
  void quantize_rows_impl(const Tensor& x, int max_level, const Tensor& q,
                          const Tensor& scales) override;
  void gemm_i8_impl(const Tensor& a, const Tensor& a_scales, const PackedWeight& b,
                    const Tensor& b_scales, const Tensor& bias, const Tensor& c) override;
  void sum_impl(const Tensor& x, const Tensor& out) override;
  void squared_norm_impl(const Tensor& x, const Tensor& out) override;
  void sum_rows_impl(const Tensor& x, const Tensor& out, float beta) override;
  void adam_update_impl(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                        const AdamParams& p) override;

 private:
  // Sets this backend's GPU as the calling thread's current device; returns the stream.
  void* enter() const;
  // Raises (and clears) an index error recorded by a kernel; call after the stream is idle.
  void raise_index_error();
  // Scratch for the two-stage reductions: kReduceBlocks doubles, reused in stream order.
  double* reduce_scratch() const { return reduce_scratch_; }

  // Uploads of up to kStageBytes go through a ring of pinned host buffers: copy_from_host
  // copies the data into the next slot and queues the transfer without waiting for the device
  // (a pageable source would make it wait for everything queued before). A slot is reused once
  // its event says the device has read it.
  static constexpr int kStageSlots = 8;
  static constexpr size_t kStageBytes = size_t(1) << 20;
  struct StageSlot {
    void* host = nullptr;  // pinned, kStageBytes; allocated on first use
    void* read = nullptr;  // cudaEvent_t recorded after the transfer from it
  };
  // The slot for the next upload, free to overwrite.
  StageSlot& next_stage_slot();

  int index_;
  std::shared_ptr<Allocator> allocator_;
  StageSlot stage_[kStageSlots];
  int next_stage_ = 0;
  void* stream_ = nullptr;                     // cudaStream_t
  void* cublas_ = nullptr;                     // cublasHandle_t, bound to stream_
  IndexErrorRecord* errors_host_ = nullptr;    // pinned host copy, refreshed by synchronize()
  IndexErrorRecord* errors_device_ = nullptr;  // written by the kernels
  double* reduce_scratch_ = nullptr;
};

// Why no CUDA device can be used here ("" when one can).
std::string cuda_unavailable_reason();

}  // namespace tx::cuda
