#include "temper/flow/dit.h"

#include <cmath>
#include <cstring>

#include "temper/core/error.h"
#include "temper/core/profile.h"
#include "temper/core/rng.h"
#include "temper/flow/dit_embed.h"
#include "temper/flow/dit_ops.h"
#include "temper/flow/layer_norm.h"

namespace temper::flow {

Dit::Dit(DitConfig c) : cfg_(c), layout_((c.validate(), c)) {
  params_.assign(static_cast<size_t>(layout_.total), 0.f);
  pos_ = sincos_pos_embed(cfg_.hidden, cfg_.grid());
}

void Dit::init_params(uint64_t seed) {
  std::fill(params_.begin(), params_.end(), 0.f);
  auto xavier = [&](const DitLinearAt& l, uint64_t stream) {
    const float bound = static_cast<float>(std::sqrt(6.0 / static_cast<double>(l.in + l.out)));
    rng_fill_uniform(seed, stream, std::span<float>(params_.data() + l.w, static_cast<size_t>(l.in * l.out)), -bound,
                     bound);
  };
  auto normal = [&](int64_t at, int64_t n, uint64_t stream) {
    rng_fill_normal(seed, stream, std::span<float>(params_.data() + at, static_cast<size_t>(n)), 0.f, 0.02f);
  };
  xavier(layout_.patch, 0);
  normal(layout_.t1.w, layout_.t1.in * layout_.t1.out, 1);
  normal(layout_.t2.w, layout_.t2.in * layout_.t2.out, 2);
  normal(layout_.y_table, (cfg_.classes + 1) * cfg_.hidden, 3);
  for (size_t i = 0; i < layout_.blocks.size(); ++i) {
    const DitBlockAt& b = layout_.blocks[i];
    const uint64_t s = 4 + 4 * i;
    xavier(b.qkv, s), xavier(b.proj, s + 1), xavier(b.fc1, s + 2), xavier(b.fc2, s + 3);
  }
  has_train_ = false;
}

void Dit::embed_conditions(const float* t, const int32_t* y, Tape& tp) {
  const int64_t B = tp.B, C = cfg_.hidden;
  const kernels::Precision pr = cfg_.precision;
  for (int64_t b = 0; b < B; ++b)
    TEMPER_CHECK(y[b] >= 0 && y[b] <= cfg_.classes)
        << "DiT forward: label y[" << b << "] = " << y[b] << " (expected 0.." << cfg_.classes - 1 << ", or "
        << cfg_.classes << " for the null label)";
  tp.y.assign(y, y + B);
  grow(tp.freq, B * cfg_.freq_dim);
  for (auto* v : {&tp.t_pre, &tp.t_act, &tp.c, &tp.sc}) grow(*v, B * C);
  timestep_embedding(t, B, cfg_.freq_dim, cfg_.t_scale, tp.freq.data());
  linear_fwd(view(params_.data(), layout_.t1), tp.freq.data(), B, tp.t_pre.data(), pr);
  silu_fwd(tp.t_pre.data(), tp.t_act.data(), B * C);
  linear_fwd(view(params_.data(), layout_.t2), tp.t_act.data(), B, tp.c.data(), pr);
  const float* table = params_.data() + layout_.y_table;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C; ++k) tp.c[b * C + k] += table[y[b] * C + k];
  silu_fwd(tp.c.data(), tp.sc.data(), B * C);
}

void Dit::forward_tape(const float* x, const float* t, const int32_t* y, int64_t B, float* v, Tape& tp) {
  const int64_t T = cfg_.tokens(), N = B * T, C = cfg_.hidden, P = cfg_.patch_dim();
  const kernels::Precision pr = cfg_.precision;
  const float* p = params_.data();
  TEMPER_CHECK(B >= 1) << "DiT forward: batch " << B << " (expected >= 1)";
  tp.B = B;
  embed_conditions(t, y, tp);
  grow(tp.patches, N * P);
  grow(tp.x, N * C);
  patchify(x, B, cfg_.channels, cfg_.image, cfg_.patch, tp.patches.data());
  linear_fwd(view(p, layout_.patch), tp.patches.data(), N, tp.x.data(), pr);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < C; ++k) tp.x[r * C + k] += pos_[(r % T) * C + k];
  tp.blocks.resize(layout_.blocks.size());
  for (size_t i = 0; i < layout_.blocks.size(); ++i)
    dit_block_fwd(cfg_, layout_.blocks[i], p, tp.sc.data(), B, tp.x.data(), tp.blocks[i]);
  grow(tp.fmod, B * 2 * C);
  for (auto* w : {&tp.hf, &tp.af}) grow(*w, N * C);
  grow(tp.rstdf, N);
  grow(tp.out, N * P);
  linear_fwd(view(p, layout_.final_ada), tp.sc.data(), B, tp.fmod.data(), pr);
  adaln_fwd(tp.x.data(), B, T, C, kDitNormEps, {tp.fmod.data(), tp.fmod.data() + C, 2 * C}, tp.hf.data(),
            tp.rstdf.data(), tp.af.data());
  linear_fwd(view(p, layout_.final_linear), tp.af.data(), N, tp.out.data(), pr);
  unpatchify(tp.out.data(), B, cfg_.channels, cfg_.image, cfg_.patch, v);
}

void Dit::forward(const float* x, const float* t, const int32_t* y, int64_t B, float* v, bool train) {
  TEMPER_PROFILE("dit.forward");
  forward_tape(x, t, y, B, v, train ? train_ : eval_);
  if (train) has_train_ = true;
}

void Dit::backward_conditions(const Tape& tp, float* dsc, float* grad) {
  const int64_t B = tp.B, C = cfg_.hidden;
  const kernels::Precision pr = cfg_.precision;
  std::vector<float> dc(static_cast<size_t>(B * C)), dt(static_cast<size_t>(B * C));
  silu_bwd(tp.c.data(), dsc, dc.data(), B * C);
  float* dtable = grad + layout_.y_table;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C; ++k) dtable[tp.y[b] * C + k] += dc[b * C + k];
  const DitLinearAt &t1 = layout_.t1, &t2 = layout_.t2;
  linear_bwd(view(params_.data(), t2), tp.t_act.data(), dc.data(), B, grad + t2.w, grad + t2.b, dt.data(), false, pr);
  silu_bwd(tp.t_pre.data(), dt.data(), dt.data(), B * C);
  linear_bwd(view(params_.data(), t1), tp.freq.data(), dt.data(), B, grad + t1.w, grad + t1.b, nullptr, false, pr);
}

void Dit::backward(const float* dv, float* grad) {
  TEMPER_PROFILE("dit.backward");
  TEMPER_CHECK(has_train_) << "DiT backward: no training forward to differentiate (forward with train = true first)";
  const Tape& tp = train_;
  const int64_t B = tp.B, T = cfg_.tokens(), N = B * T, C = cfg_.hidden, P = cfg_.patch_dim();
  const kernels::Precision pr = cfg_.precision;
  const float* p = params_.data();
  grow(dtok_, N * P), grow(dout_, N * C), grow(dx_, N * C), grow(dsc_, B * C), grow(dfmod_, B * 2 * C);
  unpatchify_bwd(dv, B, cfg_.channels, cfg_.image, cfg_.patch, dtok_.data());
  const DitLinearAt &fl = layout_.final_linear, &fa = layout_.final_ada;
  linear_bwd(view(p, fl), tp.af.data(), dtok_.data(), N, grad + fl.w, grad + fl.b, dout_.data(), false, pr);
  std::memset(dx_.data(), 0, static_cast<size_t>(N * C) * sizeof(float));
  adaln_bwd(dout_.data(), tp.hf.data(), tp.rstdf.data(), B, T, C, {tp.fmod.data(), tp.fmod.data() + C, 2 * C},
            dfmod_.data(), dfmod_.data() + C, 2 * C, dx_.data());
  linear_bwd(view(p, fa), tp.sc.data(), dfmod_.data(), B, grad + fa.w, grad + fa.b, dsc_.data(), false, pr);
  for (size_t i = layout_.blocks.size(); i-- > 0;)
    dit_block_bwd(cfg_, layout_.blocks[i], p, tp.sc.data(), B, tp.blocks[i], dx_.data(), grad, dsc_.data(), scratch_);
  const DitLinearAt& pe = layout_.patch;
  linear_bwd(view(p, pe), tp.patches.data(), dx_.data(), N, grad + pe.w, grad + pe.b, nullptr, false, pr);
  backward_conditions(tp, dsc_.data(), grad);
}

}  // namespace temper::flow
