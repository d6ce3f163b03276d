// Backend: the operator table. Every operator the Transformer needs, forward and backward,
// for one device. backends/cpu and backends/cuda each implement all of it.
//
// Conventions, the same for every operator:
// - Tensors are dense and row-major. "[R, C]" means any shape viewed as rows x last dim.
// - Arguments are inputs first, then outputs; outputs are preallocated by the caller and are
//   written through the (const) Tensor handle.
// - Every *_backward operator ADDS into its gradient outputs (dx += ...), so gradients from
//   several uses of a tensor accumulate; callers zero gradients once per step. Those with an
//   `accumulate` flag write dx instead when it is false (dx = ...; what dx held is never read),
//   for a gradient's first contribution, which then needs no zeroed buffer.
// - Elementwise operators, add_bias, add_positions, softmax and log_softmax may run in place
//   (y the same tensor as x), as may cross_entropy_backward without accumulate; other outputs
//   must not overlap their inputs.
// - Operators may run asynchronously; download() and synchronize() wait for them.
// - Compute operators take f32; cast() converts to and from f16/bf16; indices are i32.
//
// The public methods check shapes and dtypes once, here, and raise tx::Error naming the
// operator and the offending shapes; backends implement the protected *_impl methods and may
// assume valid arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/device_math.h"  // math::PositionLayout
#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"

namespace tx {

struct BackendOptions {
  int threads = 0;       // CPU worker threads; 0 = all cores
  int device_index = 0;  // which GPU for cuda
  // cuda: fp32 GEMMs on TF32 tensor cores (inputs rounded to 10-bit mantissas, fp32 sums);
  // the cpu backend refuses it.
  bool tf32 = false;
  // cpu: freed bytes the caching allocator keeps for reuse. A training step reuses its whole
  // working set, so the default keeps up to 1 GiB; a translation stream's batches keep changing
  // shape, so tx-translate keeps less (Options::backend_options). cuda keeps 1 GiB whatever
  // this says: giving device memory back (cudaFree) waits for the device.
  size_t max_cached_bytes = size_t(1) << 30;
};

// An activation a GEMM applies to its output as it stores it (gemm_packed).
enum class Activation { none, relu, swish };

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0"
  virtual Device device() const = 0;
  virtual std::shared_ptr<Allocator> allocator() const = 0;
  // Waits until every operator issued so far has finished.
  virtual void synchronize() = 0;
  // Runs fn once on each host thread that runs this backend's operators (the CPU backend's
  // OpenMP team, its calling thread included; elsewhere the calling thread alone): for
  // per-thread state such as a signal mask (train/stop_signals.h).
  virtual void on_every_thread(const std::function<void()>& fn) { fn(); }

  // ---- memory --------------------------------------------------------------------------------
  Tensor empty(const Shape& shape, DType dtype = DType::f32) const;
  Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  // Copies host data in; `host.size()` must equal the element count of `shape`.
  Tensor upload(const std::vector<float>& host, const Shape& shape);
  Tensor upload(const std::vector<int32_t>& host, const Shape& shape);
  // Synchronising copies out. download<float> needs f32, download<int32_t> needs i32.
  template <typename T>
  std::vector<T> download(const Tensor& t);

  void copy_from_host(const void* src, const Tensor& dst);  // dst.nbytes() bytes
  void copy_to_host(const Tensor& src, void* dst);          // synchronises
  void copy(const Tensor& src, const Tensor& dst);          // same device, same shape and dtype
  void fill(const Tensor& x, float value);                  // f32, f16, bf16 or i32

  // ---- linear algebra ------------------------------------------------------------------------
  // c = alpha * op(a) @ op(b) + beta * c, op(x) = x or x^T. 2-D: a [M,K] (or [K,M] when
  // trans_a), b [K,N] (or [N,K] when trans_b), c [M,N]. 3-D: the same per batch entry
  // ([batch, ., .] for all three: a strided batched GEMM). a and b are f32, or both bf16 or
  // both f16 (reduced-precision operands: each product is exact in f32 and the sums are f32,
  // as tensor cores and oneDNN's bf16 GEMMs compute); c is f32.
  void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
            float alpha = 1.0f, float beta = 0.0f);
  // Empty when gemm runs bf16 or f16 (`dtype`) operands on reduced-precision kernels of its
  // own; otherwise one line saying why not (gemm then widens them to f32: the same sums,
  // without the speed). What --precision asks before it trains or translates on a backend.
  virtual std::string half_gemm_missing(DType dtype) const;

  // A weight w [N, K] (a linear layer's [out, in]) prepared once for many products a w^T at
  // inference, f32, bf16 or f16 for gemm_packed or i8 for gemm_i8: the CPU backend packs f32
  // (and bf16 where it has AVX512-BF16) into its GEMM's panel layout, which oneDNN otherwise
  // redoes on every call (docs/backends.md); cuBLAS and the CUDA int8 kernel take w as it is. Valid
  // while w's values do not change (not for a model in training).
  struct PackedWeight {
    Tensor weight;    // w itself (shares its memory)
    Tensor packed;    // the backend's layout; undefined where the backend uses w directly
    int threads = 0;  // CPU: the threads the layout is partitioned for (another count uses w)
    bool defined() const { return weight.defined(); }
  };
  PackedWeight pack_weight(const Tensor& w);
  // c f32 [M, N] = a [M, K] @ w^T for a PackedWeight of w [N, K] f32, bf16 or f16, a of w's
  // dtype; a and c are rows of any shape ([..., K] and [..., N]). Equal to
  // gemm(a, false, w, true, c) up to rounding. With a bias [N], c = that + bias, equal bit for
  // bit to add_bias after it; with an activation, c = act(that), equal bit for bit to relu or
  // swish after it (add_bias_relu, add_bias_swish with a bias). The CPU applies both as it
  // stores c, a pass over c fewer.
  void gemm_packed(const Tensor& a, const PackedWeight& w, const Tensor& c,
                   const Tensor& bias = Tensor(), Activation act = Activation::none);

  // ---- elementwise ---------------------------------------------------------------------------
  void add_bias(const Tensor& x, const Tensor& bias,
                const Tensor& y);                               // y = x + bias (x [R,C], bias [C])
  void add(const Tensor& a, const Tensor& b, const Tensor& y);  // y = a + b
  // y = max(x + bias, 0): a linear layer's bias and the feed-forward ReLU, equal bit for bit to
  // add_bias then relu (what the base class runs; the CPU backend makes it one pass).
  void add_bias_relu(const Tensor& x, const Tensor& bias, const Tensor& y);
  // y = swish(x + bias): the same for Marian's and OPUS-MT's swish feed-forward layer, equal bit
  // for bit to add_bias then swish.
  void add_bias_swish(const Tensor& x, const Tensor& bias, const Tensor& y);
  void axpy(float alpha, const Tensor& x, const Tensor& y);   // y += alpha * x
  void scale(const Tensor& x, float alpha, const Tensor& y);  // y = alpha * x
  void relu(const Tensor& x, const Tensor& y);                // y = max(x, 0)
  // dx (+)= dy * (y > 0)
  void relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx, bool accumulate = true);
  // y = x * sigmoid(x) (math::swish); swish_backward: dx += dy * swish'(x), from the input x.
  void swish(const Tensor& x, const Tensor& y);
  void swish_backward(const Tensor& dy, const Tensor& x, const Tensor& dx, bool accumulate = true);
  // y = x * keep / (1 - p), keep_i = dropout_uniform(seed, offset + i) >= p (core/rng.h), so the
  // mask is recomputed in the backward pass and equal on every backend.
  void dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, const Tensor& y);
  void dropout_backward(const Tensor& dy, float p, uint64_t seed, uint64_t offset, const Tensor& dx,
                        bool accumulate = true);
  // y = x + PE(start + t) for x [B, T, D], the sinusoidal encoding of the paper (section 3.5)
  // in `layout` (math::PositionLayout; the halves layouts need an even D): by default
  // PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)).
  void add_positions(const Tensor& x, int64_t start, const Tensor& y,
                     math::PositionLayout layout = math::PositionLayout::interleaved);
  // Converts between f32, f16, bf16, i32 and i8 (values rounded to nearest even; i32 and i8
  // from float truncate towards zero, saturate at their range, and map NaN to 0).
  void cast(const Tensor& x, const Tensor& y);

  // ---- attention -----------------------------------------------------------------------------
  // y = softmax(scale * x) along the last dim. x is [B, ..., Tq, Tk] (ndim >= 2).
  // key_lengths (optional, i32 [B]): keys j >= key_lengths[b] get probability 0 (right padding).
  // causal: query i sees keys j <= i + (Tk - Tq), which covers training (Tq == Tk) and
  // incremental decoding (Tq == 1 at the end of the cache). Rows with no visible key are 0.
  void softmax(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
               const Tensor& y);
  // dx (+)= scale * y * (dy - sum(dy * y)) along the last dim.
  void softmax_backward(const Tensor& y, const Tensor& dy, float scale, const Tensor& dx,
                        bool accumulate = true);
  // [B, T, heads * d_head] -> [B, heads, T, d_head], y = (accumulate ? y : 0) + split(x).
  void split_heads(const Tensor& x, int heads, const Tensor& y, bool accumulate = false);
  // [B, heads, T, d_head] -> [B, T, heads * d_head], y = (accumulate ? y : 0) + merge(x).
  void merge_heads(const Tensor& x, const Tensor& y, bool accumulate = false);

  // One decoding step's attention over a cache whose time slots hold the keys and values that
  // step wrote, reached through each row's ancestry, so that a beam reorder copies no cache:
  // q [R, heads, d_head]; keys and values [capacity, slots, heads, d_head] (time slot t holds
  // the rows decoded at step t); rows i32 [R, capacity]: row r's ancestor at step t is slot
  // rows[r, t] (read for t < length only, each in [0, slots)); out [R, heads, d_head] =
  // softmax_t(scale * q[r, h] . keys[t, rows[r, t], h]) @ values[t, rows[r, t], h] over
  // t < length (1 <= length <= capacity).
  void attend_cached(const Tensor& q, const Tensor& keys, const Tensor& values, const Tensor& rows,
                     int64_t length, float scale, const Tensor& out);

  // The same for cross-attention: row r of q [R, heads, d_head] attends to entry r / (R / E)
  // of keys and values [E, heads, S, d_head] (R a multiple of E: a sentence's beams share its
  // entry), keys s >= lengths[e] (i32 [E]) being padding; out [R, heads, d_head]. A row with
  // no visible key gets 0, as softmax gives.
  void attend_memory(const Tensor& q, const Tensor& keys, const Tensor& values,
                     const Tensor& lengths, float scale, const Tensor& out);

  // ---- normalisation and losses --------------------------------------------------------------
  void log_softmax(const Tensor& x, const Tensor& y);  // along the last dim
  // dx += dy - exp(y) * sum(dy), y the forward output.
  void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx);
  // y = (x - mean) * rstd * gamma + beta over the last dim D; x [R, D], gamma/beta [D];
  // saves mean [R] and rstd [R] = 1 / sqrt(var + eps) (biased variance) for the backward.
  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                  const Tensor& y, const Tensor& mean, const Tensor& rstd);
  // dx (+)= the input's gradient (accumulate as above); dgamma and dbeta always add.
  void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                           const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                           const Tensor& dgamma, const Tensor& dbeta, bool accumulate = true);
  // y = layer_norm(x + sublayer) (x, sublayer, y [R, D]): a post-norm sublayer's residual add
  // and norm for inference (no statistics kept), equal bit for bit to add then layer_norm
  // (what the base class runs; the CPU backend makes it one pass).
  void residual_layer_norm(const Tensor& x, const Tensor& sublayer, const Tensor& gamma,
                           const Tensor& beta, float eps, const Tensor& y);
  // Label-smoothed cross-entropy fused with log-softmax. logits [R, V], targets i32 [R].
  // losses[r] = -sum_v q_v log p_v with q = (1 - smoothing) onehot(target) + smoothing / V;
  // nll (optional) [R] = -log p_target. Rows whose target == ignore_index give 0.
  void cross_entropy(const Tensor& logits, const Tensor& targets, float smoothing,
                     int32_t ignore_index, const Tensor& losses, const Tensor& nll);
  // dlogits[r] += dlosses[r] * (softmax(logits[r]) - q_r); ignored rows get nothing. With
  // accumulate false, dlogits[r] = ... instead (ignored rows 0), and dlogits may be logits
  // itself: the gradient written over the logits, the largest tensor of a training step.
  void cross_entropy_backward(const Tensor& logits, const Tensor& targets, float smoothing,
                              int32_t ignore_index, const Tensor& dlosses, const Tensor& dlogits,
                              bool accumulate = true);

  // R-Drop's consistency loss (tx-train --rdrop-alpha) between two passes of one batch: logits
  // [2R, V] hold the first pass's R rows, then the second's. losses [R]: losses[r] = 1/2
  // (KL(p_r || p_{R+r}) + KL(p_{R+r} || p_r)), p a row's softmax; pairs whose targets[r] ==
  // ignore_index (targets i32 [R], the first pass's) give 0.
  void symmetric_kl(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                    const Tensor& losses);
  // dlogits[r] and dlogits[R + r] += dlosses[r] * d losses[r] / d logits; ignored pairs get
  // nothing.
  void symmetric_kl_backward(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                             const Tensor& dlosses, const Tensor& dlogits);

  // ---- lookup and reordering -----------------------------------------------------------------
  // dst[m] = scale * src[index[m]] for src [N, ...], index i32 [M], dst [M, ...]: embedding
  // lookup and beam reordering. Index -1 writes a zero row (a token with no embedding: Marian's
  // start of decoding, a padding id of -1); other indices outside [0, N) are an error.
  void gather_rows(const Tensor& src, const Tensor& index, const Tensor& dst, float scale = 1.0f);
  // dst[index[m]] += scale * src[m]: the embedding gradient (repeated indices accumulate; rows
  // of index -1 are skipped, gather_rows' zero rows).
  void scatter_add_rows(const Tensor& src, const Tensor& index, const Tensor& dst,
                        float scale = 1.0f);
  // The k largest entries of each row of x [R, C], in descending order (ties: lower index
  // first; NaN after every number, backend/rank_order.h): values f32 [R, k], indices i32 [R, k].
  void top_k(const Tensor& x, int k, const Tensor& values, const Tensor& indices);
  // One beam-search step's choice, without writing the [R, V] scores: logits [R, V] of
  // R = groups * beam rows; candidate (r, v) scores ((logits[r, v] - logsumexp(logits[r])) +
  // mask[v]) + offsets[r] (the row's log-prob, a token mask, the hypothesis' running score:
  // log_softmax, add_bias and a rank-1 gemm, in that order and bit for bit); values f32
  // [groups, k] and indices i32 [groups, k] are each group's k best of its beam * V candidates
  // as top_k ranks them (index = row within the group * V + v). mask f32 [V], offsets f32 [R].
  void beam_top_k(const Tensor& logits, const Tensor& mask, const Tensor& offsets, int beam, int k,
                  const Tensor& values, const Tensor& indices);

  // ---- int8 inference ------------------------------------------------------------------------
  // The largest |weight| gemm_i8 takes exactly: AVX2 without VNNI multiplies u8 by s8 into
  // saturating 16-bit pair sums, so weights get 7 bits (255 * 63 * 2 < 2^15), as oneDNN's own
  // int8 convolutions do there; activations keep 8.
  static constexpr int kInt8WeightLevel = 63;
  // Symmetric per-row quantisation (math::quantize_scale, math::quantize_value): x f32 [R, C],
  // q i8 [R, C], scales f32 [R]; scales[r] = max |x[r]| / max_level (1 for a zero row),
  // q[r, c] = round(x[r, c] / scales[r]) in [-max_level, max_level]; max_level in [1, 127].
  void quantize_rows(const Tensor& x, int max_level, const Tensor& q, const Tensor& scales);
  // The int8 linear layer: c[m, n] = (sum_k a[m, k] b[n, k]) * a_scales[m] * b_scales[n]
  // (+ bias[n]) for a i8 [M, K] (rows of any shape), b i8 [N, K] (a weight [out, in]),
  // a_scales f32 [M], b_scales f32 [N], bias f32 [N] or undefined, c f32 [M, N] (rows). The
  // sums are exact in i32 for |a| <= 127 and |b| <= kInt8WeightLevel.
  void gemm_i8(const Tensor& a, const Tensor& a_scales, const Tensor& b, const Tensor& b_scales,
               const Tensor& bias, const Tensor& c);
  // The same with b prepared once (pack_weight of the i8 weight): the same exact sums.
  void gemm_i8(const Tensor& a, const Tensor& a_scales, const PackedWeight& b,
               const Tensor& b_scales, const Tensor& bias, const Tensor& c);

  // ---- reductions ----------------------------------------------------------------------------
  void sum(const Tensor& x, const Tensor& out);           // out [1] = sum of all elements
  void squared_norm(const Tensor& x, const Tensor& out);  // out [1] = sum of squares
  // out [C] = beta * out + column sums of x [R, C] (the bias gradient with beta = 1).
  void sum_rows(const Tensor& x, const Tensor& out, float beta = 0.0f);

  // ---- optimiser -----------------------------------------------------------------------------
  struct AdamParams {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.98f;
    float eps = 1e-9f;
    int64_t step = 1;           // 1-based, for bias correction
    float grad_scale = 1.0f;    // grads are multiplied by this first (clipping, loss scaling)
    float weight_decay = 0.0f;  // decoupled (AdamW); 0 = the paper's Adam
  };
  // Fused Adam with bias correction: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + lr * wd * param.
  void adam_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                   const AdamParams& p);

  // ---- profiling -----------------------------------------------------------------------------
  // GEMM time and work since the last take_gemm_tally(), counted while profiling is on. Each
  // GEMM is then bracketed by synchronize(), so on an asynchronous device it costs overlap:
  // a diagnostic (tx-train's TX_PROFILE), off by default.
  struct GemmTally {
    double seconds = 0;
    double flop = 0;  // 2 M N K per GEMM (per batch entry)
    int64_t calls = 0;
  };
  void set_profiling(bool on) { profiling_ = on; }
  bool profiling() const { return profiling_; }
  GemmTally take_gemm_tally();

 protected:
  virtual void copy_from_host_impl(const void* src, const Tensor& dst) = 0;
  virtual void copy_to_host_impl(const Tensor& src, void* dst) = 0;
  virtual void copy_impl(const Tensor& src, const Tensor& dst) = 0;
  virtual void fill_impl(const Tensor& x, float value) = 0;
  virtual void gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                         const Tensor& c, float alpha, float beta) = 0;
  // gemm with bf16 or f16 operands (both the same dtype; checked). The default widens both to
  // f32 temporaries (exactly) and runs gemm_impl: the same products and f32 sums, without the
  // speed. A backend with reduced-precision GEMMs overrides it.
  virtual void gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                              const Tensor& c, float alpha, float beta);
  // Sets p.packed (and p.threads) to the backend's layout of p.weight, or leaves it undefined
  // to use the weight as it is.
  virtual void pack_weight_impl(PackedWeight& p) = 0;
  // bias: undefined, or [N] f32 to add to c; then act.
  virtual void gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c,
                                const Tensor& bias, Activation act) = 0;
  // gemm_packed's product through gemm_impl on the weight as it is, then bias_act_impl.
  void gemm_weight_as_is(const Tensor& a, const PackedWeight& w, const Tensor& c,
                         const Tensor& bias = Tensor(), Activation act = Activation::none);
  // x [R, C] = act(x + bias) in place, each when asked, through the fused passes.
  void bias_act_impl(const Tensor& x, const Tensor& bias, Activation act);
  virtual void add_bias_impl(const Tensor& x, const Tensor& bias, const Tensor& y) = 0;
  virtual void add_impl(const Tensor& a, const Tensor& b, const Tensor& y) = 0;
  // add_bias_impl then relu_impl; a backend may fuse them.
  virtual void add_bias_relu_impl(const Tensor& x, const Tensor& bias, const Tensor& y);
  // add_bias_impl then swish_impl; a backend may fuse them.
  virtual void add_bias_swish_impl(const Tensor& x, const Tensor& bias, const Tensor& y);
  virtual void axpy_impl(float alpha, const Tensor& x, const Tensor& y) = 0;
  virtual void scale_impl(const Tensor& x, float alpha, const Tensor& y) = 0;
  virtual void relu_impl(const Tensor& x, const Tensor& y) = 0;
  virtual void relu_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx,
                                  bool accumulate) = 0;
  virtual void swish_impl(const Tensor& x, const Tensor& y) = 0;
  virtual void swish_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& dx,
                                   bool accumulate) = 0;
  virtual void dropout_impl(const Tensor& x, float p, uint64_t seed, uint64_t offset,
                            const Tensor& y) = 0;
  virtual void dropout_backward_impl(const Tensor& dy, float p, uint64_t seed, uint64_t offset,
                                     const Tensor& dx, bool accumulate) = 0;
  virtual void add_positions_impl(const Tensor& x, int64_t start, const Tensor& y,
                                  math::PositionLayout layout) = 0;
  virtual void cast_impl(const Tensor& x, const Tensor& y) = 0;
  virtual void softmax_impl(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
                            const Tensor& y) = 0;
  virtual void softmax_backward_impl(const Tensor& y, const Tensor& dy, float scale,
                                     const Tensor& dx, bool accumulate) = 0;
  virtual void split_heads_impl(const Tensor& x, int heads, const Tensor& y, bool accumulate) = 0;
  virtual void merge_heads_impl(const Tensor& x, const Tensor& y, bool accumulate) = 0;
  virtual void attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                  const Tensor& rows, int64_t length, float scale,
                                  const Tensor& out) = 0;
  virtual void attend_memory_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                  const Tensor& lengths, float scale, const Tensor& out) = 0;
  virtual void log_softmax_impl(const Tensor& x, const Tensor& y) = 0;
  virtual void log_softmax_backward_impl(const Tensor& y, const Tensor& dy, const Tensor& dx) = 0;
  virtual void layer_norm_impl(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                               const Tensor& y, const Tensor& mean, const Tensor& rstd) = 0;
  virtual void layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                        const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                        const Tensor& dgamma, const Tensor& dbeta,
                                        bool accumulate) = 0;
  // add_impl into a temporary, then layer_norm_impl; a backend may fuse them.
  virtual void residual_layer_norm_impl(const Tensor& x, const Tensor& sublayer,
                                        const Tensor& gamma, const Tensor& beta, float eps,
                                        const Tensor& y);
  virtual void cross_entropy_impl(const Tensor& logits, const Tensor& targets, float smoothing,
                                  int32_t ignore_index, const Tensor& losses,
                                  const Tensor& nll) = 0;
  virtual void cross_entropy_backward_impl(const Tensor& logits, const Tensor& targets,
                                           float smoothing, int32_t ignore_index,
                                           const Tensor& dlosses, const Tensor& dlogits,
                                           bool accumulate) = 0;
  virtual void symmetric_kl_impl(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                                 const Tensor& losses) = 0;
  virtual void symmetric_kl_backward_impl(const Tensor& logits, const Tensor& targets,
                                          int32_t ignore_index, const Tensor& dlosses,
                                          const Tensor& dlogits) = 0;
  virtual void gather_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                float scale) = 0;
  virtual void scatter_add_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                     float scale) = 0;
  virtual void top_k_impl(const Tensor& x, int k, const Tensor& values, const Tensor& indices) = 0;
  // Composed of log_softmax, add_bias, gemm and top_k through a [R, V] temporary; a backend
  // may fuse it.
  virtual void beam_top_k_impl(const Tensor& logits, const Tensor& mask, const Tensor& offsets,
                               int beam, int k, const Tensor& values, const Tensor& indices);
  virtual void quantize_rows_impl(const Tensor& x, int max_level, const Tensor& q,
                                  const Tensor& scales) = 0;
  virtual void gemm_i8_impl(const Tensor& a, const Tensor& a_scales, const PackedWeight& b,
                            const Tensor& b_scales, const Tensor& bias, const Tensor& c) = 0;
  virtual void sum_impl(const Tensor& x, const Tensor& out) = 0;
  virtual void squared_norm_impl(const Tensor& x, const Tensor& out) = 0;
  virtual void sum_rows_impl(const Tensor& x, const Tensor& out, float beta) = 0;
  virtual void adam_update_impl(const Tensor& param, const Tensor& grad, const Tensor& m,
                                const Tensor& v, const AdamParams& p) = 0;

 private:
  bool profiling_ = false;
  // Runs a GEMM of `flop` work, timed into gemm_tally_ while profiling.
  void tally_gemm(double flop, const std::function<void()>& run);
  GemmTally gemm_tally_;
};

}  // namespace tx
