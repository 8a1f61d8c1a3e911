#include "temper/kernels/bias.h"

#include <cstddef>
#include <vector>

#include "temper/core/thread_pool.h"

namespace temper::kernels {

void bias_add(float* y, const float* b, int64_t N, int64_t M) {
  parallel_for(N, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; ++n)
      for (int64_t m = 0; m < M; ++m) y[n * M + m] += b[m];
  });
}

void bias_grad(const float* dy, float* db, int64_t N, int64_t M) {
  constexpr int64_t kRowBlock = 64;
  int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
  std::vector<float> part(static_cast<size_t>(blocks * M), 0.f);
  parallel_tasks(blocks, [&](int64_t blk) {
    float* p = part.data() + blk * M;
    for (int64_t n = blk * kRowBlock; n < N && n < (blk + 1) * kRowBlock; ++n)
      for (int64_t m = 0; m < M; ++m) p[m] += dy[n * M + m];
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t m = 0; m < M; ++m) db[m] += part[static_cast<size_t>(blk * M + m)];
}

}  // namespace temper::kernels
