// The packed products (gemm_packed.h). Compiled with AVX-512 flags (src/temper/CMakeLists.txt);
// matmul.cpp calls them only when the active ISA is AVX-512.
#include "temper/kernels/cpu/gemm_packed.h"

#include <immintrin.h>

#include "temper/kernels/cpu/panel_store.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace temper::kernels {
namespace {

// core/dtype.h's f32_to_bf16, kept local: an inline function from a shared header compiled here with
// AVX-512 flags could be the copy the linker keeps for every other caller (ODR; see isa_kernels.inc).
inline uint16_t round_bf16(float f) {  // round to nearest even; NaN stays (quiet) NaN
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

constexpr int64_t kMaxRows = 12;    // rows per tile: 24 accumulators, two widened weight vectors, one broadcast
constexpr int64_t kRowChunk = 192;  // rows of A per pass over the panels (192 x K floats: L2)

// R rows (R <= 12) x one panel of 32 outputs; the accumulators are named variables (held in an array,
// GCC 12 stores them to the stack every iteration: see gemm_nt_tile44 in isa_kernels.inc).
#define TEMPER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
// One packed row of 32 weights as two f32 vectors (outputs 0..15, 16..31 of the panel).
inline void load_panel_row(const float* P, int64_t k, __m512& wl, __m512& wh) {
  wl = _mm512_loadu_ps(P + k * 32);
  wh = _mm512_loadu_ps(P + k * 32 + 16);
}
inline void load_panel_row(const uint16_t* P, int64_t k, __m512& wl, __m512& wh) {
  const __m512i w = _mm512_loadu_si512(P + k * 32);
  wl = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  wh = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// Asks for the next panel's row k (one cache line of bf16, two of f32) into L2 while this panel's rows are
// computed (into L2, not L1: the L1 keeps this panel and the rows of A).
inline void prefetch_panel_row(const float* next, int64_t k) {
  _mm_prefetch(reinterpret_cast<const char*>(next + k * 32), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(next + k * 32 + 16), _MM_HINT_T1);
}
inline void prefetch_panel_row(const uint16_t* next, int64_t k) {
  _mm_prefetch(reinterpret_cast<const char*>(next + k * 32), _MM_HINT_T1);
}

// R rows x one panel; next (when Prefetch) is the panel to bring into L2 meanwhile, a row per k.
template <int R, bool Prefetch, class T>
void tile(const float* A, int64_t lda, const T* P, int64_t K, float* C, int64_t ldc, int64_t n, bool accumulate,
          const T* next) {
  static_assert(R >= 1 && R <= kMaxRows);
#define TEMPER_DECL(r) __m512 c##r##l = _mm512_setzero_ps(), c##r##h = _mm512_setzero_ps();
  TEMPER_ROWS(TEMPER_DECL)
#undef TEMPER_DECL
  for (int64_t k = 0; k < K; ++k) {
    __m512 wl, wh;
    load_panel_row(P, k, wl, wh);
    if constexpr (Prefetch) prefetch_panel_row(next, k);
#define TEMPER_STEP(r)                               \
  if constexpr (R > r) {                             \
    const __m512 a = _mm512_set1_ps(A[r * lda + k]); \
    c##r##l = _mm512_fmadd_ps(a, wl, c##r##l);       \
    c##r##h = _mm512_fmadd_ps(a, wh, c##r##h);       \
  }
    TEMPER_ROWS(TEMPER_STEP)
#undef TEMPER_STEP
  }
#define TEMPER_OUT(r) \
  if constexpr (R > r) store_panel_row(C + r * ldc, c##r##l, c##r##h, n, accumulate);
  TEMPER_ROWS(TEMPER_OUT)
#undef TEMPER_OUT
}
#undef TEMPER_ROWS

template <int R, class T>
void rows_of(const float* A, int64_t lda, const T* P, int64_t K, float* C, int64_t ldc, int64_t n, bool accumulate,
             int64_t rows, const T* next) {
  if constexpr (R > 1) {
    if (rows < R) return rows_of<R - 1>(A, lda, P, K, C, ldc, n, accumulate, rows, next);
  }
  if (next) return tile<R, true>(A, lda, P, K, C, ldc, n, accumulate, next);
  tile<R, false>(A, lda, P, K, C, ldc, n, accumulate, next);
}

template <class T>
void packed_panels(const float* A, int64_t lda, const T* Wp, int64_t N, int64_t K, float* C, int64_t ldc, int64_t M,
                   int64_t p0, int64_t p1, bool accumulate) {
  for (int64_t mc = 0; mc < M; mc += kRowChunk) {  // a chunk of A stays in L2 while the panels pass
    const int64_t me = M - mc < kRowChunk ? M : mc + kRowChunk;
    for (int64_t p = p0; p < p1; ++p) {
      const T* P = Wp + p * K * 32;
      const int64_t n = N - 32 * p < 32 ? N - 32 * p : 32;
      // The first tile of each panel asks for the next panel (DRAM latency hidden behind this panel's tiles).
      const T* next = mc == 0 && p + 1 < p1 ? P + K * 32 : nullptr;
      for (int64_t m = mc; m < me; m += kMaxRows) {
        const int64_t rows = me - m < kMaxRows ? me - m : kMaxRows;
        rows_of<kMaxRows>(A + m * lda, lda, P, K, C + m * ldc + 32 * p, ldc, n, accumulate, rows,
                          m == mc ? next : nullptr);
      }
    }
  }
}

}  // namespace

int64_t packed_elems(int64_t N, int64_t K) {
  return (N + 31) / 32 * 32 * K;
}

void f32_pack_panels(const float* W, int64_t ldw, int64_t N, int64_t K, int64_t p0, int64_t p1, float* out) {
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t i = 0; i < 32; ++i) {
      const int64_t n = 32 * p + i;
      float* o = out + p * K * 32 + i;
      for (int64_t k = 0; k < K; ++k) o[k * 32] = n < N ? W[n * ldw + k] : 0.f;
    }
}

void bf16_pack_panels(const float* W, int64_t ldw, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* out) {
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t lo = 32 * p + i, hi = lo + 16;
      uint16_t* o = out + p * K * 32 + 2 * i;
      for (int64_t k = 0; k < K; ++k) {
        o[k * 32] = lo < N ? round_bf16(W[lo * ldw + k]) : 0;
        o[k * 32 + 1] = hi < N ? round_bf16(W[hi * ldw + k]) : 0;
      }
    }
}

void bf16_round_rows(const float* x, int64_t ldx, int64_t rows, int64_t K, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k)
      out[r * K + k] = __builtin_bit_cast(float, static_cast<uint32_t>(round_bf16(x[r * ldx + k])) << 16);
}

void gemm_f32_packed_panels(const float* A, int64_t lda, const float* Wp, int64_t N, int64_t K, float* C, int64_t ldc,
                            int64_t M, int64_t p0, int64_t p1, bool accumulate) {
  packed_panels(A, lda, Wp, N, K, C, ldc, M, p0, p1, accumulate);
}

void gemm_bf16_packed_panels(const float* A, int64_t lda, const uint16_t* Wp, int64_t N, int64_t K, float* C,
                             int64_t ldc, int64_t M, int64_t p0, int64_t p1, bool accumulate) {
  packed_panels(A, lda, Wp, N, K, C, ldc, M, p0, p1, accumulate);
}

}  // namespace temper::kernels
