// bf16 products on AMX tiles (Intel Sapphire Rapids and later): C[M, N] (+)= A[M, K] W[N, K]^T with A and
// W rounded to bf16 (round to nearest even), f32 accumulation in the tiles. Compiled with AMX flags
// (src/temper/CMakeLists.txt); matmul.cpp calls these only where amx_usable().
//
// Layouts. The right operand W, as [N, K] (a linear layer's weight, or any op(B) of gemm()), is packed in
// panels of 32 outputs: for each block of 32 k, two 1 KiB tiles (outputs 0-15, 16-31 of the panel) of 16
// rows, row r holding for each of the 16 outputs the pair (W[n][32b + 2r], W[n][32b + 2r + 1]) (the
// "VNNI" layout the tile product reads). K is padded with zeros to Kp = a multiple of 32; outputs past N
// are zeros. The left operand is bf16 rows of Kp (zeros past K).
//
// Each output is the tile product's accumulation over the k blocks in order, starting from zero, then
// (accumulate) added to C: it depends on its row of A and its column of W only, never on the number of
// rows, the tiling or the threads. The rollout engine's decode (a few rows) gives the training forward's
// bits (thousands of rows); the result is not the sequential FMA sum of the AVX-512 kernels.
#pragma once

#include <cstdint>

namespace temper::kernels {

// The CPU has AMX-BF16 (and AVX512-BF16), the OS saves its state, and the process was granted the tile data
// (asked for on the first call).
bool amx_usable();

int64_t amx_k_padded(int64_t K);                 // K rounded up to 32
int64_t amx_packed_elems(int64_t N, int64_t K);  // uint16 elements of a packed [N, K]

// Packs panels [p0, p1) of W' [N, K] where W'(n, k) = nk ? B[n * ldb + k] : B[k * ldb + n] (rounded to bf16).
void amx_pack_panels(const float* B, int64_t ldb, bool nk, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* out);
// The same from a copy already rounded to bf16 (a weight's once-per-update copy: half the bytes to read).
void amx_pack_panels(const uint16_t* B, int64_t ldb, bool nk, int64_t N, int64_t K, int64_t p0, int64_t p1,
                     uint16_t* out);

// Rows [m0, m1) of A' [M, K] as bf16 rows of Kp = amx_k_padded(K) (zeros past K) in out (row m at out + m * Kp),
// A'(m, k) = mk ? A[m * lda + k] : A[k * lda + m].
void amx_pack_rows(const float* A, int64_t lda, bool mk, int64_t K, int64_t m0, int64_t m1, uint16_t* out);

// C[m, n] (+)= sum_k A'[m, k] W'[n, k] for rows [m0, m1) and the outputs of panels [p0, p1).
// A16: amx_pack_rows's rows (stride Kp); Wp: amx_pack_panels's copy of W' [N, K].
void amx_gemm_block(const uint16_t* A16, int64_t Kp, const uint16_t* Wp, int64_t N, float* C, int64_t ldc, int64_t m0,
                    int64_t m1, int64_t p0, int64_t p1, bool accumulate);

}  // namespace temper::kernels
