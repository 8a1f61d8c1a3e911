#include "temper/kernels/nf4.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/int4_matmul.h"

namespace temper::kernels {

namespace {

// The midpoints between neighbouring levels, taken in double and rounded to f32 (bitsandbytes' dQuantizeNF4 has
// them as f32 literals: 0.03979014977812767f, ...).
constexpr std::array<float, 15> kMidpoints = [] {
  std::array<float, 15> m{};
  for (size_t i = 0; i < m.size(); ++i)
    m[i] = static_cast<float>((static_cast<double>(kNf4Levels[i]) + static_cast<double>(kNf4Levels[i + 1])) / 2);
  return m;
}();

// One block of a row: its absmax (NaN when a value is not finite) and the codes of x[k0, k1) into v.
float quantize_block(const float* x, int64_t k0, int64_t k1, uint8_t* v) {
  float amax = 0.f;
  bool finite = true;
  for (int64_t k = k0; k < k1; ++k) {
    amax = std::max(amax, std::fabs(x[k]));
    finite = finite && std::isfinite(x[k]);
  }
  if (!finite) return NAN;
  if (amax == 0.f) {
    std::fill(v + k0, v + k1, kNf4Zero);
    return 0.f;
  }
  const float inv = 1.f / amax;  // as bitsandbytes: x times the reciprocal, in f32
  for (int64_t k = k0; k < k1; ++k) v[k] = nf4_code(x[k] * inv);
  return amax;
}

}  // namespace

int64_t nf4_block_for(int64_t K) {
  return int4_group_for(K, kNf4Block);
}

uint8_t nf4_code(float normed) {
  int c = 0;
  for (float m : kMidpoints) c += normed > m ? 1 : 0;
  return static_cast<uint8_t>(c);
}

void quantize_nf4(const float* W, int64_t N, int64_t K, int64_t ldw, Nf4Weights* out) {
  TEMPER_CHECK(N > 0 && K > 0) << "nf4: empty matrix [" << N << ", " << K << "]";
  Nf4Weights& w = *out;
  w.N = N, w.K = K;
  w.Kp = (K + kInt4Chunk - 1) / kInt4Chunk * kInt4Chunk;
  w.block = nf4_block_for(K);
  const int64_t G = w.Kp / w.block;
  w.q.assign(static_cast<size_t>(N * w.Kp / 2), 0);
  w.absmax.assign(static_cast<size_t>(N * G), 0.f);
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    std::vector<uint8_t> v(static_cast<size_t>(w.Kp), kNf4Zero);  // one row's codes; the padding stays 7 (zero)
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = W + n * ldw;
      for (int64_t g = 0; g < G; ++g) {
        const float a = quantize_block(row, g * w.block, std::min((g + 1) * w.block, K), v.data());
        TEMPER_CHECK(std::isfinite(a)) << "nf4: non-finite weight in row " << n;
        w.absmax[static_cast<size_t>(n * G + g)] = a;
      }
      uint8_t* qr = w.q.data() + n * w.Kp / 2;
      for (int64_t c = 0; c < w.Kp / kInt4Chunk; ++c)  // byte j: inputs 32 c + j (low) and 32 c + 16 + j (high)
        for (int64_t j = 0; j < 16; ++j)
          qr[c * 16 + j] =
              static_cast<uint8_t>(v[static_cast<size_t>(32 * c + j)] | (v[static_cast<size_t>(32 * c + 16 + j)] << 4));
    }
  });
}

uint8_t nf4_code_at(const Nf4Weights& w, int64_t n, int64_t k) {
  const uint8_t b = w.q[static_cast<size_t>(n * w.Kp / 2 + k / kInt4Chunk * 16 + (k % kInt4Chunk & 15))];
  return k % kInt4Chunk < 16 ? (b & 15) : (b >> 4);
}

void dequantize_nf4(const Nf4Weights& w, float* W) {
  const int64_t G = w.Kp / w.block;
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t k = 0; k < w.K; ++k)
      W[n * w.K + k] = kNf4Levels[nf4_code_at(w, n, k)] * w.absmax[static_cast<size_t>(n * G + k / w.block)];
}

}  // namespace temper::kernels
