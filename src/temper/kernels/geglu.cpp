#include "temper/kernels/geglu.h"

#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

void geglu_fwd(const float* gu, float* h, int64_t N, int64_t F) {
  const IsaTable& t = isa_table();
  parallel_for(N, 4, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) t.geglu_fwd(gu + n * 2 * F, gu + n * 2 * F + F, h + n * F, F);
  });
}

void geglu_bwd(const float* gu, const float* dh, float* dgu, int64_t N, int64_t F) {
  const IsaTable& t = isa_table();
  parallel_for(N, 4, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      t.geglu_bwd(gu + n * 2 * F, gu + n * 2 * F + F, dh + n * F, dgu + n * 2 * F, dgu + n * 2 * F + F, F);
  });
}

}  // namespace temper::kernels
