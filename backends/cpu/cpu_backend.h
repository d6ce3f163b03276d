// CpuBackend: the operator table on the host: oneDNN matmul for GEMMs, OpenMP loops for the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace tx::cpu {

class GemmCache;

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device{DeviceType::cpu, 0}; }
  std::shared_ptr<Allocator> allocator() const override { return allocator_; }
  void synchronize() override {}
  void on_every_thread(const std::function<void()>& fn) override;
  int threads() const { return threads_; }
  std::string half_gemm_missing(DType dtype) const override;

 protected:
  void copy_from_host_impl(const void* src, const Tensor& dst) override;
  void copy_to_host_impl(const Tensor& src, void* dst) override;
  void copy_impl(const Tensor& src, const Tensor& dst) override;
  void fill_impl(const Tensor& x, float value) override;
  void gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta) override;
  // bf16 through oneDNN's bf16 GEMM where the CPU has one (gemm_bf16.cc); f16 widened.
  void gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                      float alpha, float beta) override;
  void pack_weight_impl(PackedWeight& p) override;
  void gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c, const Tensor& bias,
                        Activation act) override;
  // The rows oneDNN's int8 layout is cut for: it gives wrong sums beyond them (conformance,
  // M = 300), so gemm_i8 runs in slices of it, and splits each slice between the threads as if
  // it were full: packed for 256 rows, 160 rows ran at 230 GOP/s on 2 threads (one thread
  // doing 128), packed for 64 at 330.
  static constexpr int64_t kPackRows = 64;
  // pack_weight_impl of an i8 weight (packed_gemm.cc); gemm_i8_impl reads it.
  void pack_i8_weight(PackedWeight& p);
  // Whether p's i8 layout can be read here: packed, for this thread count, outside a parallel
  // region (oneDNN splits the layout among the threads it was packed with).
  static bool packed_usable(const PackedWeight& p);
  void add_bias_impl(const Tensor& x, const Tensor& bias, const Tensor& y) override;
  void add_bias_relu_impl(const Tensor& x, const Tensor& bias, const Tensor& y) override;
  void add_bias_swish_impl(const Tensor& x, const Tensor& bias, const Tensor& y) override;
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
  void residual_layer_norm_impl(const Tensor& x, const Tensor& sublayer, const Tensor& gamma,
                                const Tensor& beta, float eps, const Tensor& y) override;
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
  void beam_top_k_impl(const Tensor& logits, const Tensor& mask, const Tensor& offsets, int beam,
                       int k, const Tensor& values, const Tensor& indices) override;
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
  int threads_;
  std::shared_ptr<Allocator> allocator_;
  std::unique_ptr<GemmCache> gemm_;
  std::vector<uint8_t> i8_shifted_;  // gemm_i8's activations as u8
  // add_positions' sinusoids, rows [0, positions_.size() / positions_width_) of width d_model:
  // a decoding step adds one position per state, and computing its d_model sin/cos/pow in
  // double each time took ~1% of a greedy run, on the caller's thread alone.
  std::vector<float> positions_;
  int64_t positions_width_ = 0;
  math::PositionLayout positions_layout_ = math::PositionLayout::interleaved;
};

}  // namespace tx::cpu
