// Rows of a weight held in a compact format, widened to f32: the panels a frozen LoRA base (model/frozen_base.h)
// multiplies with kernels::gemm. int4: the drafter's rows layout (kernels/int4_matmul.h), each value
// scale * (q - zero) exactly as dequantize_int4 computes it (the reference: the same bits); nf4 (kernels/nf4.h):
// level * absmax as dequantize_nf4 computes it; bf16: exact.
// Leaves out: the cols16 layout (the frozen base quantises in rows), any product of its own.
#pragma once

#include <cstdint>

#include "temper/kernels/int4_matmul.h"
#include "temper/kernels/nf4.h"

namespace temper::kernels {

// out[(r - r0) * w.K + k] = W[r, k] for rows [r0, r1) of an int4 weight in the rows layout. Parallel over rows.
void int4_rows_to_f32(const Int4Weights& w, int64_t r0, int64_t r1, float* out);
// The same for an nf4 weight.
void nf4_rows_to_f32(const Nf4Weights& w, int64_t r0, int64_t r1, float* out);
// out[(r - r0) * K + k] = W[r, k] for rows [r0, r1) of a row-major bf16 weight [N, K]. Parallel over rows.
void bf16_rows_to_f32(const uint16_t* w, int64_t K, int64_t r0, int64_t r1, float* out);

}  // namespace temper::kernels
