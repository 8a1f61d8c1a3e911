#include "temper/kernels/embedding.h"

#include <cstring>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"

namespace temper::kernels {

void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C) {
  for (int64_t n = 0; n < N; ++n)
    TEMPER_CHECK(ids[n] >= 0 && ids[n] < V) << "token id " << ids[n] << " at position " << n << " outside vocab [0, " << V << ")";
  parallel_for(N, 64, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      std::memcpy(out + n * C, table + static_cast<int64_t>(ids[n]) * C, static_cast<size_t>(C) * sizeof(float));
  });
}

void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t C) {
  parallel_for(C, 16, [&](int64_t cb, int64_t ce) {
    for (int64_t n = 0; n < N; ++n) {
      float* dst = dtable + static_cast<int64_t>(ids[n]) * C;
      const float* src = dout + n * C;
      for (int64_t c = cb; c < ce; ++c) dst[c] += src[c];
    }
  });
}

}  // namespace temper::kernels
