// One DiT block with adaLN-Zero (DiT's DiTBlock): from c's SiLU, shift/scale/gate for the attention and
// the MLP branch (one linear layer, [6 * hidden] per item); x += gate1 * attn(modulate(norm1(x))), then
// x += gate2 * mlp(modulate(norm2(x))). Attention: bidirectional multi-head (kernels::attention_fwd with
// the causal mask off), fused qkv projection; MLP: fc1, GELU(tanh), fc2. The backward reads the tape the
// forward filled. Leaves out: dropout, attention masks, learned sigma.
#pragma once

#include <cstdint>
#include <vector>

#include "temper/flow/dit_config.h"
#include "temper/flow/dit_layout.h"
#include "temper/flow/dit_ops.h"

namespace temper::flow {

inline constexpr float kDitNormEps = 1e-6f;

// A scratch buffer grown to at least n elements (reused across calls).
template <class T>
void grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// A linear layer's weights and bias in the flat parameters.
inline LinearView view(const float* p, const DitLinearAt& at) {
  return {p + at.w, p + at.b, at.in, at.out};
}

// What the block's backward needs, for B items of T tokens (N = B*T rows).
struct DitBlockTape {
  std::vector<float> mod;                  // [B, 6C]: shift1, scale1, gate1, shift2, scale2, gate2
  std::vector<float> h1, rstd1, a1;        // norm1's rows, 1/std, modulated rows [N, C]
  std::vector<float> qkv, att, lse, proj;  // [N, 3C], attention output [N, C], [B, H, T], proj product (no bias) [N, C]
  std::vector<float> h2, rstd2, a2;        // norm2, as norm1
  std::vector<float> u, g, m;              // fc1 output + bias [N, F], its GELU [N, F], fc2 product (no bias) [N, C]
  void resize(const DitConfig& c, int64_t B);
};

// Scratch of the backward, shared by the blocks.
struct DitBlockScratch {
  std::vector<float> dmod, dbranch, dqkv, datt, du;
  void resize(const DitConfig& c, int64_t B);
};

// x [B*T, C] in place; sc = SiLU(c) [B, C].
void dit_block_fwd(const DitConfig& c, const DitBlockAt& at, const float* params, const float* sc, int64_t B, float* x,
                   DitBlockTape& tape);
// dx [B*T, C]: d loss / d (the block's output) in, d loss / d (its input) out. grad: the flat gradient
// (the block's tensors at the layout's offsets, accumulated); dsc [B, C] += d loss / d SiLU(c).
void dit_block_bwd(const DitConfig& c, const DitBlockAt& at, const float* params, const float* sc, int64_t B,
                   const DitBlockTape& tape, float* dx, float* grad, float* dsc, DitBlockScratch& s);

}  // namespace temper::flow
