#include "temper/kernels/paged_attention.h"

#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {
constexpr int64_t kMaxHeadDim = 512, kMaxBlock = 256;
}

void paged_attention_fwd(const PagedAttnArgs& a) {
  TEMPER_CHECK(a.H % a.Hkv == 0 && a.block_size > 0) << "paged attention: bad shape";
  TEMPER_CHECK(a.D <= kMaxHeadDim && a.block_size <= kMaxBlock)
      << "paged attention: head_dim " << a.D << " (max " << kMaxHeadDim << ") or block size " << a.block_size << " (max "
      << kMaxBlock << ") too large";
  const IsaTable& t = isa_table();
  const int64_t group = a.H / a.Hkv, row = a.Hkv * a.D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.D));
  parallel_tasks(a.n * a.H, [&](int64_t task) {
    const int64_t i = task / a.H, h = task % a.H, g = h / group;
    const int64_t len = a.kv_len[i];
    const int32_t* table = a.block_tables[i];
    const float* q = a.q + i * a.q_stride + h * a.D;
    float* o = a.o + i * a.o_stride + h * a.D;
    float acc[kMaxHeadDim] = {}, scores[kMaxBlock];  // on the stack: no allocation on any thread
    float m = -INFINITY, l = 0.f;
    for (int64_t b0 = 0; b0 < len; b0 += a.block_size) {
      const int64_t nb = b0 + a.block_size <= len ? a.block_size : len - b0;
      const int64_t blk = table[b0 / a.block_size];
      const float* K = a.k_pool + blk * a.block_size * row + g * a.D;
      const float* V = a.v_pool + blk * a.block_size * row + g * a.D;
      t.attn_block_update(q, K, V, row, nb, a.D, scale, scores, &m, &l, acc);
    }
    const float inv = l > 0.f ? 1.0f / l : 0.f;
    for (int64_t d = 0; d < a.D; ++d) o[d] = acc[static_cast<size_t>(d)] * inv;
  });
}

}  // namespace temper::kernels
