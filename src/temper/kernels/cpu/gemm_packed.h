// Forward products y = x W^T on weights packed once per update (AVX-512): the bf16 precision's
// forward products (training and rollouts alike) and the f32 rollout engine's decode products.
// Each output is the plain sequential sum over k, whatever the number of rows, the tiling or the
// threads (the packed layout and the summation order are described above packed_elems).
#pragma once

#include <cstdint>

namespace temper::kernels {

// Packed layout: the N outputs in panels of 32; panel p holds, for k = 0..K-1, one row of the 32
// weights W[32p .. 32p + 31][k] (zeros past N):
//   f32:  128 bytes, outputs 32p + i at float i;
//   bf16: 64 bytes, 32-bit lane i holding W[32p + i][k] (low half) and W[32p + 16 + i][k] (high half),
//         rounded to bf16; a shift and a mask widen it to two f32 vectors.
// The product is an outer product: for each k, every row's x[k] broadcast times the panel row, FMA'd
// into 32 accumulators per row (tiles of 12 rows: 24 accumulators).
//
// Each output is the plain sequential sum c = fma(x[k], w[k], c), k = 0, 1, ..., K-1 (bf16: x rounded
// to bf16 by the caller, products exact), whatever the number of rows, the tiling or the threads: in
// bf16 the rollout engine's decode (a few rows) gives the training forward's bits (thousands of rows).
//
// Elements (floats or uint16) of the packed copy of an [N, K] weight.
int64_t packed_elems(int64_t N, int64_t K);

// Packs panels [p0, p1) of the f32 weight W [N, K] (row stride ldw) into out (the whole packed copy).
void f32_pack_panels(const float* W, int64_t ldw, int64_t N, int64_t K, int64_t p0, int64_t p1, float* out);
void bf16_pack_panels(const float* W, int64_t ldw, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* out);

// x rounded to bf16 (round to nearest even), kept as f32: rows of K, row stride K in out.
void bf16_round_rows(const float* x, int64_t ldx, int64_t rows, int64_t K, float* out);

// C[m, n] (+)= sum_k A[m, k] W[n, k] for m in [0, M) and the outputs of panels [p0, p1); Wp the packed
// copy of W [N, K]; for bf16, A rounded by bf16_round_rows.
void gemm_f32_packed_panels(const float* A, int64_t lda, const float* Wp, int64_t N, int64_t K, float* C, int64_t ldc,
                            int64_t M, int64_t p0, int64_t p1, bool accumulate);
void gemm_bf16_packed_panels(const float* A, int64_t lda, const uint16_t* Wp, int64_t N, int64_t K, float* C,
                             int64_t ldc, int64_t M, int64_t p0, int64_t p1, bool accumulate);

}  // namespace temper::kernels
