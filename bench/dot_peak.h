// The peak of one core's multiply-add instructions: f32 FMA against bf16 dot products
// (AVX512_BF16's VDPBF16PS), which bound what an f32 or a bf16 GEMM can reach on this CPU.
#pragma once

#include <string>

struct DotPeak {
  double fma_gflops = 0;   // 512-bit f32 FMA (AVX-512), or 256-bit (AVX2) without AVX-512
  double bf16_gflops = 0;  // 512-bit VDPBF16PS; 0 without AVX512_BF16
  std::string fma_width;   // "512-bit" or "256-bit"
};

// Times 12 independent accumulator chains of each instruction on the calling thread.
DotPeak measure_dot_peak();
