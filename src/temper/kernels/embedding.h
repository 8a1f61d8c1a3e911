// Token embedding lookup and its backward (scatter-add into the table). The backward splits the
// channel dim across threads and walks tokens in order, so repeated ids add in a fixed order.
#pragma once

#include <cstdint>

namespace temper::kernels {

// out[n] = table[ids[n]]; table [V, C], out [N, C]. Throws on an id outside [0, V).
void embedding_fwd(const float* table, const int32_t* ids, float* out, int64_t N, int64_t V, int64_t C);
// dtable[ids[n]] += dout[n]
void embedding_bwd(const float* dout, const int32_t* ids, float* dtable, int64_t N, int64_t C);

}  // namespace temper::kernels
