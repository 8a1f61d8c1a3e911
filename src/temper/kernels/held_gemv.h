// Decode-shaped products on a weight held as bf16, int4 or nf4 (a frozen LoRA base, model/frozen_base.h) that never
// widen it whole: threads take blocks of a few output rows, widen them into a small buffer of their own (L1/L2) and
// multiply at once. f32: the block through the small-M GEMM's row kernel (IsaTable::gemm_nt_f32), so every output
// has the bits kernels::gemm / gemm_decode give on the widened weight at these row counts. bf16: x rounded to bf16
// once, the weight's bf16 values (int4, nf4: widened, then rounded as kernels::gemm's bf16 path rounds them),
// products on bf16 pairs with f32 sums (IsaTable::held_gemm_nt_bf16: VDPBF16PS on AVX512-BF16). Leaves out the
// input's gradient.
#pragma once

#include <cstdint>

#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/matmul.h"
#include "temper/kernels/nf4.h"

namespace temper::kernels {

// W [N, K] (y = x W^T: N outputs of K inputs), held as bf16 (row-major), int4 (the rows layout) or nf4; one of them.
struct HeldWeight {
  int64_t N = 0, K = 0;
  const uint16_t* bf16 = nullptr;
  const Int4Weights* int4 = nullptr;
  const Nf4Weights* nf4 = nullptr;
};

// The most rows held_gemv takes (more: the caller's panel GEMM; TEMPER_HELD_GEMV_M=n sets it, 0 turns it off).
int64_t held_gemv_max_rows();
// y[M, N] = x[M, K] W^T (+ y when accumulate) for M <= held_gemv_max_rows(). Parallel over blocks of outputs; each
// output's bits depend on its row and column only (not on the thread count).
void held_gemv(const HeldWeight& w, int64_t M, const float* x, int64_t ldx, bool accumulate, float* y, int64_t ldy,
               Precision p);

}  // namespace temper::kernels
