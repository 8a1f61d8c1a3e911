#include "temper/kernels/int4_matmul.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {

struct ActScratch {  // X quantized to int8 per weight group
  std::vector<int8_t> qa;
  std::vector<float> sa, zs;
  std::mutex mu;
};

}  // namespace

int64_t int4_group_for(int64_t K, int64_t preferred) {
  TEMPER_CHECK(preferred >= kInt4Chunk && preferred % kInt4Chunk == 0)
      << "int4: group size must be a positive multiple of 32, got " << preferred;
  const int64_t Kp = (K + kInt4Chunk - 1) / kInt4Chunk * kInt4Chunk;
  for (int64_t g : {preferred, int64_t{64}, int64_t{32}})
    if (g <= preferred && Kp % g == 0) return g;
  return kInt4Chunk;
}

void quantize_int4(const float* W, int64_t N, int64_t K, int64_t ldw, int64_t group, Int4Weights* out) {
  TEMPER_CHECK(N > 0 && K > 0) << "int4: empty matrix [" << N << ", " << K << "]";
  Int4Weights& w = *out;
  w.N = N;
  w.K = K;
  w.Kp = (K + kInt4Chunk - 1) / kInt4Chunk * kInt4Chunk;
  w.group = int4_group_for(K, group);
  const int64_t G = w.Kp / w.group;
  w.q.assign(static_cast<size_t>(N * w.Kp / 2), 0);
  w.scale.assign(static_cast<size_t>(N * G), 0.f);
  w.zero.assign(static_cast<size_t>(N * G), 0);
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const float* row = W + n * ldw;
      uint8_t* qr = w.q.data() + n * w.Kp / 2;
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
        w.scale[static_cast<size_t>(n * G + g)] = s;
        w.zero[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(z);
        const float inv = 1.f / s;
        for (int64_t k = k0; k < k0 + w.group; ++k) {
          int q = z;
          if (k < K) q = std::clamp(static_cast<int>(std::nearbyint(row[k] * inv)) + z, 0, 15);
          const int64_t c = k / kInt4Chunk, j = k % kInt4Chunk;
          uint8_t& b = qr[c * 16 + (j & 15)];
          b = static_cast<uint8_t>(j < 16 ? (b & 0xF0) | q : (b & 0x0F) | (q << 4));
        }
      }
    }
  });
}

void dequantize_int4(const Int4Weights& w, float* W) {
  const int64_t G = w.Kp / w.group;
  for (int64_t n = 0; n < w.N; ++n) {
    const uint8_t* qr = w.q.data() + n * w.Kp / 2;
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t c = k / kInt4Chunk, j = k % kInt4Chunk, g = k / w.group;
      const uint8_t b = qr[c * 16 + (j & 15)];
      const int q = j < 16 ? (b & 15) : (b >> 4);
      W[n * w.K + k] = w.scale[static_cast<size_t>(n * G + g)] * static_cast<float>(q - w.zero[static_cast<size_t>(n * G + g)]);
    }
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
      for (int64_t k = k0; k < k0 + W.group; ++k) {
        qm[k] = k < k1 ? static_cast<int8_t>(std::nearbyint(x[k] * inv)) : 0;
        sum += qm[k];
      }
      s.sa[static_cast<size_t>(m * G + g)] = amax / 127.f;
      s.zs[static_cast<size_t>(m * G + g)] = amax / 127.f * static_cast<float>(sum);
    }
  }
  const IsaTable& t = isa_table();
  parallel_for(W.N, 32, [&](int64_t n0, int64_t n1) {
    t.int4_gemm_rows(s.qa.data(), s.sa.data(), s.zs.data(), M, Kp, W.q.data(), W.scale.data(), W.zero.data(), W.group,
                     n0, n1, Y, ldy, accumulate);
  });
}

}  // namespace temper::kernels
