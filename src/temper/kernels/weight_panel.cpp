#include "temper/kernels/weight_panel.h"

#include <algorithm>
#include <cstring>

#include "temper/core/dtype.h"
#include "temper/core/error.h"
#include "temper/core/thread_pool.h"

namespace temper::kernels {

void int4_rows_to_f32(const Int4Weights& w, int64_t r0, int64_t r1, float* out) {
  TEMPER_CHECK(w.layout == Int4Layout::rows) << "int4_rows_to_f32: weights in the cols16 layout (rows expected)";
  TEMPER_CHECK(r0 >= 0 && r0 <= r1 && r1 <= w.N) << "int4_rows_to_f32: rows [" << r0 << ", " << r1 << ") of " << w.N;
  const int64_t K = w.K, Kp = w.Kp, G = Kp / w.group, chunks_per_group = w.group / kInt4Chunk;
  parallel_for(r1 - r0, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, w.K)), [&](int64_t b, int64_t e) {
    float lo[16], hi[16];
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = r0 + i;
      const uint8_t* q = w.q.data() + n * Kp / 2;
      float* o = out + i * K;
      for (int64_t c = 0; c < Kp / kInt4Chunk; ++c) {  // byte j: input 32 c + j (low nibble), 32 c + 16 + j (high)
        const int64_t g = c / chunks_per_group;
        const float s = w.scale[static_cast<size_t>(n * G + g)];
        const int z = w.zero[static_cast<size_t>(n * G + g)];
        const uint8_t* qc = q + c * 16;
        for (int j = 0; j < 16; ++j) {
          lo[j] = s * static_cast<float>((qc[j] & 15) - z);
          hi[j] = s * static_cast<float>((qc[j] >> 4) - z);
        }
        const int64_t k0 = c * kInt4Chunk;
        if (k0 + kInt4Chunk <= K) {
          for (int j = 0; j < 16; ++j) o[k0 + j] = lo[j];
          for (int j = 0; j < 16; ++j) o[k0 + 16 + j] = hi[j];
        } else {  // the padded tail of the last chunk is dropped
          for (int j = 0; j < 16 && k0 + j < K; ++j) o[k0 + j] = lo[j];
          for (int j = 0; j < 16 && k0 + 16 + j < K; ++j) o[k0 + 16 + j] = hi[j];
        }
      }
    }
  });
}

void nf4_rows_to_f32(const Nf4Weights& w, int64_t r0, int64_t r1, float* out) {
  TEMPER_CHECK(r0 >= 0 && r0 <= r1 && r1 <= w.N) << "nf4_rows_to_f32: rows [" << r0 << ", " << r1 << ") of " << w.N;
  const int64_t G = w.Kp / w.block;
  parallel_for(r1 - r0, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, w.K)), [&](int64_t b, int64_t e) {
    for (int64_t n = r0 + b; n < r0 + e; ++n)
      nf4_row_to(w.q.data() + n * w.Kp / 2, w.absmax.data() + n * G, w.K, w.Kp, w.block, out + (n - r0) * w.K,
                 [](float x) { return x; });
  });
}

void bf16_rows_to_f32(const uint16_t* w, int64_t K, int64_t r0, int64_t r1, float* out) {
  TEMPER_CHECK(r0 >= 0 && r0 <= r1) << "bf16_rows_to_f32: rows [" << r0 << ", " << r1 << ")";
  parallel_for((r1 - r0) * K, 1 << 14, [&](int64_t b, int64_t e) {
    const uint16_t* src = w + r0 * K;
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {  // fixed-length blocks: the compiler widens 16 at once
      uint32_t u[16];
      for (int j = 0; j < 16; ++j) u[j] = static_cast<uint32_t>(src[i + j]) << 16;
      std::memcpy(out + i, u, sizeof u);
    }
    for (; i < e; ++i) out[i] = bf16_to_f32(src[i]);
  });
}

}  // namespace temper::kernels
