#include "temper/kernels/int4_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_* (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace temper::kernels {

namespace {

struct ActScratch {  // X quantized to int8 per weight group
  std::vector<int8_t> qa;
  std::vector<float> sa, zs;
  std::mutex mu;
};

constexpr int64_t kCols = 16;  // cols16: outputs per block

// nearbyint(x) for |x| < 2^22 (round to nearest, ties to even) without a libm call: vectorisable.
inline float round_even(float x) {
  return (x + 12582912.f) - 12582912.f;
}

// The rows layout's value of row n, input k.
int nibble_rows(const Int4Weights& w, int64_t n, int64_t k) {
  const uint8_t b = w.q[static_cast<size_t>(n * w.Kp / 2 + k / kInt4Chunk * 16 + (k % kInt4Chunk & 15))];
  return k % kInt4Chunk < 16 ? (b & 15) : (b >> 4);
}

// cols16: rows [0, R) of the int8 activations against one block of 16 outputs; Y's columns [0, ncols).
// Per octet one 64-byte load gives two vectors of 16 outputs x 4 inputs; each row's 4 activation bytes are
// broadcast; separate integer accumulators for the two halves keep 2R dependency chains in flight.
template <int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void cols16_tile(const int8_t* qa, const float* sa,
                                                                        const float* zs, int64_t Kp, int64_t G,
                                                                        int64_t group, const uint8_t* qb,
                                                                        const float* sb, const uint8_t* zb, float* Y,
                                                                        int64_t ldy, int64_t ncols, bool accumulate) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 f[R];
  for (int r = 0; r < R; ++r) f[r] = _mm512_setzero_ps();
  const int64_t per = group / 8;
  for (int64_t g = 0; g < G; ++g) {
    __m512i lo[R], hi[R];
    for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_si512();
    for (int64_t o = g * per; o < (g + 1) * per; ++o) {
      const __m512i v = _mm512_loadu_si512(qb + o * 64);
      const __m512i wl = _mm512_and_si512(v, m4), wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      for (int r = 0; r < R; ++r) {
        int32_t a0, a1;
        std::memcpy(&a0, qa + r * Kp + o * 8, 4);
        std::memcpy(&a1, qa + r * Kp + o * 8 + 4, 4);
        lo[r] = _mm512_dpbusd_epi32(lo[r], wl, _mm512_set1_epi32(a0));
        hi[r] = _mm512_dpbusd_epi32(hi[r], wh, _mm512_set1_epi32(a1));
      }
    }
    const __m512 sv = _mm512_loadu_ps(sb + g * kCols);
    const __m512 szv = _mm512_mul_ps(
        sv,
        _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zb + g * kCols)))));
    for (int r = 0; r < R; ++r) {
      const __m512 d = _mm512_cvtepi32_ps(_mm512_add_epi32(lo[r], hi[r]));
      f[r] = _mm512_fmadd_ps(d, _mm512_mul_ps(sv, _mm512_set1_ps(sa[r * G + g])), f[r]);
      f[r] = _mm512_fnmadd_ps(szv, _mm512_set1_ps(zs[r * G + g]), f[r]);
    }
  }
  const __mmask16 k = ncols >= kCols ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << ncols) - 1u);
  for (int r = 0; r < R; ++r) {
    float* y = Y + r * ldy;
    const __m512 out = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, y), f[r]) : f[r];
    _mm512_mask_storeu_ps(y, k, out);
  }
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void cols16_rows(const int8_t* qa, const float* sa,
                                                                        const float* zs, int64_t M, int64_t Kp,
                                                                        const Int4Weights& W, int64_t b0, int64_t b1,
                                                                        float* Y, int64_t ldy, bool accumulate) {
  const int64_t G = Kp / W.group, octets = Kp / 8;
  for (int64_t blk = b0; blk < b1; ++blk) {
    const uint8_t* qb = W.q.data() + blk * octets * 64;
    const float* sb = W.scale.data() + blk * G * kCols;
    const uint8_t* zb = W.zero.data() + blk * G * kCols;
    const int64_t ncols = W.N - blk * kCols < kCols ? W.N - blk * kCols : kCols;  // no std templates in target code
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const int64_t R = M - m0 < 4 ? M - m0 : 4;
      const int8_t* a = qa + m0 * Kp;
      const float *s = sa + m0 * G, *z = zs + m0 * G;
      float* y = Y + m0 * ldy + blk * kCols;
      if (R == 4)
        cols16_tile<4>(a, s, z, Kp, G, W.group, qb, sb, zb, y, ldy, ncols, accumulate);
      else if (R == 3)
        cols16_tile<3>(a, s, z, Kp, G, W.group, qb, sb, zb, y, ldy, ncols, accumulate);
      else if (R == 2)
        cols16_tile<2>(a, s, z, Kp, G, W.group, qb, sb, zb, y, ldy, ncols, accumulate);
      else
        cols16_tile<1>(a, s, z, Kp, G, W.group, qb, sb, zb, y, ldy, ncols, accumulate);
    }
  }
}

}  // namespace

bool int4_cols16_supported() {
  static const bool ok =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  return ok;
}

Int4Layout int4_preferred_layout() {
  static const Int4Layout l = [] {
    const char* e = std::getenv("TEMPER_INT4_LAYOUT");
    if (e && !std::strcmp(e, "rows")) return Int4Layout::rows;
    TEMPER_CHECK(!e || !std::strcmp(e, "cols16")) << "TEMPER_INT4_LAYOUT='" << e << "' is not one of rows, cols16";
    return int4_cols16_supported() ? Int4Layout::cols16 : Int4Layout::rows;
  }();
  return l;
}

int64_t int4_group_for(int64_t K, int64_t preferred) {
  TEMPER_CHECK(preferred >= kInt4Chunk && preferred % kInt4Chunk == 0)
      << "int4: group size must be a positive multiple of 32, got " << preferred;
  const int64_t Kp = (K + kInt4Chunk - 1) / kInt4Chunk * kInt4Chunk;
  for (int64_t g : {preferred, int64_t{64}, int64_t{32}})
    if (g <= preferred && Kp % g == 0) return g;
  return kInt4Chunk;
}

void quantize_int4(const float* W, int64_t N, int64_t K, int64_t ldw, int64_t group, Int4Weights* out,
                   Int4Layout layout) {
  TEMPER_CHECK(N > 0 && K > 0) << "int4: empty matrix [" << N << ", " << K << "]";
  TEMPER_CHECK(layout == Int4Layout::rows || int4_cols16_supported())
      << "int4: the cols16 layout needs AVX-512 VNNI, which this CPU lacks";
  Int4Weights& w = *out;
  const bool c16 = layout == Int4Layout::cols16;
  w.layout = layout;
  w.N = N;
  w.K = K;
  w.Kp = (K + kInt4Chunk - 1) / kInt4Chunk * kInt4Chunk;
  w.group = int4_group_for(K, group);
  const int64_t G = w.Kp / w.group, octets = w.Kp / 8, Nr = c16 ? (N + kCols - 1) / kCols * kCols : N;
  w.q.assign(static_cast<size_t>(Nr * w.Kp / 2), 0);  // cols16: padding rows stay zero with scale 0
  w.scale.assign(static_cast<size_t>(Nr * G), 0.f);
  w.zero.assign(static_cast<size_t>(Nr * G), 0);
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    std::vector<uint8_t> v(static_cast<size_t>(w.Kp));  // one row's values 0..15
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = W + n * ldw;
      const int64_t blk = n / kCols, lane = n % kCols;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t k0 = g * w.group, k1 = std::min(k0 + w.group, K);
        float mn = 0.f, mx = 0.f;  // the range always holds 0 (padding and exact zeros stay exact)
        for (int64_t k = k0; k < k1; ++k) {
          mn = std::min(mn, row[k]);
          mx = std::max(mx, row[k]);
        }
        float s = (mx - mn) / 15.f;
        int z = 0;
        if (s > 0.f && std::isfinite(s)) {
          z = std::clamp(static_cast<int>(std::nearbyint(-mn / s)), 0, 15);
        } else {
          TEMPER_CHECK(std::isfinite(s)) << "int4: non-finite weight in row " << n;
          s = 1.f;
        }
        const size_t at = static_cast<size_t>(c16 ? (blk * G + g) * kCols + lane : n * G + g);
        w.scale[at] = s;
        w.zero[at] = static_cast<uint8_t>(z);
        const float inv = 1.f / s;
        for (int64_t k = k0; k < k1; ++k) {
          const int q = static_cast<int>(round_even(row[k] * inv)) + z;  // |row * inv| <= 15
          v[static_cast<size_t>(k)] = static_cast<uint8_t>(q < 0 ? 0 : (q > 15 ? 15 : q));
        }
        for (int64_t k = k1; k < k0 + w.group; ++k) v[static_cast<size_t>(k)] = static_cast<uint8_t>(z);
      }
      if (c16) {  // octet o: byte 4 lane + b = inputs 8 o + b (low) and 8 o + 4 + b (high)
        uint8_t* qb = w.q.data() + blk * octets * 64 + lane * 4;
        for (int64_t o = 0; o < octets; ++o)
          for (int64_t b = 0; b < 4; ++b)
            qb[o * 64 + b] =
                static_cast<uint8_t>(v[static_cast<size_t>(8 * o + b)] | (v[static_cast<size_t>(8 * o + 4 + b)] << 4));
      } else {  // chunk c: byte j = inputs 32 c + j (low) and 32 c + 16 + j (high)
        uint8_t* qr = w.q.data() + n * w.Kp / 2;
        for (int64_t c = 0; c < w.Kp / kInt4Chunk; ++c)
          for (int64_t j = 0; j < 16; ++j)
            qr[c * 16 + j] = static_cast<uint8_t>(v[static_cast<size_t>(32 * c + j)] |
                                                  (v[static_cast<size_t>(32 * c + 16 + j)] << 4));
      }
    }
  });
}

void dequantize_int4(const Int4Weights& w, float* W) {
  const int64_t G = w.Kp / w.group, octets = w.Kp / 8;
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t g = k / w.group;
      int q;
      size_t sz;  // index of (n, g) in scale / zero
      if (w.layout == Int4Layout::rows) {
        q = nibble_rows(w, n, k);
        sz = static_cast<size_t>(n * G + g);
      } else {
        const int64_t blk = n / kCols, lane = n % kCols, b = k % 8;
        const uint8_t byte = w.q[static_cast<size_t>((blk * octets + k / 8) * 64 + lane * 4 + (b & 3))];
        q = b < 4 ? (byte & 15) : (byte >> 4);
        sz = static_cast<size_t>((blk * G + g) * kCols + lane);
      }
      W[n * w.K + k] = w.scale[sz] * static_cast<float>(q - w.zero[sz]);
    }
}

void int4_gemm(int64_t M, const float* X, int64_t ldx, const Int4Weights& W, bool accumulate, float* Y, int64_t ldy) {
  TEMPER_CHECK(M > 0 && W.N > 0) << "int4_gemm: empty product";
  const int64_t Kp = W.Kp, G = Kp / W.group;
  static ActScratch s;
  std::lock_guard<std::mutex> lock(s.mu);
  s.qa.resize(static_cast<size_t>(M * Kp));
  s.sa.resize(static_cast<size_t>(M * G));
  s.zs.resize(static_cast<size_t>(M * G));
  for (int64_t m = 0; m < M; ++m) {  // a ~= sa * qa per weight group; zs = sa * sum(qa) over the group
    const float* x = X + m * ldx;
    int8_t* qm = s.qa.data() + m * Kp;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t k0 = g * W.group, k1 = std::min(k0 + W.group, W.K);
      float amax = 0.f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
      TEMPER_CHECK(std::isfinite(amax)) << "int4_gemm: non-finite activation in row " << m;
      const float inv = amax > 0.f ? 127.f / amax : 0.f;
      int32_t sum = 0;
      for (int64_t k = k0; k < k1; ++k) {
        qm[k] = static_cast<int8_t>(round_even(x[k] * inv));  // |x * inv| <= 127
        sum += qm[k];
      }
      for (int64_t k = k1; k < k0 + W.group; ++k) qm[k] = 0;
      s.sa[static_cast<size_t>(m * G + g)] = amax / 127.f;
      s.zs[static_cast<size_t>(m * G + g)] = amax / 127.f * static_cast<float>(sum);
    }
  }
  if (W.layout == Int4Layout::cols16) {
    TEMPER_CHECK(int4_cols16_supported()) << "int4_gemm: cols16 weights on a CPU without AVX-512 VNNI";
    parallel_for((W.N + kCols - 1) / kCols, 2, [&](int64_t b0, int64_t b1) {
      cols16_rows(s.qa.data(), s.sa.data(), s.zs.data(), M, Kp, W, b0, b1, Y, ldy, accumulate);
    });
    return;
  }
  const IsaTable& t = isa_table();
  parallel_for(W.N, 32, [&](int64_t n0, int64_t n1) {
    t.int4_gemm_rows(s.qa.data(), s.sa.data(), s.zs.data(), M, Kp, W.q.data(), W.scale.data(), W.zero.data(), W.group,
                     n0, n1, Y, ldy, accumulate);
  });
}

}  // namespace temper::kernels
