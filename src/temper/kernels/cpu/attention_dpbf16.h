// The training attention's bf16 tile products on AVX512-BF16 (attention_dpbf16.cpp): IsaTable::attn_mm_bf16
// where the CPU has AVX512-BF16 (isa_table.cpp puts it in the AVX-512 table).
#pragma once

#include <cstdint>

#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

// As IsaTable::attn_mm_bf16.
void attn_mm_dpbf16(const uint32_t* A, int64_t ars, int64_t aps, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
                    int64_t M, int64_t N, int64_t Kp, bool accumulate, int tri, int64_t c);

}  // namespace temper::kernels
