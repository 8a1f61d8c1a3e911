// The training attention's bf16 tile products on AVX512-BF16 dot products (VDPBF16PS), for CPUs with
// AVX512-BF16 (Zen 4, Xeons): IsaTable::attn_mm_bf16 on the AVX-512 table where the CPU has it (isa_table.cpp).
// Register tiles of 6 rows x 64 outputs (24 accumulators); each output sums its pairs in k order from zero,
// then adds to C: attention_tiles.inc's portable version gives the same bits (but for denormals, which VDPBF16PS
// flushes to zero). Compiled with AVX512-BF16 flags.
#include "temper/kernels/cpu/attention_dpbf16.h"

#include <immintrin.h>

#include "temper/kernels/cpu/exp16.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace temper::kernels {
namespace {

constexpr int64_t kTileRows = 6;

inline __mmask16 mask_of(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}
inline void store_out(float* c, __m512 x, __mmask16 m, bool accumulate) {
  if (accumulate) x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), x);
  _mm512_mask_storeu_ps(c, m, x);
}
inline __m512bh pair_of(const uint32_t* a) {
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(*a));
}
inline __m512bh load_pairs(__mmask16 m, const uint32_t* b) {
  return (__m512bh)_mm512_maskz_loadu_epi32(m, b);
}

#define TEMPER_ATTN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int R, int NV>
void tile_bf16(const uint32_t* A, int64_t ars, int64_t aps, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
               int64_t p0, int64_t p1, __mmask16 last, bool accumulate) {
#define TEMPER_DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
  TEMPER_ATTN_ROWS(TEMPER_DECL)
#undef TEMPER_DECL
  const __mmask16 full = 0xffff;
  for (int64_t p = p0; p < p1; ++p) {
    const uint32_t* b = B + p * ldb;
    const uint32_t* a = A + p * aps;
    const __m512bh b0 = load_pairs(NV == 1 ? last : full, b);
    const __m512bh b1 = NV > 1 ? load_pairs(NV == 2 ? last : full, b + 16) : b0;
    const __m512bh b2 = NV > 2 ? load_pairs(NV == 3 ? last : full, b + 32) : b0;
    const __m512bh b3 = NV > 3 ? load_pairs(last, b + 48) : b0;
#define TEMPER_STEP(r)                                                \
  if constexpr (R > r) {                                              \
    const __m512bh x = pair_of(a + r * ars);                          \
    c##r##0 = _mm512_dpbf16_ps(c##r##0, x, b0);                       \
    if constexpr (NV > 1) c##r##1 = _mm512_dpbf16_ps(c##r##1, x, b1); \
    if constexpr (NV > 2) c##r##2 = _mm512_dpbf16_ps(c##r##2, x, b2); \
    if constexpr (NV > 3) c##r##3 = _mm512_dpbf16_ps(c##r##3, x, b3); \
  }
    TEMPER_ATTN_ROWS(TEMPER_STEP)
#undef TEMPER_STEP
  }
#define TEMPER_OUT(r)                                                                              \
  if constexpr (R > r) {                                                                           \
    store_out(C + r * ldc, c##r##0, NV == 1 ? last : full, accumulate);                            \
    if constexpr (NV > 1) store_out(C + r * ldc + 16, c##r##1, NV == 2 ? last : full, accumulate); \
    if constexpr (NV > 2) store_out(C + r * ldc + 32, c##r##2, NV == 3 ? last : full, accumulate); \
    if constexpr (NV > 3) store_out(C + r * ldc + 48, c##r##3, last, accumulate);                  \
  }
  TEMPER_ATTN_ROWS(TEMPER_OUT)
#undef TEMPER_OUT
}
#undef TEMPER_ATTN_ROWS

using TileBf16 = void (*)(const uint32_t*, int64_t, int64_t, const uint32_t*, int64_t, float*, int64_t, int64_t,
                          int64_t, __mmask16, bool);
template <int R>
TileBf16 tile_of(int nv) {
  switch (nv) {
    case 1:
      return tile_bf16<R, 1>;
    case 2:
      return tile_bf16<R, 2>;
    case 3:
      return tile_bf16<R, 3>;
    default:
      return tile_bf16<R, 4>;
  }
}
TileBf16 tile_for(int64_t rows, int nv) {
  switch (rows) {
    case 1:
      return tile_of<1>(nv);
    case 2:
      return tile_of<2>(nv);
    case 3:
      return tile_of<3>(nv);
    case 4:
      return tile_of<4>(nv);
    case 5:
      return tile_of<5>(nv);
    default:
      return tile_of<6>(nv);
  }
}

int64_t clamp(int64_t x, int64_t hi) {
  return x < 0 ? 0 : (x > hi ? hi : x);
}

// The operands' rounding on VCVTNE2PS2BF16 (round to nearest even, NaN kept quiet: attention_tiles.inc's bf16_bits
// but for denormal inputs, which it flushes to zero as VDPBF16PS does with a denormal operand).
// 32-bit lane i = (a[i], b[i]) rounded (a in the low half).
inline __m512i bf16_pairs16(__m512 a, __m512 b) {
  const __m512i words = _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(b, a));  // a 0..15, then b 0..15
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, words);
}

inline __mmask32 mask32_of(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1u);
}

// Stores of whole vectors where they are whole (a masked store costs about twice a plain one on Zen 4).
inline void store16(uint32_t* p, __mmask16 m, __m512i x) {
  if (m == 0xffff)
    _mm512_storeu_si512(p, x);
  else
    _mm512_mask_storeu_epi32(p, m, x);
}
inline void store16h(uint16_t* p, __mmask16 m, __m256i x) {
  if (m == 0xffff)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x);
  else
    _mm256_mask_storeu_epi16(p, m, x);
}

void attn_bf16_pairs_cvt(const float* a, const float* b, uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_of(n - i);
    const __m512 y = b ? _mm512_maskz_loadu_ps(m, b + i) : _mm512_setzero_ps();
    store16(out + i, m, bf16_pairs16(_mm512_maskz_loadu_ps(m, a + i), y));
  }
}

// The row's bf16 stream (off zeros first, a zero last when n + off is odd), 32 elements a step.
void attn_bf16_row_cvt(const float* x, int64_t n, int64_t off, uint32_t* out) {
  uint16_t* h = reinterpret_cast<uint16_t*>(out);
  const __m512i zero = _mm512_setzero_si512();
  if (off) _mm512_mask_storeu_epi16(h, 1, zero);
  for (int64_t i = 0; i < n; i += 32) {
    const __m512 lo = _mm512_maskz_loadu_ps(mask_of(n - i), x + i);
    const __m512 hi = n - i > 16 ? _mm512_maskz_loadu_ps(mask_of(n - i - 16), x + i + 16) : _mm512_setzero_ps();
    const __m512i w = _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(hi, lo));
    if (n - i >= 32)
      _mm512_storeu_si512(h + off + i, w);
    else
      _mm512_mask_storeu_epi16(h + off + i, mask32_of(n - i), w);
  }
  if ((n + off) & 1) _mm512_mask_storeu_epi16(h + n + off, 1, zero);
}

// Lanes [lo, hi) of the 16 columns from j0.
inline __mmask16 span_mask(int64_t lo, int64_t hi, int64_t j0) {
  const int64_t a = clamp(lo - j0, 16), b = clamp(hi - j0, 16);
  return b <= a ? static_cast<__mmask16>(0) : static_cast<__mmask16>(((1u << b) - 1u) & ~((1u << a) - 1u));
}

// One step of row_sum: 16 columns of P (their exp first with L, written back) times dP into acc.
template <bool Whole>
inline __m512 row_step(float* P, bool exp, __m512 s, __m512 l, const float* dP, __mmask16 m, __m512 acc) {
  __m512 p = Whole ? _mm512_loadu_ps(P) : _mm512_maskz_loadu_ps(m, P);
  if (exp) {
    p = exp16(_mm512_fmsub_ps(p, s, l));
    if constexpr (Whole) {
      _mm512_storeu_ps(P, p);  // a masked store costs about twice a plain one on Zen 4 and 5
    } else {
      p = _mm512_maskz_mov_ps(m, p);
      _mm512_mask_storeu_ps(P, m, p);
    }
  }
  return _mm512_fmadd_ps(p, Whole ? _mm512_loadu_ps(dP) : _mm512_maskz_loadu_ps(m, dP), acc);
}

// d_i: 16 lanes from lo (lane l sums columns lo + l, lo + l + 16, ...), then fold16 (cpu/exp16.h); with L, P's exp
// first (written back).
float row_sum(float* P, const float* L, float es, const float* dP, int64_t lo, int64_t hi) {
  __m512 acc = _mm512_setzero_ps();
  const __m512 s = _mm512_set1_ps(es), l = L ? _mm512_set1_ps(*L) : s;
  int64_t j = lo;
  for (; j + 16 <= hi; j += 16) acc = row_step<true>(P + j, L, s, l, dP + j, 0xffff, acc);
  if (j < hi) acc = row_step<false>(P + j, L, s, l, dP + j, mask_of(hi - j), acc);
  return fold16(acc);
}

// One row's dS on the 16 columns from j0 (span mask m), +0 outside the span (0 * (0 - d) may be -0).
inline __m512 dscores16(const float* dP, const float* G, __m512 p, int64_t j0, __mmask16 m, __m512 d, __m512 sc) {
  __m512 ds = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dP + j0), d)), sc);
  if (G) ds = _mm512_mul_ps(ds, _mm512_maskz_loadu_ps(m, G + j0));
  return _mm512_maskz_mov_ps(m, ds);
}

// IsaTable::attn_dscores_bf16: as attention_tiles.inc's (the same d and dS), 16 columns a step, rounding on
// VCVTNE2PS2BF16; TWO: two rows (named registers: GCC keeps an array of them on the stack).
template <bool TWO>
void dscores_rows(float* P, const float* L, float es, const float* dP, const float* G, int64_t ld, const int64_t* lo,
                  const int64_t* hi, float scale, int64_t W, int64_t off, uint32_t* ds_rows, int64_t ldr,
                  uint32_t* ds_pairs, uint32_t* p_pairs) {
  const __m512 d0 = _mm512_set1_ps(row_sum(P, L, es, dP, lo[0], hi[0]));
  const __m512 d1 = TWO ? _mm512_set1_ps(row_sum(P + ld, L ? L + 1 : nullptr, es, dP + ld, lo[1], hi[1])) : d0;
  const __m512 sc = _mm512_set1_ps(scale);
  const __m512i zero = _mm512_setzero_si512();
  uint16_t* h0 = reinterpret_cast<uint16_t*>(ds_rows);
  uint16_t* h1 = reinterpret_cast<uint16_t*>(ds_rows + ldr);
  if (off) _mm512_mask_storeu_epi16(h0, 1, zero);
  if ((W + off) & 1) _mm512_mask_storeu_epi16(h0 + W + off, 1, zero);
  if (TWO && off) _mm512_mask_storeu_epi16(h1, 1, zero);
  if (TWO && ((W + off) & 1)) _mm512_mask_storeu_epi16(h1 + W + off, 1, zero);
  const float* G1 = G ? G + ld : nullptr;
  for (int64_t j0 = 0; j0 < W; j0 += 16) {
    const __mmask16 cols = mask_of(W - j0), m0 = span_mask(lo[0], hi[0], j0);
    const __m512 p0 = _mm512_maskz_loadu_ps(m0, P + j0);
    const __m512 ds0 = dscores16(dP, G, p0, j0, m0, d0, sc);
    store16h(h0 + off + j0, cols, (__m256i)_mm512_cvtneps_pbh(ds0));
    __m512 p1 = _mm512_setzero_ps(), ds1 = p1;
    if constexpr (TWO) {
      const __mmask16 m1 = span_mask(lo[1], hi[1], j0);
      p1 = _mm512_maskz_loadu_ps(m1, P + ld + j0);
      ds1 = dscores16(dP + ld, G1, p1, j0, m1, d1, sc);
      store16h(h1 + off + j0, cols, (__m256i)_mm512_cvtneps_pbh(ds1));
    }
    store16(ds_pairs + j0, cols, bf16_pairs16(ds0, ds1));
    store16(p_pairs + j0, cols, bf16_pairs16(p0, p1));
  }
}

void attn_dscores_cvt(float* P, const float* L, float es, const float* dP, const float* G, int64_t ld, int64_t rows,
                      const int64_t* lo, const int64_t* hi, float scale, int64_t W, int64_t off, uint32_t* ds_rows,
                      int64_t ldr, uint32_t* ds_pairs, uint32_t* p_pairs) {
  if (rows > 1)
    dscores_rows<true>(P, L, es, dP, G, ld, lo, hi, scale, W, off, ds_rows, ldr, ds_pairs, p_pairs);
  else
    dscores_rows<false>(P, L, es, dP, G, ld, lo, hi, scale, W, off, ds_rows, ldr, ds_pairs, p_pairs);
}

}  // namespace

void attn_mm_dpbf16(const uint32_t* A, int64_t ars, int64_t aps, const uint32_t* B, int64_t ldb, float* C, int64_t ldc,
                    int64_t M, int64_t N, int64_t Kp, bool accumulate, int tri, int64_t c) {
  for (int64_t n0 = 0; n0 < N; n0 += 64)
    for (int64_t m0 = 0; m0 < M; m0 += kTileRows) {
      const int64_t R = M - m0 < kTileRows ? M - m0 : kTileRows;
      int64_t p0 = 0, p1 = Kp, n1 = N;  // the triangle (isa_table.h's AttnTri) in elements, widened to whole pairs
      if (tri == kAttnTriCols) n1 = clamp(m0 + R + c, N);
      if (tri == kAttnTriKEnd) p1 = (clamp(m0 + R + c, 2 * Kp) + 1) / 2;
      if (tri == kAttnTriKStart) p0 = clamp(m0 - c, 2 * Kp) / 2;
      const int64_t n = n1 - n0 < 64 ? n1 - n0 : 64;
      if (n <= 0) continue;
      const int nv = static_cast<int>((n + 15) / 16);
      tile_for(R, nv)(A + m0 * ars, ars, aps, B + n0, ldb, C + m0 * ldc + n0, ldc, p0, p1, mask_of(n - 16 * (nv - 1)),
                      accumulate);
    }
}

void fill_attention_dpbf16(IsaTable& t) {
  t.attn_mm_bf16 = attn_mm_dpbf16;
  t.attn_bf16_pairs = attn_bf16_pairs_cvt;
  t.attn_bf16_row = attn_bf16_row_cvt;
  t.attn_dscores_bf16 = attn_dscores_cvt;
  t.attn_bf16_kernel = "vdpbf16ps";
}

}  // namespace temper::kernels
