#include "temper/kernels/rmsnorm.h"

#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {
constexpr int64_t kRowBlock = 32;  // dw partials per fixed row block: same sums for any thread count
}

void rmsnorm_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t C, float eps) {
  const IsaTable& t = isa_table();
  parallel_for(N, 16, [&](int64_t b, int64_t e) { t.rmsnorm_fwd(x + b * C, w, y + b * C, rstd + b, e - b, C, eps); });
}

void rmsnorm_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw, int64_t N,
                 int64_t C, bool accumulate_dx) {
  const IsaTable& t = isa_table();
  int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
  static thread_local std::vector<float> partial;
  partial.assign(static_cast<size_t>(blocks * C), 0.f);
  float* part = partial.data();
  parallel_tasks(blocks, [&](int64_t blk) {
    int64_t b = blk * kRowBlock, e = b + kRowBlock < N ? b + kRowBlock : N;
    t.rmsnorm_bwd(dy + b * C, x + b * C, w, rstd + b, dx + b * C, part + blk * C, e - b, C, accumulate_dx);
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t c = 0; c < C; ++c) dw[c] += part[blk * C + c];
}

void rmsnorm_heads_fwd(const float* x, const float* w, float* y, float* rstd, int64_t N, int64_t H, int64_t D,
                       int64_t stride, float eps) {
  const IsaTable& t = isa_table();
  parallel_for(N, 8, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) t.rmsnorm_fwd(x + n * stride, w, y + n * stride, rstd + n * H, H, D, eps);
  });
}

void rmsnorm_heads_bwd(const float* dy, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t N, int64_t H, int64_t D, int64_t stride) {
  const IsaTable& t = isa_table();
  int64_t blocks = (N + kRowBlock - 1) / kRowBlock;
  static thread_local std::vector<float> partial;
  partial.assign(static_cast<size_t>(blocks * D), 0.f);
  float* part = partial.data();
  parallel_tasks(blocks, [&](int64_t blk) {
    int64_t b = blk * kRowBlock, e = b + kRowBlock < N ? b + kRowBlock : N;
    for (int64_t n = b; n < e; ++n)
      t.rmsnorm_bwd(dy + n * stride, x + n * stride, w, rstd + n * H, dx + n * stride, part + blk * D, H, D, false);
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t c = 0; c < D; ++c) dw[c] += part[blk * D + c];
}

}  // namespace temper::kernels
