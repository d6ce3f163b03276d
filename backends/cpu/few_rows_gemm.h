// Batched GEMMs of a few rows (a decoding step's attention) as plain loops.
#pragma once

#include <cstdint>

namespace tx::cpu {

// The most rows of op(a) that few_rows_gemm takes: a decoding step's queries per batch entry
// (1, or the beam of a sentence in cross-attention).
constexpr int64_t kFewRows = 8;

// c[i] = alpha * a[i] @ op(b[i]) + beta * c[i] for i < batch, a [m, k] (not transposed), b
// [k, n] or [n, k] (trans_b), c [m, n], all dense row-major. oneDNN's batched matmul spends
// most of its time on dispatch for these shapes (m <= 8, n and k ~ 64); each entry here is a
// few dot products or row updates. beta == 0 does not read c.
void few_rows_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                   bool trans_b, float* c, float alpha, float beta);

}  // namespace tx::cpu
