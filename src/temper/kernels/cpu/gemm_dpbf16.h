// bf16 products on AVX512-BF16 dot products (VDPBF16PS: CPUs with AVX512-BF16 and no AMX, e.g. AMD Zen 4), on
// the operands of cpu/gemm_amx.h: weights packed with amx_pack_panels, rows rounded with amx_pack_rows. Each
// 32-bit weight lane holds the pair (W[n][2k], W[n][2k + 1]), the row's pair is broadcast, and every output
// accumulates its pairs in k order, in tiles of up to 12 rows x 32 outputs (24 accumulators). Each output
// depends on its row and column only: decode gives the training forward's bits. Compiled with AVX512-BF16
// flags (src/temper/CMakeLists.txt); matmul.cpp calls it only where the CPU has AVX512-BF16.
#pragma once

#include <cstdint>

namespace temper::kernels {

// C[m, n] (+)= sum_k A'[m, k] W'[n, k] for rows [0, M) and the outputs of panels [p0, p1) (as amx_gemm_block).
void dpbf16_gemm_block(const uint16_t* A16, int64_t Kp, const uint16_t* Wp, int64_t N, float* C, int64_t ldc, int64_t M,
                       int64_t p0, int64_t p1, bool accumulate);

}  // namespace temper::kernels
