// The training attention's bf16 tile products on AVX512-BF16 (attention_dpbf16.cpp): IsaTable::attn_mm_bf16 and
// the operands' rounding where the CPU has AVX512-BF16 (isa_table.cpp puts them in the AVX-512 table).
#pragma once

#include <cstdint>

#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

// As IsaTable::attn_mm_bf16.
void attn_mm_dpbf16(const uint32_t* A, int64_t ars, int64_t aps, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
                    int64_t M, int64_t N, int64_t Kp, bool accumulate, int tri, int64_t c);

// Puts attn_mm_dpbf16 and the operands' rounding on VCVTNE2PS2BF16 (attn_bf16_pairs, attn_bf16_row) in t, and
// names them (attn_bf16_kernel "vdpbf16ps"). Only for a CPU with AVX512-BF16.
void fill_attention_dpbf16(IsaTable& t);

}  // namespace temper::kernels
