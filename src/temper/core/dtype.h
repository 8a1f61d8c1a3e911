// Element types and their conversions. bf16 rounds to nearest even (as torch does); f16 is IEEE
// binary16 with round to nearest even, subnormals kept. Quantized block types (q4/q8) live in io/kernels.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace temper {

enum class DType : uint8_t { f32, bf16, f16, f64, i32, i64, u8 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
bool dtype_from_name(std::string_view name, DType* out);  // "f32", "bf16", "f16", ...

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace temper
