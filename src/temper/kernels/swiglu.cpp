#include "temper/kernels/swiglu.h"

#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

void swiglu_fwd(const float* gate, const float* up, float* h, int64_t n) {
  const IsaTable& t = isa_table();
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { t.swiglu_fwd(gate + b, up + b, h + b, e - b); });
}

void swiglu_bwd(const float* gate, const float* up, const float* dh, float* dgate, float* dup, int64_t n) {
  const IsaTable& t = isa_table();
  parallel_for(n, 1 << 14,
               [&](int64_t b, int64_t e) { t.swiglu_bwd(gate + b, up + b, dh + b, dgate + b, dup + b, e - b); });
}

}  // namespace temper::kernels
