// AMX bf16 products (gemm_amx.h). Compiled with AVX-512 and AMX flags (src/temper/CMakeLists.txt).
#include "temper/kernels/cpu/gemm_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "temper/core/cpu_features.h"

// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace temper::kernels {
namespace {

constexpr int64_t kTileElems = 512;  // one 16 x 64-byte tile of bf16

// Linux hands the 8 KiB tile state to a process only when it asks (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA); the permission covers every thread of the process.
bool request_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// 32-bit lane i = (lo[i], hi[i]) rounded to bf16 (round to nearest even; lo in the low half). The conversion
// instruction flushes denormal inputs to zero, as the tile product does with denormal bf16 operands.
inline __m512i bf16_pairs(__m512 lo, __m512 hi) {
  const __m512i words = _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(hi, lo));  // lo 0..15, hi 0..15
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, words);
}

// 32 consecutive floats rounded to bf16, in order.
inline __m512i bf16_row(__m512 a, __m512 b) {
  return _mm512_castps_si512((__m512)_mm512_cvtne2ps_pbh(b, a));
}

inline __mmask16 first_n(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}

// 16 x 16 transpose of 32-bit lanes in registers: r[i][j] -> r[j][i].
inline void transpose16(__m512i r[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // b[4g + c], lane L: column 4L + c of rows 4g .. 4g + 3.
  for (int g = 0; g < 4; ++g) {
    const __m512i* x = a + 4 * g;
    b[4 * g + 0] = _mm512_unpacklo_epi64(x[0], x[2]);
    b[4 * g + 1] = _mm512_unpackhi_epi64(x[0], x[2]);
    b[4 * g + 2] = _mm512_unpacklo_epi64(x[1], x[3]);
    b[4 * g + 3] = _mm512_unpackhi_epi64(x[1], x[3]);
  }
  for (int c = 0; c < 4; ++c) {  // a 4 x 4 transpose of 128-bit lanes per c
    const __m512i s0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), s1 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
    const __m512i s2 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee), s3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(s0, s1, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(s0, s1, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(s2, s3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(s2, s3, 0xdd);
  }
}

// out[i] (16 lanes) = pairs (k0 + 2i, k0 + 2i + 1) of the 16 columns [c0, c0 + nc) of a k-major matrix X[k * ld + c]
// (rows past K are zeros): lane j of out[i] belongs to column c0 + j.
inline void pairs_k_major(const float* X, int64_t ld, int64_t K, int64_t k0, int64_t c0, int64_t nc, __m512i out[16]) {
  const __mmask16 m = first_n(nc);
  for (int i = 0; i < 16; ++i) {
    const int64_t k = k0 + 2 * i;
    const __m512 lo = k < K ? _mm512_maskz_loadu_ps(m, X + k * ld + c0) : _mm512_setzero_ps();
    const __m512 hi = k + 1 < K ? _mm512_maskz_loadu_ps(m, X + (k + 1) * ld + c0) : _mm512_setzero_ps();
    out[i] = bf16_pairs(lo, hi);
  }
}

// out[j] = the 32 k in [k0, k0 + 32) of row c0 + j of a row-major X[c * ld + k] as bf16 (16 pairs; rows past nc and
// k past K are zeros).
inline void pairs_row_major(const float* X, int64_t ld, int64_t K, int64_t k0, int64_t c0, int64_t nc,
                            __m512i out[16]) {
  const __mmask16 m0 = first_n(K - k0), m1 = first_n(K - k0 - 16);
  for (int j = 0; j < 16; ++j) {
    if (j >= nc) {
      out[j] = _mm512_setzero_si512();
      continue;
    }
    const float* x = X + (c0 + j) * ld + k0;
    out[j] = bf16_row(_mm512_maskz_loadu_ps(m0, x), _mm512_maskz_loadu_ps(m1, x + 16));
  }
}

// The same from bf16 sources (weights already rounded once per update): the pairs are the stored halves.
inline __mmask32 first_n32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1u);
}
inline void pairs_k_major(const uint16_t* X, int64_t ld, int64_t K, int64_t k0, int64_t c0, int64_t nc,
                          __m512i out[16]) {
  const __mmask16 m = first_n(nc);
  for (int i = 0; i < 16; ++i) {
    const int64_t k = k0 + 2 * i;
    const __m256i lo = k < K ? _mm256_maskz_loadu_epi16(m, X + k * ld + c0) : _mm256_setzero_si256();
    const __m256i hi = k + 1 < K ? _mm256_maskz_loadu_epi16(m, X + (k + 1) * ld + c0) : _mm256_setzero_si256();
    out[i] = _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
  }
}
inline void pairs_row_major(const uint16_t* X, int64_t ld, int64_t K, int64_t k0, int64_t c0, int64_t nc,
                            __m512i out[16]) {
  const __mmask32 m = first_n32(K - k0);
  for (int j = 0; j < 16; ++j)
    out[j] = j < nc ? _mm512_maskz_loadu_epi16(m, X + (c0 + j) * ld + k0) : _mm512_setzero_si512();
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: 0, 1 = C of rows [0, r0) x outputs 0-15, 16-31; 2, 3 = C of rows [16, 16 + r1); 4, 5 = A of those rows;
// 6, 7 = the panel's two W tiles.
void configure(int r0, int r1) {
  TileConfig c;
  for (int t : {0, 1, 4}) c.rows[t] = static_cast<uint8_t>(r0), c.colsb[t] = 64;
  if (r1 > 0)
    for (int t : {2, 3, 5}) c.rows[t] = static_cast<uint8_t>(r1), c.colsb[t] = 64;
  for (int t : {6, 7}) c.rows[t] = 16, c.colsb[t] = 64;
  _tile_loadconfig(&c);
}

// Adds or writes rows [0, r) x the first n of 16 outputs from a stored tile.
inline void write_tile(const float* t, int r, int64_t n, float* C, int64_t ldc, bool accumulate) {
  const __mmask16 m = first_n(n);
  for (int i = 0; i < r; ++i) {
    __m512 v = _mm512_loadu_ps(t + 16 * i);
    if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, C + i * ldc), v);
    _mm512_mask_storeu_ps(C + i * ldc, m, v);
  }
}

// One block of rows [0, r0) (+ [16, 16 + r1) when Two) x one panel over the k blocks [kb0, kb1) of Kp.
// first: the accumulators start from zero, else from `partial` (4 tiles of 16 x 16 f32 the previous k range
// stored: f32 stored and loaded exactly, so splitting k changes no bit); last: the result goes to C, else
// back to `partial`.
template <bool Two>
void panel_rows(const uint16_t* A, int64_t Kp, const uint16_t* P, int64_t kb0, int64_t kb1, int r0, int r1, float* C,
                int64_t ldc, int64_t n, bool accumulate, bool first, bool last, float* partial) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (Two) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else {
    _tile_loadd(0, partial, 64);
    _tile_loadd(1, partial + 256, 64);
    if constexpr (Two) {
      _tile_loadd(2, partial + 512, 64);
      _tile_loadd(3, partial + 768, 64);
    }
  }
  const int64_t stride = Kp * 2;
  for (int64_t kb = kb0; kb < kb1; ++kb) {
    _tile_loadd(6, P + kb * 2 * kTileElems, 64);
    _tile_loadd(7, P + kb * 2 * kTileElems + kTileElems, 64);
    _tile_loadd(4, A + kb * 32, stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (Two) {
      _tile_loadd(5, A + 16 * Kp + kb * 32, stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (!last || accumulate || n < 32) {
    _tile_stored(0, partial, 64);
    _tile_stored(1, partial + 256, 64);
    if constexpr (Two) {
      _tile_stored(2, partial + 512, 64);
      _tile_stored(3, partial + 768, 64);
    }
    if (!last) return;
    write_tile(partial, r0, n, C, ldc, accumulate);
    if (n > 16) write_tile(partial + 256, r0, n - 16, C + 16, ldc, accumulate);
    if constexpr (Two) {
      write_tile(partial + 512, r1, n, C + 16 * ldc, ldc, accumulate);
      if (n > 16) write_tile(partial + 768, r1, n - 16, C + 16 * ldc + 16, ldc, accumulate);
    }
    return;
  }
  _tile_stored(0, C, ldc * 4);  // whole tiles straight into C
  _tile_stored(1, C + 16, ldc * 4);
  if constexpr (Two) {
    _tile_stored(2, C + 16 * ldc, ldc * 4);
    _tile_stored(3, C + 16 * ldc + 16, ldc * 4);
  }
}

// Blocking: k in ranges of kKRange (a long K, the classifier's vocabulary, would not keep a block of rows in any
// cache); a chunk of rows of A (x one k range) stays in L2 while groups of panels pass; within a group, each
// block of 32 rows meets every panel of the group. Partial sums between k ranges: 4 KiB per block and panel.
constexpr int64_t kKRange = 1024;            // k per range
constexpr int64_t kRowChunk = 256;           // rows of A per chunk
constexpr int64_t kGroupBytes = 256 * 1024;  // bytes of packed panels (one k range) per group

}  // namespace

bool amx_usable() {
  static const bool ok = [] {
    const CpuFeatures& f = cpu_features();
    return f.amx_bf16 && f.avx512_bf16 && cpu_isa_supported(Isa::avx512) && request_tile_data();
  }();
  return ok;
}

int64_t amx_k_padded(int64_t K) {
  return (K + 31) / 32 * 32;
}
int64_t amx_packed_elems(int64_t N, int64_t K) {
  return (N + 31) / 32 * 32 * amx_k_padded(K);
}

namespace {
template <class T>
void pack_panels(const T* B, int64_t ldb, bool nk, int64_t N, int64_t K, int64_t p0, int64_t p1, uint16_t* out) {
  const int64_t Kp = amx_k_padded(K);
  __m512i r[16];
  // k outside, panels inside: a k-major B is read 32 rows at a time along the panels' columns.
  for (int64_t kb = 0; kb < Kp / 32; ++kb)
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t t = 0; t < 2; ++t) {
        const int64_t n0 = 32 * p + 16 * t;
        uint16_t* o = out + p * 32 * Kp + (2 * kb + t) * kTileElems;
        if (nk) {  // W'(n, k) = B[n * ldb + k]: row j of r = output n0 + j's 16 pairs; the tile wants them transposed
          pairs_row_major(B, ldb, K, 32 * kb, n0, N - n0, r);
          transpose16(r);
        } else {  // W'(n, k) = B[k * ldb + n]: tile row i = pair i of the 16 outputs
          pairs_k_major(B, ldb, K, 32 * kb, n0, N - n0, r);
        }
        for (int i = 0; i < 16; ++i) _mm512_storeu_si512(o + 32 * i, r[i]);
      }
}
}  // namespace

void amx_pack_panels(const float* B, int64_t ldb, bool nk, int64_t N, int64_t K, int64_t p0, int64_t p1,
                     uint16_t* out) {
  pack_panels(B, ldb, nk, N, K, p0, p1, out);
}

void amx_pack_panels(const uint16_t* B, int64_t ldb, bool nk, int64_t N, int64_t K, int64_t p0, int64_t p1,
                     uint16_t* out) {
  pack_panels(B, ldb, nk, N, K, p0, p1, out);
}

void amx_pack_rows(const float* A, int64_t lda, bool mk, int64_t K, int64_t m0, int64_t m1, uint16_t* out) {
  const int64_t Kp = amx_k_padded(K);
  __m512i r[16];
  if (mk) {
    for (int64_t m = m0; m < m1; m += 16)
      for (int64_t kb = 0; kb < Kp / 32; ++kb) {
        const int64_t rows = m1 - m < 16 ? m1 - m : 16;
        pairs_row_major(A, lda, K, 32 * kb, m, rows, r);
        for (int64_t j = 0; j < rows; ++j) _mm512_storeu_si512(out + (m + j) * Kp + 32 * kb, r[j]);
      }
    return;
  }
  // A'(m, k) = A[k * lda + m]: 16 rows x 32 k through a transpose. k outside: each pass reads 32 rows of A along
  // [m0, m1) (m outside walked every row of A for each 64 bytes of it: a TLB miss per load on long rows).
  for (int64_t kb = 0; kb < Kp / 32; ++kb)
    for (int64_t m = m0; m < m1; m += 16) {
      const int64_t rows = m1 - m < 16 ? m1 - m : 16;
      pairs_k_major(A, lda, K, 32 * kb, m, rows, r);
      transpose16(r);
      for (int64_t j = 0; j < rows; ++j) _mm512_storeu_si512(out + (m + j) * Kp + 32 * kb, r[j]);
    }
}

void amx_gemm_block(const uint16_t* A16, int64_t Kp, const uint16_t* Wp, int64_t N, float* C, int64_t ldc, int64_t m0,
                    int64_t m1, int64_t p0, int64_t p1, bool accumulate) {
  const int64_t kbs = Kp / 32, range = kKRange / 32;
  const int64_t group = std::max<int64_t>(1, kGroupBytes / (64 * std::min(Kp, kKRange)));
  const bool split = kbs > range;
  thread_local std::vector<float> partials;  // per block of rows and panel of a chunk x group
  if (split && static_cast<int64_t>(partials.size()) < (kRowChunk / 32) * group * 1024)
    partials.resize(static_cast<size_t>((kRowChunk / 32) * group * 1024));
  alignas(64) float own[1024];  // one block's tiles when k is not split (partial results of the edges)
  int cur0 = -1, cur1 = -1;
  for (int64_t mc = m0; mc < m1; mc += kRowChunk) {
    const int64_t me = std::min(m1, mc + kRowChunk);
    for (int64_t pg = p0; pg < p1; pg += group) {
      const int64_t pe = std::min(p1, pg + group);
      for (int64_t kb0 = 0; kb0 < kbs; kb0 += range) {
        const int64_t kb1 = std::min(kbs, kb0 + range);
        for (int64_t m = mc; m < me; m += 32) {
          const int64_t rows = std::min<int64_t>(me - m, 32);
          const int r0 = static_cast<int>(std::min<int64_t>(rows, 16)), r1 = static_cast<int>(rows - r0);
          if (r0 != cur0 || r1 != cur1) configure(cur0 = r0, cur1 = r1);
          for (int64_t p = pg; p < pe; ++p) {
            const int64_t n = std::min<int64_t>(N - 32 * p, 32);
            float* part = split ? partials.data() + (((m - mc) / 32) * group + (p - pg)) * 1024 : own;
            const uint16_t* P = Wp + p * 32 * Kp;
            float* c = C + m * ldc + 32 * p;
            if (r1 > 0)
              panel_rows<true>(A16 + m * Kp, Kp, P, kb0, kb1, r0, r1, c, ldc, n, accumulate, kb0 == 0, kb1 == kbs,
                               part);
            else
              panel_rows<false>(A16 + m * Kp, Kp, P, kb0, kb1, r0, r1, c, ldc, n, accumulate, kb0 == 0, kb1 == kbs,
                                part);
          }
        }
      }
    }
  }
  if (cur0 >= 0) _tile_release();
}

}  // namespace temper::kernels
