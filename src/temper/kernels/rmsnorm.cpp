#include "temper/kernels/rmsnorm.h"

#include <vector>

#include "temper/core/thread_pool.h"
#include "temper/kernels/block_reduce.h"
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
  block_reduce_rows(N, kRowBlock, C, dw, [&](int64_t b, int64_t e, float* part) {
    t.rmsnorm_bwd(dy + b * C, x + b * C, w, rstd + b, dx + b * C, part, e - b, C, accumulate_dx);
  });
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
  block_reduce_rows(N, kRowBlock, D, dw, [&](int64_t b, int64_t e, float* part) {
    for (int64_t n = b; n < e; ++n)
      t.rmsnorm_bwd(dy + n * stride, x + n * stride, w, rstd + n * H, dx + n * stride, part, H, D, false);
  });
}

}  // namespace temper::kernels
