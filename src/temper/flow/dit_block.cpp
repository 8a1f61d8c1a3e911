#include "temper/flow/dit_block.h"

#include "temper/core/profile.h"
#include "temper/flow/dit_ops.h"
#include "temper/flow/layer_norm.h"
#include "temper/kernels/attention.h"

namespace temper::flow {
namespace {

// The product alone: its bias is folded into the op that reads it (GELU, the gated residual).
LinearView product(const float* p, const DitLinearAt& at) {
  return {p + at.w, nullptr, at.in, at.out};
}

kernels::AttnShape attn_shape(const DitConfig& c, int64_t B) {
  const int64_t C = c.hidden;
  kernels::AttnShape s{B, c.tokens(), c.heads, c.heads, c.head_dim(), 3 * C, 3 * C, C, {}};
  s.causal = false;
  return s;
}

}  // namespace

void DitBlockTape::resize(const DitConfig& c, int64_t B) {
  const int64_t N = B * c.tokens(), C = c.hidden, F = c.ffn();
  grow(mod, B * 6 * C);
  for (auto* v : {&h1, &a1, &att, &proj, &h2, &a2, &m}) grow(*v, N * C);
  grow(rstd1, N), grow(rstd2, N);
  grow(qkv, N * 3 * C);
  grow(lse, B * c.heads * c.tokens());
  grow(u, N * F), grow(g, N * F);
}

void DitBlockScratch::resize(const DitConfig& c, int64_t B) {
  const int64_t N = B * c.tokens(), C = c.hidden;
  grow(dmod, B * 6 * C);
  grow(dbranch, N * C), grow(datt, N * C);
  grow(dqkv, N * 3 * C);
  grow(du, N * c.ffn());
}

void dit_block_fwd(const DitConfig& c, const DitBlockAt& at, const float* params, const float* sc, int64_t B, float* x,
                   DitBlockTape& t) {
  const int64_t T = c.tokens(), N = B * T, C = c.hidden, F = c.ffn(), M = 6 * C;
  const kernels::Precision pr = c.precision;
  t.resize(c, B);
  float* mod = t.mod.data();
  linear_fwd(view(params, at.ada), sc, B, mod, pr);
  // attention branch
  adaln_fwd(x, B, T, C, kDitNormEps, {mod, mod + C, M}, t.h1.data(), t.rstd1.data(), t.a1.data());
  linear_fwd(view(params, at.qkv), t.a1.data(), N, t.qkv.data(), pr);
  const float* q = t.qkv.data();
  {
    TEMPER_PROFILE("dit.attention");
    kernels::attention_fwd(attn_shape(c, B), q, q + C, q + 2 * C, t.att.data(), t.lse.data());
  }
  linear_fwd(product(params, at.proj), t.att.data(), N, t.proj.data(), pr);
  gated_add_fwd(x, mod + 2 * C, M, t.proj.data(), params + at.proj.b, B, T, C);
  // MLP branch
  adaln_fwd(x, B, T, C, kDitNormEps, {mod + 3 * C, mod + 4 * C, M}, t.h2.data(), t.rstd2.data(), t.a2.data());
  linear_fwd(product(params, at.fc1), t.a2.data(), N, t.u.data(), pr);
  gelu_bias_fwd(t.u.data(), params + at.fc1.b, t.g.data(), N, F);
  linear_fwd(product(params, at.fc2), t.g.data(), N, t.m.data(), pr);
  gated_add_fwd(x, mod + 5 * C, M, t.m.data(), params + at.fc2.b, B, T, C);
}

void dit_block_bwd(const DitConfig& c, const DitBlockAt& at, const float* params, const float* sc, int64_t B,
                   const DitBlockTape& t, float* dx, float* grad, float* dsc, DitBlockScratch& s) {
  const int64_t T = c.tokens(), N = B * T, C = c.hidden, F = c.ffn(), M = 6 * C;
  const kernels::Precision pr = c.precision;
  s.resize(c, B);
  const float* mod = t.mod.data();
  float* dmod = s.dmod.data();
  float* db = s.dbranch.data();
  // MLP branch: x_out = x_mid + gate2 * fc2(gelu(fc1(a2)))
  const DitLinearAt &f1 = at.fc1, &f2 = at.fc2;
  gated_add_bwd(dx, mod + 5 * C, M, t.m.data(), params + f2.b, B, T, C, dmod + 5 * C, M, db, grad + f2.b);
  linear_bwd(product(params, f2), t.g.data(), db, N, grad + f2.w, nullptr, s.du.data(), false, pr);
  gelu_bias_bwd(t.u.data(), s.du.data(), s.du.data(), grad + f1.b, N, F);
  linear_bwd(product(params, f1), t.a2.data(), s.du.data(), N, grad + f1.w, nullptr, db, false, pr);
  adaln_bwd(db, t.h2.data(), t.rstd2.data(), B, T, C, {mod + 3 * C, mod + 4 * C, M}, dmod + 3 * C, dmod + 4 * C, M, dx);
  // attention branch: x_mid = x_in + gate1 * proj(attn(qkv(a1)))
  const DitLinearAt& pj = at.proj;
  gated_add_bwd(dx, mod + 2 * C, M, t.proj.data(), params + pj.b, B, T, C, dmod + 2 * C, M, db, grad + pj.b);
  linear_bwd(product(params, pj), t.att.data(), db, N, grad + pj.w, nullptr, s.datt.data(), false, pr);
  const float* q = t.qkv.data();
  float* dq = s.dqkv.data();
  {
    TEMPER_PROFILE("dit.attention");
    kernels::attention_bwd(attn_shape(c, B), q, q + C, q + 2 * C, t.att.data(), t.lse.data(), s.datt.data(), dq, dq + C,
                           dq + 2 * C);
  }
  const DitLinearAt& qk = at.qkv;
  linear_bwd(view(params, qk), t.a1.data(), dq, N, grad + qk.w, grad + qk.b, db, false, pr);
  adaln_bwd(db, t.h1.data(), t.rstd1.data(), B, T, C, {mod, mod + C, M}, dmod, dmod + C, M, dx);
  // the modulation: mod = SiLU(c) W_ada^T + b_ada
  const DitLinearAt& ad = at.ada;
  linear_bwd(view(params, ad), sc, dmod, B, grad + ad.w, grad + ad.b, dsc, true, pr);
}

}  // namespace temper::flow
