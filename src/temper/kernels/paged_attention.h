// Attention of new query tokens over a paged KV cache (the rollout engine's decode and prefill):
// query row i attends positions [0, kv_len[i]) of its sequence, whose K/V rows live in fixed-size
// blocks listed by its block table. GQA as in attention.h (head h reads KV head h / (H/Hkv)).
// One pass with an online softmax per (row, head) — flash-decoding style, no [T, T] matrix; a row's visible
// positions are cut where they cross a multiple of 512 (rounded up to whole blocks) into pieces whose states
// merge (the cuts are fixed: a row's result depends on the row only). Each thread streams through a contiguous
// run of rows and pieces.
// Forward only (rollouts need no gradient). Reference: kernels/ref/attention_ref.h on gathered K/V.
// opt (attention.h): with a window, row i sees positions (kv_len[i]-1-window, kv_len[i]-1] and reads no
// block wholly before them (their table entries may be -1: freed blocks of a sliding-window layer).
#pragma once

#include <cstdint>

#include "temper/kernels/attention.h"

namespace temper::kernels {

struct PagedAttnArgs {
  int64_t n = 0;  // query rows
  int64_t H = 0, Hkv = 0, D = 0;
  const float* q = nullptr;  // [n, q_stride], head h at column h*D
  int64_t q_stride = 0;
  float* o = nullptr;  // [n, o_stride]
  int64_t o_stride = 0;
  const int32_t* const* block_tables = nullptr;  // per row: its sequence's block table
  const int64_t* kv_len = nullptr;               // per row: keys it sees (its position + 1)
  const float* k_pool = nullptr;  // one layer: block b's rows at k_pool + b*block_size*Hkv*D
  const float* v_pool = nullptr;
  const uint16_t* k_pool16 = nullptr;  // or, for a bf16 cache, its rows (then k_pool/v_pool are unused)
  const uint16_t* v_pool16 = nullptr;
  int64_t block_size = 0;
  // Optional [n, H]: log-sum-exp of each row's scaled scores per head (the training kernels' lse, so the
  // update can run the backward over a rollout's activations).
  float* lse = nullptr;
  AttnOpts opt{};
};

void paged_attention_fwd(const PagedAttnArgs& a);

}  // namespace temper::kernels
