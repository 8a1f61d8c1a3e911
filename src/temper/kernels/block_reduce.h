// Deterministic column sums over rows (weight/bias gradients of norms and biases): rows are cut into
// fixed blocks, each block accumulates into its own partial row (fn(begin, end, partial), in
// parallel), and the partials are added in block order — the same bits for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "temper/core/thread_pool.h"

namespace temper::kernels {

template <class F>
void block_reduce_rows(int64_t N, int64_t block, int64_t width, float* out, const F& fn) {
  const int64_t blocks = (N + block - 1) / block;
  static thread_local std::vector<float> partial;  // the caller's thread; workers get the pointer
  partial.assign(static_cast<size_t>(blocks * width), 0.f);
  float* part = partial.data();
  parallel_tasks(blocks, [&](int64_t blk) {
    int64_t b = blk * block, e = b + block < N ? b + block : N;
    fn(b, e, part + blk * width);
  });
  if (!out) return;  // the sums not wanted (a frozen weight's gradient)
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t c = 0; c < width; ++c) out[c] += part[blk * width + c];
}

}  // namespace temper::kernels
