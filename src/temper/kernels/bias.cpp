#include "temper/kernels/bias.h"

#include <cstddef>
#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/kernels/block_reduce.h"

namespace temper::kernels {

void bias_add(float* y, const float* b, int64_t N, int64_t M) {
  parallel_for(N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; ++n)
      for (int64_t m = 0; m < M; ++m) y[n * M + m] += b[m];
  });
}

void bias_grad(const float* dy, float* db, int64_t N, int64_t M) {
  block_reduce_rows(N, 64, M, db, [&](int64_t b, int64_t e, float* p) {
    for (int64_t n = b; n < e; ++n)
      for (int64_t m = 0; m < M; ++m) p[m] += dy[n * M + m];
  });
}

}  // namespace temper::kernels
