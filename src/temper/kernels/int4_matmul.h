// 4-bit weight-only linear layers for the speculative drafter (EfficientRollout): a weight matrix
// [N, K] quantized round-to-nearest, asymmetric uint4 with one f32 scale and one uint4 zero point
// per group of `group` inputs (AWQ/GPTQ's "W4 g128 asym" layout); w ~= scale * (q - zero), with 0
// exactly representable. Products run on int8 activations quantized on the fly per weight group.
// Leaves out: activation-aware scaling (AWQ), other bit widths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace temper::kernels {

inline constexpr int64_t kInt4Chunk = 32;

// Rows are padded with zeros to a multiple of 32. Packing per 32-input chunk: byte j holds input j
// (low nibble) and input j + 16 (high nibble), llama.cpp's Q4 order. Layout `cols16` (CPUs with
// AVX-512 VNNI, the drafter's choice there): blocks of 16 output rows, each block's bytes in octets of
// 8 inputs, 64 bytes per octet: byte 4 n + b holds row n's input b (low nibble) and b + 4 (high); scales
// and zero points [block][group][16]. One vpdpbusd then makes 16 outputs' 4-input partial sums at once
// (lanes = outputs, the activation's 4 bytes broadcast), so per group a row needs no horizontal sum, one
// convert and two FMAs for 16 outputs. Same bytes per weight, same integers, same dequantized values.
enum class Int4Layout { rows, cols16 };

struct Int4Weights {
  Int4Layout layout = Int4Layout::rows;
  int64_t N = 0, K = 0;      // logical shape
  int64_t Kp = 0;            // K padded to a multiple of 32
  int64_t group = 128;       // inputs per scale / zero (divides Kp, multiple of 32)
  std::vector<uint8_t> q;    // rows: [N, Kp / 2]; cols16: [N / 16 (rounded up), Kp / 8, 64]
  std::vector<float> scale;  // rows: [N, Kp / group]; cols16: [N / 16 (rounded up), Kp / group, 16]
  std::vector<uint8_t> zero;  // as scale, 0..15
  size_t bytes() const { return q.size() + scale.size() * sizeof(float) + zero.size(); }
};

// The group actually used for rows of K inputs: `preferred` when it divides the padded row, else the
// largest of 64 and 32 that does (SmolLM2's 576 = 4.5 x 128 takes 64).
int64_t int4_group_for(int64_t K, int64_t preferred);
// Round-to-nearest quantization of W [N, K] (row stride ldw), groups as int4_group_for. Parallel over rows.
void quantize_int4(const float* W, int64_t N, int64_t K, int64_t ldw, int64_t group, Int4Weights* out,
                   Int4Layout layout = Int4Layout::rows);
bool int4_cols16_supported();  // this CPU runs the cols16 kernel (AVX-512 VNNI + BW)
// The drafter's layout on this CPU: cols16 where supported, else rows (TEMPER_INT4_LAYOUT=rows forces rows).
Int4Layout int4_preferred_layout();
void dequantize_int4(const Int4Weights& w, float* W);  // [N, K]

// The activations are quantized on the fly per weight group (a ~= sa * qa, sa = max|a| / 127); the
// products are exact integer u4 x s8 dot products per group (AVX-512 VNNI vpdpbusd, AVX2 maddubs + madd,
// or scalar: the same integers), so y[m, n] = sum_g scale * (sa * sum q*qa - zero * sa * sum qa).
// Y[M, N] = X[M, K] W^T (+ Y when accumulate), X row stride ldx, Y row stride ldy.
void int4_gemm(int64_t M, const float* X, int64_t ldx, const Int4Weights& W, bool accumulate, float* Y, int64_t ldy);

}  // namespace temper::kernels
