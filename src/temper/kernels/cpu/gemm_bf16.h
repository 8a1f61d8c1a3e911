// bf16 x bf16 -> f32 products y = x W^T with one fixed sum per output (AVX-512): the bf16 precision's
// forward products, training and rollouts alike.
//
// The arithmetic is that of AVX-512 BF16's vdpbf16ps, which on the CPUs here is bitwise
// c = fma(x[2i], w[2i], fma(x[2i+1], w[2i+1], c)) per lane i (checked on 3.2M lanes): inputs in chunks
// of 32, lane i of one 16-lane f32 accumulator takes the pair (32 j + 2 i, 32 j + 2 i + 1) of chunk j,
// odd element first, both products exact (bf16 x bf16), each sum rounded; the lanes are then reduced
// in a fixed tree: t[i] = l[i] + l[i + 8], u[i] = t[i] + t[i + 4], (u0 + u2) + (u1 + u3). It is computed with ordinary FMAs on weights widened from bf16
// (a shift and a mask: no shuffles), which on these cores is 2x the multiply-add rate of vdpbf16ps.
// A row's result does not depend on how many rows share the call or how threads split it, so the
// rollout engine's decode (a few rows) gives the training forward's bits (thousands of rows).
#pragma once

#include <cstdint>

namespace temper::kernels {

// The inputs of one call, prepared by gemm_bf16_pack_rows: each row rounded to bf16 (round to nearest
// even) and held as f32 in chunks of 32: the 16 even-indexed inputs, then the 16 odd ones (zeros past K).
int64_t gemm_bf16_packed_stride(int64_t K);  // floats per packed row: 32 x ceil(K / 32)
void gemm_bf16_pack_rows(const float* x, int64_t ldx, int64_t rows, int64_t K, float* packed);

// C[m, n] (+)= sum_k A[m, k] W[n, k] for m in [0, M), n in [n0, n1): A packed (stride
// gemm_bf16_packed_stride(K)), W bf16 row-major [N, K] with row stride ldw. Needs AVX-512 (F, BW).
void gemm_bf16_rows(const float* A, const uint16_t* W, int64_t ldw, float* C, int64_t ldc, int64_t M, int64_t n0,
                    int64_t n1, int64_t K, bool accumulate);

}  // namespace temper::kernels
