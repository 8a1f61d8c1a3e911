// Causal grouped-query attention for training: O = softmax(Q K^T / sqrt(D) + causal) V, H query
// heads sharing Hkv KV heads (head h uses KV head h / (H/Hkv)), as HF eager attention computes it.
// Flash-style: the forward works on blocks of 64 queries and never forms a [T, T] matrix; it saves
// the log-sum-exp per query row, and the backward recomputes P from it. Scratch is O(64 * T) per
// thread. Tokens are rows of the projection outputs: q [B*T, q_stride], head h at column h*D.
#pragma once

#include <cstdint>

namespace temper::kernels {

struct AttnShape {
  int64_t B, T, H, Hkv, D;
  int64_t q_stride, kv_stride, o_stride;  // floats between consecutive tokens
};

// o [B*T, o_stride]; lse [B, H, T]
void attention_fwd(const AttnShape& s, const float* q, const float* k, const float* v, float* o, float* lse);
// Writes dq, dk, dv (overwritten). Needs the forward's o and lse.
void attention_bwd(const AttnShape& s, const float* q, const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv);

// Shared-prefix ("packed") attention: tokens are rows of one packed array, cut into segments. A
// segment's queries see, in order, the keys of an optional prefix (rows prefix_start..+prefix_len,
// typically the prompt a GRPO group shares, stored once) and then their own segment causally. So a
// group of G completions of one prompt costs the prompt's tokens once instead of G times, and no
// row carries padding. Positions (RoPE) are the caller's. lse [H, N] (N = rows of the packed array).
struct AttnSegment {
  int64_t start = 0, len = 0;                // the segment's rows
  int64_t prefix_start = 0, prefix_len = 0;  // keys before them; prefix_len 0: none
};
struct PackedAttnShape {
  int64_t N, H, Hkv, D;
  int64_t q_stride, kv_stride, o_stride;
  const AttnSegment* segs;
  int64_t nsegs;
};
void attention_fwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, float* o,
                          float* lse);
// Writes dq, dk, dv (overwritten); a prefix's dk/dv sum every segment that reads it.
void attention_bwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv);

}  // namespace temper::kernels
