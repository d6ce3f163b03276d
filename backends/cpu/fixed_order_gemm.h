// An inference GEMM whose every output is one FMA chain over k in order: the same bits for a
// row whatever the row count, the row's position, the thread count or the vector width.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace tx::cpu {

// Floats of w [n, k] in the column panels fixed_order_gemm reads.
int64_t panel_floats(int64_t n, int64_t k);
// w [n, k] row-major into column panels: panel p holds k rows of kPanelWidth columns
// (n's last panel zero-padded), k-major, so a panel's slice of k is contiguous.
void pack_panels(const float* w, int64_t n, int64_t k, float* panels);

// c [m, n] = a [m, k] @ w^T for w packed by pack_panels. c[i][j] is
// fma(a[i][k-1], w[j][k-1], ... fma(a[i][1], w[j][1], a[i][0] * w[j][0])): the order of one
// row's sums never depends on the other rows, which is what makes decoding batch-invariant
// (docs/determinism.md). Parallel over column panels; serial inside a parallel region. With a
// bias [n], c[i][j] is that chain's sum + bias[j], added as c is stored; then `act` (relu as
// relu_impl, swish through swish_row: the bits of those passes), applied while a panel's rows
// are in L1.
void fixed_order_gemm(const float* a, int64_t m, int64_t k, const float* panels, int64_t n,
                      float* c, const float* bias = nullptr, Activation act = Activation::none);

// The same for bf16 operands (--precision bf16 decoding), where this build has AVX512-BF16:
// each output is one chain of VDPBF16PS steps over k's pairs in order (two products a step,
// f32 sums), so a row's bits again do not depend on the other rows.
bool fixed_order_bf16_available();
// uint32 units of w [n, k] bf16 in the panels fixed_order_gemm_bf16 reads: as pack_panels, with
// each unit a pair of k (an odd k's last pair padded with +0).
int64_t panel_units_bf16(int64_t n, int64_t k);
void pack_panels_bf16(const uint16_t* w, int64_t n, int64_t k, uint32_t* panels);
// c [m, n] f32 = a [m, k] bf16 @ w^T for w packed by pack_panels_bf16; k must be even.
void fixed_order_gemm_bf16(const uint16_t* a, int64_t m, int64_t k, const uint32_t* panels,
                           int64_t n, float* c, const float* bias = nullptr,
                           Activation act = Activation::none);

}  // namespace tx::cpu
