// AVX512-BF16 products on the tile layout (gemm_dpbf16.h).
#include "temper/kernels/cpu/gemm_dpbf16.h"

#include <immintrin.h>

#include <cstring>

#include "temper/kernels/cpu/panel_store.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace temper::kernels {
namespace {

constexpr int64_t kMaxRows = 12;    // rows per tile: 24 accumulators, two weight vectors, one broadcast
constexpr int64_t kRowChunk = 192;  // rows of A per pass over the panels (L2)

inline __m512i pair_of(const uint16_t* a) {
  uint32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(static_cast<int>(v));
}

// Asks for the next panel's two lines of pair row q of block kb into L2 while this panel's are multiplied (as
// gemm_packed.cpp does: one row of A streams a panel in ~6 cycles a pair row, faster than the hardware prefetcher
// alone brings it from DRAM).
inline void prefetch_pair_row(const uint16_t* next_block, int64_t q) {
  _mm_prefetch(reinterpret_cast<const char*>(next_block + 32 * q), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(next_block + 512 + 32 * q), _MM_HINT_T1);
}

// R rows x one panel; the accumulators are named variables (GCC 12 spills an array of them every iteration).
// next (when Prefetch): the panel to bring into L2 meanwhile.
#define TEMPER_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
template <int R, bool Prefetch>
void tile(const uint16_t* A, int64_t Kp, const uint16_t* P, float* C, int64_t ldc, int64_t n, bool accumulate,
          const uint16_t* next) {
  static_assert(R >= 1 && R <= kMaxRows);
#define TEMPER_DECL(r) __m512 c##r##l = _mm512_setzero_ps(), c##r##h = _mm512_setzero_ps();
  TEMPER_ROWS(TEMPER_DECL)
#undef TEMPER_DECL
  for (int64_t kb = 0; kb < Kp / 32; ++kb) {
    const uint16_t* pb = P + kb * 1024;  // two tiles of 16 pairs x 16 outputs
    for (int64_t q = 0; q < 16; ++q) {
      const __m512bh wl = (__m512bh)_mm512_loadu_si512(pb + 32 * q);
      const __m512bh wh = (__m512bh)_mm512_loadu_si512(pb + 512 + 32 * q);
      if constexpr (Prefetch) prefetch_pair_row(next + kb * 1024, q);
      const int64_t k = kb * 32 + 2 * q;
#define TEMPER_STEP(r)                                    \
  if constexpr (R > r) {                                  \
    const __m512bh a = (__m512bh)pair_of(A + r * Kp + k); \
    c##r##l = _mm512_dpbf16_ps(c##r##l, a, wl);           \
    c##r##h = _mm512_dpbf16_ps(c##r##h, a, wh);           \
  }
      TEMPER_ROWS(TEMPER_STEP)
#undef TEMPER_STEP
    }
  }
#define TEMPER_OUT(r) \
  if constexpr (R > r) store_panel_row(C + r * ldc, c##r##l, c##r##h, n, accumulate);
  TEMPER_ROWS(TEMPER_OUT)
#undef TEMPER_OUT
}
#undef TEMPER_ROWS

template <int R>
void rows_of(const uint16_t* A, int64_t Kp, const uint16_t* P, float* C, int64_t ldc, int64_t n, bool accumulate,
             int64_t rows, const uint16_t* next) {
  if constexpr (R > 1) {
    if (rows < R) return rows_of<R - 1>(A, Kp, P, C, ldc, n, accumulate, rows, next);
  }
  if (next) return tile<R, true>(A, Kp, P, C, ldc, n, accumulate, next);
  tile<R, false>(A, Kp, P, C, ldc, n, accumulate, nullptr);
}

}  // namespace

void dpbf16_gemm_block(const uint16_t* A16, int64_t Kp, const uint16_t* Wp, int64_t N, float* C, int64_t ldc, int64_t M,
                       int64_t p0, int64_t p1, bool accumulate) {
  for (int64_t mc = 0; mc < M; mc += kRowChunk) {
    const int64_t me = M - mc < kRowChunk ? M : mc + kRowChunk;
    for (int64_t p = p0; p < p1; ++p) {
      const uint16_t* P = Wp + p * 32 * Kp;
      const int64_t n = N - 32 * p < 32 ? N - 32 * p : 32;
      // The first tile of each panel asks for the next panel (DRAM latency hidden behind this panel's tiles).
      const uint16_t* next = mc == 0 && p + 1 < p1 ? P + 32 * Kp : nullptr;
      for (int64_t m = mc; m < me; m += kMaxRows) {
        const int64_t rows = me - m < kMaxRows ? me - m : kMaxRows;
        rows_of<kMaxRows>(A16 + m * Kp, Kp, P, C + m * ldc + 32 * p, ldc, n, accumulate, rows,
                          m == mc ? next : nullptr);
      }
    }
  }
}

}  // namespace temper::kernels
