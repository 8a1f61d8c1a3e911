// What the LoRA tests (test_lora: adapters on the f32 model; test_qlora: on a base held as bf16 / int4 / nf4) share:
// the seven targets and five families, a per-row loss with no vanishing gradient, a random token batch, adapters
// with B drawn so they change the model, a model's copy, its logits, one training pass's gradients and their check
// by finite differences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/models.h"
#include "temper/core/rng.h"
#include "temper/kernels/classifier.h"
#include "temper/model/kv_pool.h"
#include "temper/model/lora.h"
#include "temper/model/transformer.h"

namespace temper::test {

inline const std::vector<LoraTarget> kAllLoraTargets = {
    LoraTarget::q, LoraTarget::k, LoraTarget::v, LoraTarget::o, LoraTarget::gate, LoraTarget::up, LoraTarget::down};
inline constexpr Arch kLoraArchs[] = {Arch::llama, Arch::qwen2, Arch::qwen3, Arch::gemma2, Arch::phi3};

// Per-row loss: weighted log-probs and entropies (a fixed pattern, so no gradient vanishes).
struct WeightedLoss : kernels::ClassifierLoss {
  std::vector<float> w;
  explicit WeightedLoss(int64_t n) {
    for (int64_t i = 0; i < n; ++i) w.push_back(i % 3 == 0 ? -0.7f : 0.4f + 0.05f * static_cast<float>(i % 5));
  }
  void coefs(int64_t n, float, float, float* g_lp, float* g_ent) const override {
    *g_lp = w[static_cast<size_t>(n)];
    *g_ent = 0.1f * w[static_cast<size_t>(n)];
  }
  double value(const std::vector<float>& lp, const std::vector<float>& ent) const {
    double s = 0;
    for (size_t i = 0; i < lp.size(); ++i) s += static_cast<double>(w[i]) * (lp[i] + 0.1 * ent[i]);
    return s;
  }
};

// B sequences of T random tokens, each position's target the next token (-1 at the end).
struct Batch {
  int64_t B = 2, T = 13;
  std::vector<int32_t> tokens, targets;
  Batch(const ModelConfig& cfg, uint64_t seed, int64_t b = 2, int64_t t = 13) : B(b), T(t) {
    Rng rng(seed, 0);
    for (int64_t i = 0; i < B * T; ++i) tokens.push_back(static_cast<int32_t>(rng.next_u32() % cfg.vocab_size));
    for (int64_t b0 = 0; b0 < B; ++b0)
      for (int64_t t0 = 0; t0 < T; ++t0) targets.push_back(t0 + 1 < T ? tokens[b0 * T + t0 + 1] : -1);
  }
  int64_t N() const { return B * T; }
};

// PEFT's init, then B drawn N(0, std) so the adapters change the model.
inline void randomize(LoraAdapters& ad, uint64_t seed, float std = 0.1f) {
  ad.init(seed);
  for (int64_t l = 0; l < ad.model_config().num_layers; ++l)
    for (LoraTarget t : ad.config().targets) {
      Tensor b = ad.b(l, t);
      rng_fill_normal(seed + 1, static_cast<uint64_t>(l * kLoraTargetCount + static_cast<int>(t)),
                      std::span<float>(b.data<float>(), static_cast<size_t>(b.numel())), 0.f, std);
    }
}

inline std::unique_ptr<Transformer> copy_of(const Transformer& m) {
  auto c = std::make_unique<Transformer>(m.config());
  std::memcpy(c->params(), m.params(), sizeof(float) * static_cast<size_t>(m.flat_size()));
  c->params_updated();
  c->set_precision(m.precision());
  return c;
}

inline std::vector<float> logits(Transformer& m, const Batch& b) {
  std::vector<float> z(static_cast<size_t>(b.N() * m.config().vocab_size));
  m.forward_logits(b.tokens.data(), b.B, b.T, z.data());
  return z;
}

struct Grads {
  std::vector<float> model, lora, lp, ent;
};

// One forward + backward of `loss`: the model's and (when given) the adapters' gradients, log-probs, entropies.
inline Grads train_pass(Transformer& m, LoraAdapters* ad, const Batch& b, const WeightedLoss& loss) {
  m.zero_grad();
  if (ad) ad->zero_grad();
  Grads g;
  g.lp.resize(static_cast<size_t>(b.N()));
  g.ent.resize(static_cast<size_t>(b.N()));
  m.forward_backward(b.tokens.data(), b.targets.data(), b.B, b.T, loss, g.lp.data(), g.ent.data());
  g.model.assign(m.grads(), m.grads() + m.flat_size());
  if (ad) g.lora.assign(ad->grads(), ad->grads() + ad->size());
  return g;
}

// Finite differences of the loss (central, eps 1e-2) at the largest analytic entries of A and of B of two adapters
// (layer 0's v, layer 1's down): each within 2% of the analytic gradient, which is not tiny.
template <class Objective>
void expect_adapter_gradients_match_differences(LoraAdapters& ad, const std::vector<float>& grad,
                                                const Objective& objective, Arch arch) {
  const int64_t r = ad.rank();
  for (auto [l, t] : {std::pair<int64_t, LoraTarget>{0, LoraTarget::v}, {1, LoraTarget::down}})
    for (bool is_a : {true, false}) {
      const LoraProduct& p = *ad.find(l, t);
      const int64_t off = is_a ? p.a : p.b, n = is_a ? r * p.in : p.out * r;
      int64_t best = off;
      for (int64_t i = off; i < off + n; ++i)
        if (std::fabs(grad[static_cast<size_t>(i)]) > std::fabs(grad[static_cast<size_t>(best)])) best = i;
      const float eps = 1e-2f, keep = ad.params()[best];
      ad.params()[best] = keep + eps;
      const double up = objective();
      ad.params()[best] = keep - eps;
      const double down = objective();
      ad.params()[best] = keep;
      const double fd = (up - down) / (2.0 * eps), an = grad[static_cast<size_t>(best)];
      EXPECT_GT(std::fabs(an), 1e-2) << arch_name(arch);
      EXPECT_NEAR(fd, an, 2e-2 * std::fabs(an))
          << arch_name(arch) << " layer " << l << " " << lora_target_name(t) << (is_a ? " A" : " B");
    }
}

inline double max_abs(const float* x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
  return m;
}

// The paged forward (a prefill chunk, then one token per step, two sequences per step) as log-probs of the targets.
inline std::vector<float> paged_logprobs(Transformer& m, const Batch& b, kernels::Precision prec) {
  const ModelConfig& cfg = m.config();
  const int64_t S = b.B, T = b.T, V = cfg.vocab_size, prefill = 6;
  KvPool pool(cfg, 8, 16, kv_dtype(prec));
  std::vector<SeqKv> seqs(static_cast<size_t>(S));
  for (SeqKv& s : seqs) pool.reserve(s, T);
  std::vector<float> got(static_cast<size_t>(S * T), 0.f);
  for (int64_t t0 = 0; t0 < T;) {
    const int64_t len = t0 == 0 ? prefill : 1;
    std::vector<int32_t> tok, pos;
    std::vector<const int32_t*> tables;
    std::vector<int64_t> rows, src;
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = t0; t < t0 + len; ++t) {
        rows.push_back(static_cast<int64_t>(tok.size()));
        src.push_back(s * T + t);
        tok.push_back(b.tokens[static_cast<size_t>(s * T + t)]);
        pos.push_back(static_cast<int32_t>(t));
        tables.push_back(seqs[static_cast<size_t>(s)].blocks.data());
      }
    std::vector<float> z(rows.size() * static_cast<size_t>(V));
    PagedStep st;
    st.n = st.n_out = static_cast<int64_t>(rows.size());
    st.tokens = tok.data();
    st.pos = pos.data();
    st.tables = tables.data();
    st.out_rows = rows.data();
    st.logits = z.data();
    m.forward_paged(st, pool);
    for (size_t i = 0; i < rows.size(); ++i) {
      const int32_t target = b.targets[static_cast<size_t>(src[i])];
      if (target < 0) continue;
      const float* zr = z.data() + i * static_cast<size_t>(V);
      double mx = zr[0], sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(zr[v]));
      for (int64_t v = 0; v < V; ++v) sum += std::exp(zr[v] - mx);
      got[static_cast<size_t>(src[i])] = static_cast<float>(zr[target] - mx - std::log(sum));
    }
    t0 += len;
  }
  return got;
}

}  // namespace temper::test
