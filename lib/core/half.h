// Conversions from float to the other dtypes: f16 / bf16 bit-exact (round to nearest even) and
// i32 (saturating), the same on host and device.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define TX_HOST_DEVICE __host__ __device__
#else
#define TX_HOST_DEVICE
#endif

namespace tx {

TX_HOST_DEVICE inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
TX_HOST_DEVICE inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// A select rather than an early return for NaN, so that loops over it vectorise.
TX_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
TX_HOST_DEVICE inline float bf16_to_float(uint16_t h) {
  return bits_float(uint32_t(h) << 16);
}

TX_HOST_DEVICE inline uint16_t float_to_f16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16: scale by 2^24 and round there
    float scaled = bits_float(abs) * 16777216.0f;  // exact: power of two
    uint32_t m = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 112;  // rebias 127 -> 15
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may round up the exponent
  return static_cast<uint16_t>(sign | h);
}

TX_HOST_DEVICE inline float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

// Truncates towards zero, saturating at the i32 range; NaN gives 0 (as CUDA's __float2int_rz).
TX_HOST_DEVICE inline int32_t float_to_i32(float f) {
  if (!(f == f)) return 0;
  if (f >= 2147483648.0f) return 2147483647;
  if (f <= -2147483648.0f) return -2147483647 - 1;
  return static_cast<int32_t>(f);
}

// The same rule at the i8 range [-128, 127].
TX_HOST_DEVICE inline int8_t float_to_i8(float f) {
  if (!(f == f)) return 0;
  if (f >= 127.0f) return 127;
  if (f <= -128.0f) return -128;
  return static_cast<int8_t>(f);
}

}  // namespace tx
