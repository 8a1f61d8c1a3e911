// NF4, QLoRA's 4-bit NormalFloat (Dettmers et al., 2023; bitsandbytes' quantize_4bit(quant_type="nf4")): a weight
// [N, K] in blocks of 64 consecutive inputs of a row, one f32 absmax per block, each value x * (1 / absmax) coded as
// the nearest of 16 levels (bitsandbytes' table; a value on a midpoint takes the lower level, as its dQuantizeNF4),
// read back as level * absmax in f32. Rows padded to 32 and packed as int4's rows layout (kernels/int4_matmul.h),
// so the held kernels widen both the same way. Leaves out double quantisation (absmax in 8 bits) and any product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace temper::kernels {

inline constexpr int64_t kNf4Block = 64;
// bitsandbytes' NF4 levels (its nf4_data / dDequantizeNF4), code 0..15.
inline constexpr float kNf4Levels[16] = {-1.0f,
                                         -0.6961928009986877f,
                                         -0.5250730514526367f,
                                         -0.39491748809814453f,
                                         -0.28444138169288635f,
                                         -0.18477343022823334f,
                                         -0.09105003625154495f,
                                         0.0f,
                                         0.07958029955625534f,
                                         0.16093020141124725f,
                                         0.24611230194568634f,
                                         0.33791524171829224f,
                                         0.44070982933044434f,
                                         0.5626170039176941f,
                                         0.7229568362236328f,
                                         1.0f};
inline constexpr uint8_t kNf4Zero = 7;  // the code of 0 (padding, all-zero blocks)

struct Nf4Weights {
  int64_t N = 0, K = 0;       // logical shape
  int64_t Kp = 0;             // K padded to a multiple of 32
  int64_t block = kNf4Block;  // inputs per absmax (divides Kp)
  std::vector<uint8_t> q;     // [N, Kp / 2]: per 32-input chunk, byte j = input j (low nibble), j + 16 (high)
  std::vector<float> absmax;  // [N, Kp / block]
  size_t bytes() const { return q.size() + absmax.size() * sizeof(float); }
};

// The block used for rows of K inputs: 64 where it divides K padded to 32, else 32 (as int4_group_for picks).
int64_t nf4_block_for(int64_t K);
// The code of a normalised value x / absmax (bitsandbytes' dQuantizeNF4: the count of midpoints below it).
uint8_t nf4_code(float normed);
// Quantises W [N, K] (row stride ldw). A block of zeros takes absmax 0 and code 7 (bitsandbytes' kernel gives it
// code 0 from 0 * inf; both read back as zero). Non-finite weights are refused. Parallel over rows.
void quantize_nf4(const float* W, int64_t N, int64_t K, int64_t ldw, Nf4Weights* out);
// The code of row n, input k, and W [N, K] read back (the reference the held kernels match bit for bit).
uint8_t nf4_code_at(const Nf4Weights& w, int64_t n, int64_t k);
void dequantize_nf4(const Nf4Weights& w, float* W);

// One row of an nf4 weight as round(level * absmax of its block) into o [K], the padding past K dropped: q is the
// row's Kp / 2 bytes, absmax its Kp / block values. The loop of the panels (nf4_rows_to_f32) and of the scalar and
// AVX2 held kernels (kernels/cpu/held_gemv.inc); dequantize_nf4 stays the per-input reference the tests hold it to.
// static: held_gemv.inc's translation units are built with their own -m flags, and the linker would keep one copy of
// an inline function for all of them (one that may use instructions another caller's CPU lacks).
template <class Out, class Round>
static inline void nf4_row_to(const uint8_t* q, const float* absmax, int64_t K, int64_t Kp, int64_t block, Out* o,
                              Round round) {
  const int64_t per = block / 32;          // 32-input chunks a block
  for (int64_t c = 0; c < Kp / 32; ++c) {  // byte j: input 32 c + j (low nibble), 32 c + 16 + j (high)
    const float a = absmax[c / per];
    const uint8_t* qc = q + c * 16;
    const int64_t k0 = c * 32;
    for (int j = 0; j < 16 && k0 + j < K; ++j) o[k0 + j] = round(kNf4Levels[qc[j] & 15] * a);
    for (int j = 0; j < 16 && k0 + 16 + j < K; ++j) o[k0 + 16 + j] = round(kNf4Levels[qc[j] >> 4] * a);
  }
}

}  // namespace temper::kernels
