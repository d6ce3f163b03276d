// exp over a row, 16 or 8 at a time: the softmax family's hot loop.
#pragma once

#include <cstdint>

namespace tx::cpu {

// out[j] = exp(x[j] * scale - shift) for j < n (out may be x). Through glibc's vector expf
// (libmvec), 16 lanes a call on CPUs with AVX-512, 8 with AVX2, else expf. libmvec's expf is within
// a few ulp rather than always correctly rounded, and every lane of a call rounds alike, so a value
// does not depend on its position in the row; it may differ in the last bit between machines of
// different vector widths (tx's results are reproducible per machine, docs/determinism.md).
void exp_affine(const float* x, float scale, float shift, float* out, int64_t n);

// out[j] = v / (1 + exp(-v)), v = x[j] (+ bias[j] when bias is not null), for j < n (out may be
// x): swish (math::swish) with its exp through the same vector expf, and a linear layer's bias
// added in the same pass.
void swish_row(const float* x, const float* bias, float* out, int64_t n);

// dx[j] += dy[j] * (s + x[j] s (1 - s)), s = 1 / (1 + exp(-x[j])), for j < n: swish's backward
// (math::swish_grad) through the same vector expf.
void swish_grad_row(const float* dy, const float* x, float* dx, int64_t n);

// The instruction sets the functions above choose from, widest first. They take the widest the
// CPU has; tests call each one the CPU has through the overloads below, so the narrower paths
// are checked on machines that would never pick them.
enum class VectorIsa { avx512, avx2, scalar };
bool cpu_has(VectorIsa isa);
void exp_affine(const float* x, float scale, float shift, float* out, int64_t n, VectorIsa isa);
void swish_row(const float* x, const float* bias, float* out, int64_t n, VectorIsa isa);
void swish_grad_row(const float* dy, const float* x, float* dx, int64_t n, VectorIsa isa);

}  // namespace tx::cpu
