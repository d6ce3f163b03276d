// DType: the element types a Tensor may hold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tx {

// i8: quantised weights and activations of int8 inference (gemm_i8); no other operator takes it.
enum class DType : uint8_t { f32, f16, bf16, i32, i8 };

inline size_t size_of(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i8:
      return 1;
  }
  return 0;
}

inline const char* name_of(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i8:
      return "i8";
  }
  return "?";
}

}  // namespace tx
