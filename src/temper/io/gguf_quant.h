// ggml tensor types as stored in GGUF files: the type table (block size, bytes per block) for every
// type ggml defines, the block layouts of the types temper decodes (F32, F16, BF16, Q8_0, Q4_0,
// Q4_1), row dequantization to f32, and f32 -> Q8_0/F16/BF16 encoding for export.
// Follows llama.cpp ggml-common.h (block structs) and ggml-quants.c (dequantize_row_*,
// quantize_row_q8_0_ref). Leaves out: k-quants and i-quants (known sizes, not decoded), dot kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace temper::io {

// ggml_type codes (ggml.h). Codes 4, 5 and 31-33 were removed from ggml and are unknown here.
// clang-format off
enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
  i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30, tq1_0 = 34, tq2_0 = 35,
};
// clang-format on

struct GgmlTypeInfo {
  std::string_view name;  // as ggml spells it: "F32", "Q4_1", ...
  int64_t block_size;     // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
};

// Null for a code ggml does not define.
const GgmlTypeInfo* ggml_type_info(uint32_t code);
const GgmlTypeInfo& ggml_type_info(GgmlType t);
std::string_view ggml_type_name(GgmlType t);
// Types dequantize_row() decodes: F32, F16, BF16, Q8_0, Q4_0, Q4_1.
bool ggml_type_dequantizable(GgmlType t);
std::string ggml_dequantizable_list();  // "F32, F16, BF16, Q8_0, Q4_0, Q4_1" (for error messages)
// Bytes of a row of n elements; throws if n is not a multiple of the block size.
size_t ggml_row_bytes(GgmlType t, int64_t n);

// Block layouts (ggml-common.h). d and m are IEEE fp16 bit patterns.
inline constexpr int kQK = 32;  // elements per block of Q8_0, Q4_0, Q4_1
struct BlockQ8_0 {
  uint16_t d;      // scale
  int8_t qs[kQK];  // value j = qs[j] * d
};
struct BlockQ4_0 {
  uint16_t d;           // scale
  uint8_t qs[kQK / 2];  // element j < 16 in the low nibble of qs[j], element j + 16 in the high one
};                      // value = (q - 8) * d
struct BlockQ4_1 {
  uint16_t d, m;        // scale, minimum
  uint8_t qs[kQK / 2];  // nibbles as Q4_0; value = q * d + m
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);

// Decodes n elements (a multiple of the block size) starting at a block boundary. Throws for a type
// ggml_type_dequantizable() rejects.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Encodes n f32 values as `t` (F32, F16, BF16 or Q8_0; n a multiple of the block size). Q8_0 is
// llama.cpp's reference rounding (quantize_row_q8_0_ref): d = amax / 127, q = roundf(x / d) with
// the quotient as x * (1 / d), d stored as fp16; F16/BF16 round to nearest even.
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// Raw blocks of a 2-D view of a GGUF tensor: `rows` rows of `cols` elements (cols = GGUF ne[0], the
// fastest dimension; rows = the product of the others), each row_bytes long. `keep` holds the
// mapping alive. This is what quantized inference kernels take.
struct QuantView {
  GgmlType type = GgmlType::f32;
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  std::shared_ptr<void> keep;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Rows [begin, end) into dst ((end - begin) * cols floats); throws if the type is not decodable.
  void dequantize_rows(int64_t begin, int64_t end, float* dst) const;
};

}  // namespace temper::io
