// Causal grouped-query attention for training: O = softmax(Q K^T / sqrt(D) + causal) V, H query
// heads sharing Hkv KV heads (head h uses KV head h / (H/Hkv)), as HF eager attention computes it.
// Flash-style: the forward works on blocks of 64 queries and never forms a [T, T] matrix; it saves
// the log-sum-exp per query row, and the backward recomputes P from it. Scratch is O(64 * T) per
// thread. Tokens are rows of the projection outputs: q [B*T, q_stride], head h at column h*D.
// AttnOpts adds the score variants of Gemma-2/3, Mistral and Phi-3 (HF eager attention, transformers
// 4.51: scores scaled, soft-capped, then masked): a custom scale, tanh soft-capping, a sliding window.
// AttnShape::causal = false drops the mask (a DiT's image patches all see each other).
// The products run on the ISA's register-tiled kernels (cpu/attention_tiles.inc). Precision::bf16 (the model's
// bf16 training) makes the backward's four gradient products bf16 x bf16 with f32 sums (AVX512-BF16 dot
// products where the CPU has them); the forward and the backward's recomputed P stay f32 on the bf16-rounded
// K/V the model gives, so the training forward keeps the rollout engine's log-probs (rollout/engine.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "temper/core/cpu_features.h"
#include "temper/kernels/matmul.h"

namespace temper::kernels {

// Variants of the score function beyond softmax(q.k / sqrt(D)) under the causal mask (Gemma, Mistral, Phi-3).
struct AttnOpts {
  float scale = 0.f;    // 0: 1/sqrt(D); else the factor on q.k (Gemma: query_pre_attn_scalar^-0.5)
  float softcap = 0.f;  // > 0: s = softcap * tanh(s / softcap) on the scaled score, before the mask (Gemma-2)
  int64_t window = 0;   // > 0: a query at position p sees keys at positions j with p - window < j <= p
};

// The factor on q.k for head dim D.
inline float attn_scale(const AttnOpts& opt, int64_t D) {
  return opt.scale > 0.f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
}
// Throws naming the field when an option is negative or not finite.
void attn_opts_check(const AttnOpts& opt, const char* kernel);

// lse is the log-sum-exp of the final (scaled, capped) scores in every kernel; the backward chains
// through the cap: ds_raw = ds * (1 - tanh^2).
struct AttnShape {
  int64_t B, T, H, Hkv, D;
  int64_t q_stride, kv_stride, o_stride;  // floats between consecutive tokens
  AttnOpts opt{};
  bool causal = true;  // false: every query sees all T keys (a DiT's image patches; no window; CPU only)
  Precision precision = Precision::f32;  // bf16: the backward's gradient products in bf16 (above)
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
// A window counts positions as in the unpacked sequence: the prefix's rows 0..prefix_len-1, then the
// segment's rows prefix_len + t (a segment row may see part of its prefix, or none of it).
struct AttnSegment {
  int64_t start = 0, len = 0;                // the segment's rows
  int64_t prefix_start = 0, prefix_len = 0;  // keys before them; prefix_len 0: none
};
struct PackedAttnShape {
  int64_t N, H, Hkv, D;
  int64_t q_stride, kv_stride, o_stride;
  const AttnSegment* segs;
  int64_t nsegs;
  AttnOpts opt{};
  Precision precision = Precision::f32;  // as AttnShape::precision
};
void attention_fwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, float* o,
                          float* lse);
// Writes dq, dk, dv (overwritten); a prefix's dk/dv sum every segment that reads it.
void attention_bwd_packed(const PackedAttnShape& s, const float* q, const float* k, const float* v, const float* o,
                          const float* lse, const float* dout, float* dq, float* dk, float* dv);

// The kernels these functions run on, as the ISA's table chose them (cpu/isa_table.h's attn_kernel and
// attn_bf16_kernel), for `temper info` and the bench JSON: e.g. "tiles avx512, backward bf16 products: vdpbf16ps".
std::string attention_kernel_name(Isa isa);
std::string attention_kernel_name();  // the active ISA's

}  // namespace temper::kernels
