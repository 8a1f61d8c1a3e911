#include "temper/kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "temper/core/error.h"
#include "temper/core/thread_pool.h"
#include "temper/kernels/cpu/isa_table.h"

namespace temper::kernels {

namespace {
// Per-task stack buffers: a query row's heads' accumulators (64 KiB), one block's scores for a group of
// query heads (64 KiB), a bf16 block's K and V rows of one head widened to f32 (2 x 32 KiB:
// block_size x head_dim <= kMaxWidened).
constexpr int64_t kMaxHeadDim = 512, kMaxBlock = 256, kMaxHeads = 128, kMaxQueryFloats = 16384, kMaxWidened = 8192,
                  kMaxScores = 16384;
}

void paged_attention_fwd(const PagedAttnArgs& a) {
  TEMPER_CHECK(a.H % a.Hkv == 0 && a.block_size > 0) << "paged attention: bad shape";
  TEMPER_CHECK((a.k_pool16 != nullptr) == (a.v_pool16 != nullptr)) << "paged attention: K and V caches of one dtype";
  TEMPER_CHECK(a.D <= kMaxHeadDim && a.block_size <= kMaxBlock)
      << "paged attention: head_dim " << a.D << " (max " << kMaxHeadDim << ") or block size " << a.block_size << " (max "
      << kMaxBlock << ") too large";
  TEMPER_CHECK(a.H <= kMaxHeads && a.H * a.D <= kMaxQueryFloats)
      << "paged attention: " << a.H << " heads x head_dim " << a.D << " (at most " << kMaxHeads << " heads, "
      << kMaxQueryFloats << " query floats)";
  attn_opts_check(a.opt, "paged_attention_fwd");
  const IsaTable& t = isa_table();
  const int64_t group = a.H / a.Hkv, row = a.Hkv * a.D;
  const float scale = attn_scale(a.opt, a.D), cap = a.opt.softcap;
  const bool widen = a.k_pool16 && a.block_size * a.D <= kMaxWidened;
  const int64_t elem = a.k_pool16 ? 2 : 4;  // bytes per K/V value
  const char* k_bytes = a.k_pool16 ? reinterpret_cast<const char*>(a.k_pool16) : reinterpret_cast<const char*>(a.k_pool);
  const char* v_bytes = a.k_pool16 ? reinterpret_cast<const char*>(a.v_pool16) : reinterpret_cast<const char*>(a.v_pool);
  // Query heads per kernel call: a KV head's whole group when its scores fit the scratch, else one.
  const int64_t hstep = group * ((a.block_size + 15) / 16 * 16) <= kMaxScores ? group : 1;
  // Positions [first, len) of a sequence of len are read: a window's first position may fall inside a block.
  auto first_of = [&](int64_t len) { return a.opt.window > 0 ? std::max<int64_t>(0, len - a.opt.window) : 0; };
  // K and V bytes [at + b, at + e) on their way into L2.
  auto prefetch_kv = [&](int64_t at, int64_t b, int64_t e) {
    for (int64_t off = b; off < e; off += 64) {
      __builtin_prefetch(k_bytes + at + off, 0, 2);
      __builtin_prefetch(v_bytes + at + off, 0, 2);
    }
  };
  // One task per sequence: each KV block is read once (all KV heads' rows, contiguous) while the query
  // heads of each KV head take it together (the ISA kernel shares each K/V row among them).
  parallel_tasks(a.n, [&](int64_t i) {
    const int64_t len = a.kv_len[i];
    const int32_t* table = a.block_tables[i];
    float acc[kMaxQueryFloats], scores[kMaxScores];  // on the stack: no allocation on any thread
    float m[kMaxHeads], l[kMaxHeads];
    float widened[2 * kMaxWidened];  // a bf16 block's rows in f32, where the ISA kernel needs them
    for (int64_t h = 0; h < a.H; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.f;
      std::fill(acc + h * a.D, acc + (h + 1) * a.D, 0.f);
    }
    // The next sequence's first block on its way too (tasks are taken roughly in order): a task's first block has no
    // earlier one to hide behind.
    if (i + 1 < a.n && a.kv_len[i + 1] > 0) {
      const int64_t nlen = a.kv_len[i + 1], nb0 = first_of(nlen) / a.block_size * a.block_size;
      prefetch_kv(a.block_tables[i + 1][nb0 / a.block_size] * a.block_size * row * elem, 0,
                  std::min(a.block_size, nlen - nb0) * row * elem);
    }
    const int64_t first = first_of(len);
    for (int64_t b0 = first / a.block_size * a.block_size; b0 < len; b0 += a.block_size) {
      const int64_t p0 = std::max(b0, first), nb = std::min(b0 + a.block_size, len) - p0;
      const int64_t blk = table[b0 / a.block_size];
      // The next block's K and V rows on their way into L1 while this one is used: a share with each head group's pass,
      // which the ISA kernel spreads over its keys (a burst of the whole block's lines at once holds the miss buffers
      // this block's own loads need: with the burst into L2, 19.3-20.6 ms for bench/paged_attention's step; spread
      // into L1, 11.7-12.2).
      const int64_t b1 = b0 + a.block_size, next_bytes = b1 < len ? std::min(a.block_size, len - b1) * row * elem : 0;
      const int64_t next_at = next_bytes > 0 ? table[b1 / a.block_size] * a.block_size * row * elem : 0;
      const int64_t passes = (a.H + hstep - 1) / hstep, share = (next_bytes / 64 + passes - 1) / passes * 64;
      for (int64_t h = 0; h < a.H; h += hstep) {  // the query heads of one KV head together
        const int64_t pb = h / hstep * share, pe = std::min(next_bytes, (h / hstep + 1) * share);
        const PrefetchSpan pf{k_bytes + next_at + pb, v_bytes + next_at + pb, pe > pb ? (pe - pb + 63) / 64 : 0};
        const int64_t at = (blk * a.block_size + p0 - b0) * row + h / group * a.D;
        if (a.k_pool16)
          t.attn_group_update_bf16(a.q + i * a.q_stride + h * a.D, hstep, a.k_pool16 + at, a.v_pool16 + at, row, nb,
                                   a.D, scale, cap, scores, m + h, l + h, acc + h * a.D, widen ? widened : nullptr, pf);
        else
          t.attn_group_update(a.q + i * a.q_stride + h * a.D, hstep, a.k_pool + at, a.v_pool + at, row, nb, a.D, scale,
                              cap, scores, m + h, l + h, acc + h * a.D, pf);
      }
    }
    for (int64_t h = 0; h < a.H; ++h) {
      float* o = a.o + i * a.o_stride + h * a.D;
      const float inv = l[h] > 0.f ? 1.0f / l[h] : 0.f;
      for (int64_t d = 0; d < a.D; ++d) o[d] = acc[h * a.D + d] * inv;
      if (a.lse) a.lse[i * a.H + h] = m[h] + std::log(l[h]);
    }
  });
}

}  // namespace temper::kernels
