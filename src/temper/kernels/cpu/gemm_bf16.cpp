// The bf16 product with one fixed sum per output (gemm_bf16.h). Compiled with AVX-512 flags
// (src/temper/CMakeLists.txt); matmul.cpp calls it only when the active ISA is AVX-512.
#include "temper/kernels/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace temper::kernels {
namespace {

constexpr int64_t kRowChunk = 64;  // rows of A per pass over the weight tiles (64 x K floats stays in L2)

inline float bf16_value(uint16_t h) { return __builtin_bit_cast(float, static_cast<uint32_t>(h) << 16); }

inline uint16_t round_bf16(float f) {  // round to nearest even; NaN stays (quiet) NaN
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Sum of the 16 lanes: t[i] = x[i] + x[i + 8], u[i] = t[i] + t[i + 4], (u0 + u2) + (u1 + u3).
inline float reduce_lanes(__m512 x) {
  const __m256 t = _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  const __m128 v = _mm_add_ps(u, _mm_movehl_ps(u, u));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}
inline void store(float* c, float s, bool accumulate) { *c = accumulate ? *c + s : s; }

// 32 weights of one row from k: the even-indexed ones (the low half of each 32-bit lane) and the odd.
inline void load_w(const uint16_t* w, int64_t left, __m512& even, __m512& odd) {
  const __mmask32 m = left >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1u);
  const __m512i v = _mm512_maskz_loadu_epi16(m, w);
  even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// 4 rows of A x 4 weight rows, the 16 accumulators as named variables (held in an array, GCC 12 stores
// them to the stack every iteration: see gemm_nt_tile44 in isa_kernels.inc).
void tile44(const float* A, int64_t lda, const uint16_t* W, int64_t ldw, float* C, int64_t ldc, int64_t K, bool accumulate) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00,
         c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  for (int64_t k = 0; k < K; k += 32) {
    __m512 e0, o0, e1, o1, e2, o2, e3, o3;
    load_w(W + k, K - k, e0, o0);
    load_w(W + ldw + k, K - k, e1, o1);
    load_w(W + 2 * ldw + k, K - k, e2, o2);
    load_w(W + 3 * ldw + k, K - k, e3, o3);
#define TEMPER_BF16_ROW(i)                                                      \
  {                                                                             \
    const __m512 ae = _mm512_loadu_ps(A + (i) * lda + k), ao = _mm512_loadu_ps(A + (i) * lda + k + 16); \
    c##i##0 = _mm512_fmadd_ps(ae, e0, _mm512_fmadd_ps(ao, o0, c##i##0));      \
    c##i##1 = _mm512_fmadd_ps(ae, e1, _mm512_fmadd_ps(ao, o1, c##i##1));      \
    c##i##2 = _mm512_fmadd_ps(ae, e2, _mm512_fmadd_ps(ao, o2, c##i##2));      \
    c##i##3 = _mm512_fmadd_ps(ae, e3, _mm512_fmadd_ps(ao, o3, c##i##3));      \
  }
    TEMPER_BF16_ROW(0) TEMPER_BF16_ROW(1) TEMPER_BF16_ROW(2) TEMPER_BF16_ROW(3)
#undef TEMPER_BF16_ROW
  }
#define TEMPER_BF16_OUT(i, j) store(C + (i) * ldc + (j), reduce_lanes(c##i##j), accumulate);
  TEMPER_BF16_OUT(0, 0) TEMPER_BF16_OUT(0, 1) TEMPER_BF16_OUT(0, 2) TEMPER_BF16_OUT(0, 3)
  TEMPER_BF16_OUT(1, 0) TEMPER_BF16_OUT(1, 1) TEMPER_BF16_OUT(1, 2) TEMPER_BF16_OUT(1, 3)
  TEMPER_BF16_OUT(2, 0) TEMPER_BF16_OUT(2, 1) TEMPER_BF16_OUT(2, 2) TEMPER_BF16_OUT(2, 3)
  TEMPER_BF16_OUT(3, 0) TEMPER_BF16_OUT(3, 1) TEMPER_BF16_OUT(3, 2) TEMPER_BF16_OUT(3, 3)
#undef TEMPER_BF16_OUT
}

// One row of A x 4 weight rows (decode at batch 1: bound by the weight stream).
void tile14(const float* A, const uint16_t* W, int64_t ldw, float* C, int64_t K, bool accumulate) {
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  for (int64_t k = 0; k < K; k += 32) {
    __m512 e, o;
    const __m512 ae = _mm512_loadu_ps(A + k), ao = _mm512_loadu_ps(A + k + 16);
    load_w(W + k, K - k, e, o);
    c0 = _mm512_fmadd_ps(ae, e, _mm512_fmadd_ps(ao, o, c0));
    load_w(W + ldw + k, K - k, e, o);
    c1 = _mm512_fmadd_ps(ae, e, _mm512_fmadd_ps(ao, o, c1));
    load_w(W + 2 * ldw + k, K - k, e, o);
    c2 = _mm512_fmadd_ps(ae, e, _mm512_fmadd_ps(ao, o, c2));
    load_w(W + 3 * ldw + k, K - k, e, o);
    c3 = _mm512_fmadd_ps(ae, e, _mm512_fmadd_ps(ao, o, c3));
  }
  store(C, reduce_lanes(c0), accumulate);
  store(C + 1, reduce_lanes(c1), accumulate);
  store(C + 2, reduce_lanes(c2), accumulate);
  store(C + 3, reduce_lanes(c3), accumulate);
}

// One row of A x one weight row: the edges (same lanes, same order as the tiles).
void tile11(const float* A, const uint16_t* W, float* C, int64_t K, bool accumulate) {
  __m512 c = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    __m512 e, o;
    load_w(W + k, K - k, e, o);
    c = _mm512_fmadd_ps(_mm512_loadu_ps(A + k), e, _mm512_fmadd_ps(_mm512_loadu_ps(A + k + 16), o, c));
  }
  store(C, reduce_lanes(c), accumulate);
}

}  // namespace

int64_t gemm_bf16_packed_stride(int64_t K) { return (K + 31) / 32 * 32; }

void gemm_bf16_pack_rows(const float* x, int64_t ldx, int64_t rows, int64_t K, float* packed) {
  const int64_t S = gemm_bf16_packed_stride(K);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ldx;
    float* p = packed + r * S;
    for (int64_t c = 0; c < S; c += 32)
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t ke = c + 2 * i, ko = ke + 1;
        p[c + i] = ke < K ? bf16_value(round_bf16(xr[ke])) : 0.f;
        p[c + 16 + i] = ko < K ? bf16_value(round_bf16(xr[ko])) : 0.f;
      }
  }
}

void gemm_bf16_rows(const float* A, const uint16_t* W, int64_t ldw, float* C, int64_t ldc, int64_t M, int64_t n0,
                    int64_t n1, int64_t K, bool accumulate) {
  const int64_t lda = gemm_bf16_packed_stride(K);
  for (int64_t mc = 0; mc < M; mc += kRowChunk) {
    const int64_t me = std::min(M, mc + kRowChunk);
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const uint16_t* w = W + n * ldw;
      int64_t m = mc;
      for (; m + 4 <= me; m += 4) tile44(A + m * lda, lda, w, ldw, C + m * ldc + n, ldc, K, accumulate);
      for (; m < me; ++m) tile14(A + m * lda, w, ldw, C + m * ldc + n, K, accumulate);
    }
    for (; n < n1; ++n)
      for (int64_t m = mc; m < me; ++m) tile11(A + m * lda, W + n * ldw, C + m * ldc + n, K, accumulate);
  }
}

}  // namespace temper::kernels
